#!/usr/bin/env bash
# Request framing that two HTTP parsers could read two ways is refused
# with 400 and the connection closed (RFC 9112 6.3), so a request hidden
# in the body never runs (issue 17: each of these granted a hidden acquire
# of another lock). Each case sends one request with a hidden acquire of
# lock smuggledN behind it, then checks: one reply, 400, the connection
# closed, and smuggledN never granted.
set -u
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
h_start_redis
h_start_picketd
python3 - "$PICKETD_PORT" <<'PY' || h_fail "framing"
import socket, sys, json, urllib.request
port = int(sys.argv[1])

def exchange(data):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(data)
    out, closed = b"", False
    try:
        while True:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            out += d
    except socket.timeout:
        pass
    s.close()
    return out, closed

hidden = b"POST /v1/locks/smuggled%d/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
front = b"POST /v1/locks/front/acquire HTTP/1.1\r\nHost: x\r\n"
cases = [
    ("Content-Length with Transfer-Encoding",
     lambda h: front + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + h),
    ("Transfer-Encoding with Content-Length",
     lambda h: front + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + h),
    ("two Content-Length values",
     lambda h: front + b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(h) + h),
    ("a space before the colon",
     lambda h: front + b"Content-Length : %d\r\n\r\n" % len(h) + h),
    ("Transfer-Encoding 'chunked ' with a trailing space",
     lambda h: front + b"Transfer-Encoding: chunked \r\nContent-Length: 0\r\n\r\n" + h),
    ("Transfer-Encoding gzip, chunked",
     lambda h: front + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" + h),
    ("a control byte in a header value",
     lambda h: front + b"X-Note: a\x01b\r\nContent-Length: 0\r\n\r\n" + h),
    # libmicrohttpd reads a value up to a NUL: this is Content-Length 0 to
    # it, the hidden request's length to a parser that skips the NUL
    ("a NUL inside Content-Length",
     lambda h: front + b"Content-Length: 0\x00%d\r\n\r\n" % len(h) + h),
    ("a NUL inside another header's value",
     lambda h: front + b"X-Note: a\x00b\r\nContent-Length: 0\r\n\r\n" + h),
    ("a NUL inside the last header's value",
     lambda h: front + b"Content-Length: 0\r\nX-Note: a\x00b\r\n\r\n" + h),
    ("a header line ended by a bare LF",
     lambda h: front + b"X-Note: a\nContent-Length: 0\r\n\r\n" + h),
    ("the last header line ended by a bare LF",
     lambda h: front + b"Content-Length: 0\n\r\n" + h),
    ("the request line ended by a bare LF",
     lambda h: b"POST /v1/locks/front/acquire HTTP/1.1\nHost: x\r\nContent-Length: 0\r\n\r\n" + h),
    ("the empty line a bare LF",
     lambda h: front + b"Content-Length: 0\r\n\n" + h),
    ("a folded header line",
     lambda h: front + b"X-Note: a\r\n b\r\nContent-Length: 0\r\n\r\n" + h),
]
failed = 0
for i, (name, make) in enumerate(cases):
    out, closed = exchange(make(hidden % i))
    replies = out.count(b"HTTP/1.1 ")
    status = out.split(b"\r\n", 1)[0]
    ok = status.startswith(b"HTTP/1.1 400") and replies == 1 and closed
    if ok and b'"invalid_argument"' not in out:
        ok = False
    with urllib.request.urlopen("http://127.0.0.1:%d/v1/locks/smuggled%d" % (port, i)) as r:
        held = json.load(r)
    if held["fence"] != 0:
        ok = False
    print("%s: %s (%s, %d replies, closed %s, hidden lock fence %d)" %
          ("ok" if ok else "FAIL", name, status.decode(), replies, closed, held["fence"]))
    failed += not ok
# and an honest request on a keep-alive connection still works
out, _ = exchange(b"POST /v1/locks/honest/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                  b"Connection: close\r\n\r\n{}")
if not out.startswith(b"HTTP/1.1 200"):
    print("FAIL: an honest request: %r" % out[:80]); failed += 1
print("%d passed, %d failed" % (len(cases) + 1 - failed, failed))
sys.exit(1 if failed else 0)
PY
