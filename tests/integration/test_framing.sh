#!/usr/bin/env bash
# Request framing that two HTTP parsers could read two ways is refused
# with 400 and the connection closed (RFC 9112 6.3), so a request hidden
# in the body never runs (issue 17: each of these granted a hidden acquire
# of another lock). Any request with Transfer-Encoding is refused with 411
# length_required and the connection closed (issue 28: libmicrohttpd reads
# chunk lines ended by a bare LF, which a proxy may read otherwise). Each
# case sends one request with a hidden acquire of lock smuggledN behind it
# (in the chunked cases, inside what a parser that takes a bare LF for a
# line end reads as the chunk data, or after it), then checks: one reply,
# the status and code expected, the connection closed, and smuggledN never
# granted.
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

hidden = b"POST /v1/locks/smuggled%d/acquire HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"
front = b"POST /v1/locks/front/acquire HTTP/1.1\r\nHost: localhost\r\n"
BAD = (400, b'"invalid_argument"')
NO_LENGTH = (411, b'"length_required"')
cases = [
    ("Content-Length with Transfer-Encoding",
     lambda h: front + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + h, NO_LENGTH),
    ("Transfer-Encoding with Content-Length",
     lambda h: front + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + h, NO_LENGTH),
    ("two Content-Length values",
     lambda h: front + b"Content-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(h) + h, BAD),
    ("a space before the colon",
     lambda h: front + b"Content-Length : %d\r\n\r\n" % len(h) + h, BAD),
    ("Transfer-Encoding 'chunked ' with a trailing space",
     lambda h: front + b"Transfer-Encoding: chunked \r\nContent-Length: 0\r\n\r\n" + h, NO_LENGTH),
    ("Transfer-Encoding gzip, chunked",
     lambda h: front + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n" + h, NO_LENGTH),
    # RFC 9112 6.3: a final coding other than chunked is 400, and close
    ("Transfer-Encoding chunked, gzip",
     lambda h: front + b"Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n" + h, BAD),
    ("Transfer-Encoding gzip",
     lambda h: front + b"Transfer-Encoding: gzip\r\n\r\n" + h, BAD),
    ("two Transfer-Encoding lines",
     lambda h: front + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + h,
     NO_LENGTH),
    # chunked bodies, whatever their framing, are 411 before a byte of the
    # body is read: a well-formed one (CRLF) with the hidden request after
    # its last chunk...
    ("a chunked body, chunk lines ended by CRLF",
     lambda h: front + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + h, NO_LENGTH),
    # ...and bare-LF chunk lines (libmicrohttpd took "2\n" for "2\r\n"; a
    # parser that does not sees other chunks), the hidden request inside
    # the chunk data and after the body
    ("a chunked body, chunk lines ended by a bare LF",
     lambda h: front + b"Transfer-Encoding: chunked\r\n\r\n2\n{}\r\n0\n\r\n" + h, NO_LENGTH),
    ("a chunked body, the hidden request inside a bare-LF chunk",
     lambda h: front + b"Transfer-Encoding: chunked\r\n\r\n%x\n" % len(h) + h + b"\r\n0\r\n\r\n",
     NO_LENGTH),
    ("a chunked GET",
     lambda h: b"GET /v1/locks/front HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + h,
     NO_LENGTH),
    ("a control byte in a header value",
     lambda h: front + b"X-Note: a\x01b\r\nContent-Length: 0\r\n\r\n" + h, BAD),
    # libmicrohttpd reads a value up to a NUL: this is Content-Length 0 to
    # it, the hidden request's length to a parser that skips the NUL
    ("a NUL inside Content-Length",
     lambda h: front + b"Content-Length: 0\x00%d\r\n\r\n" % len(h) + h, BAD),
    ("a NUL inside another header's value",
     lambda h: front + b"X-Note: a\x00b\r\nContent-Length: 0\r\n\r\n" + h, BAD),
    ("a NUL inside the last header's value",
     lambda h: front + b"Content-Length: 0\r\nX-Note: a\x00b\r\n\r\n" + h, BAD),
    ("a header line ended by a bare LF",
     lambda h: front + b"X-Note: a\nContent-Length: 0\r\n\r\n" + h, BAD),
    ("the last header line ended by a bare LF",
     lambda h: front + b"Content-Length: 0\n\r\n" + h, BAD),
    ("the request line ended by a bare LF",
     lambda h: b"POST /v1/locks/front/acquire HTTP/1.1\nHost: localhost\r\nContent-Length: 0\r\n\r\n" + h, BAD),
    ("the empty line a bare LF",
     lambda h: front + b"Content-Length: 0\r\n\n" + h, BAD),
    ("a folded header line",
     lambda h: front + b"X-Note: a\r\n b\r\nContent-Length: 0\r\n\r\n" + h, BAD),
    # a bare LF in the header section of a chunked request: the header
    # check comes first
    ("a chunked request with a header line ended by a bare LF",
     lambda h: front + b"X-Note: a\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + h, BAD),
]
failed = 0
for i, (name, make, (want, code)) in enumerate(cases):
    out, closed = exchange(make(hidden % i))
    replies = out.count(b"HTTP/1.1 ")
    status = out.split(b"\r\n", 1)[0]
    ok = status.startswith(b"HTTP/1.1 %d" % want) and replies == 1 and closed
    if ok and code not in out:
        ok = False
    with urllib.request.urlopen("http://127.0.0.1:%d/v1/locks/smuggled%d" % (port, i)) as r:
        held = json.load(r)
    if held["fence"] != 0:
        ok = False
    print("%s: %s (%s, %d replies, closed %s, hidden lock fence %d)" %
          ("ok" if ok else "FAIL", name, status.decode(), replies, closed, held["fence"]))
    failed += not ok
# and an honest request on a keep-alive connection still works
out, _ = exchange(b"POST /v1/locks/honest/acquire HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                  b"Connection: close\r\n\r\n{}")
if not out.startswith(b"HTTP/1.1 200"):
    print("FAIL: an honest request: %r" % out[:80]); failed += 1
print("%d passed, %d failed" % (len(cases) + 1 - failed, failed))
sys.exit(1 if failed else 0)
PY
