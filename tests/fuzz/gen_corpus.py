#!/usr/bin/env python3
"""gen_corpus: the fuzzer's seed inputs made from the examples of
proto/openapi.yaml, in the input format of tests/fuzz/fuzz_api.c, so the
fuzzer starts from requests picketd really grants (tests/contract's
examples_probe checks that they are granted) and mutates from there.

    gen_corpus.py SPEC CORPUS_DIR          write the openapi-* files
    gen_corpus.py --check SPEC CORPUS_DIR  exit 1 if they are not what the
                                           spec gives (a test runs this)

It owns only the files named openapi-*; the hand-written edge cases
(edge-*) sit beside them. What it makes, for each lock-name example:
  * GET of the lock, and every acquire example as it is;
  * every renew and release example, after an acquire with the example's
    own lease id and followed by a GET, in one input;
  * the wait example against a foreign holder, once waiting out the wait
    and once with the holder expiring;
and once: every GET endpoint without parameters, and the first acquire
example under each kind of store failure.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "contract"))
import openapi_util as oa  # noqa: E402

SEP = b"\n--\n"
PREFIX = "openapi-"

# Request header bytes (fuzz_api.c): method, store failure, flags.
GET, POST = b"0", b"2"
NO_FAULT = b"0"
FLAG_NONE = b"0"
FLAG_PREHELD = b"2"             # 0x32: a foreign lease holds the lock
FLAG_PREHELD_EXPIRE = b":"      # 0x3a: that, and it expires before each retry
STORE_FAULTS = {                # stub_fault values, on every store call
    "unavailable": b"1", "error-reply": b"2", "misconfigured": b"3",
    "not-replicated": b"4", "unavailable-quiet": b"5", "odd-status": b"6",
    "long-message": b"7",
}


def request(method, path, body=None, fault=NO_FAULT, flags=FLAG_NONE):
    data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
    return method + fault + flags + path.encode() + b"\n" + data


def body_examples(spec, tmpl):
    op = spec["paths"][tmpl]["post"]
    media = oa.resolve(spec, op.get("requestBody") or {}).get("content", {}).get(
        "application/json", {})
    return [(name, oa.resolve(spec, ex)["value"])
            for name, ex in (media.get("examples") or {}).items()]


def slug(text):
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)


def inputs(spec):
    """Yields (file name, bytes) for every seed input the spec gives."""
    names = [ex["value"] for ex in
             spec["components"]["parameters"]["LockName"]["examples"].values()]
    acquires = body_examples(spec, "/v1/locks/{name}/acquire")
    for name in names:
        lock = "/v1/locks/" + name
        yield "inspect-" + slug(name), request(GET, lock)
        for ex_name, ex in acquires:
            yield "acquire-%s-%s" % (slug(ex_name), slug(name)), request(POST, lock + "/acquire", ex)
            if ex.get("wait_ms"):
                for tag, flags in (("waits-out", FLAG_PREHELD), ("holder-expires", FLAG_PREHELD_EXPIRE)):
                    yield ("acquire-%s-%s-%s" % (slug(ex_name), tag, slug(name)),
                           request(POST, lock + "/acquire", ex, flags=flags))
        for action in ("renew", "release"):
            for ex_name, ex in body_examples(spec, "/v1/locks/{name}/" + action):
                seq = [request(POST, lock + "/acquire", {"lease": ex["lease"]}),
                       request(POST, "%s/%s" % (lock, action), ex),
                       request(GET, lock)]
                yield "%s-%s-%s" % (action, slug(ex_name), slug(name)), SEP.join(seq)
    for tmpl, method, item, op in oa.operations(spec):
        if method == "GET" and "{" not in tmpl:
            yield "get-" + slug(tmpl.strip("/")), request(GET, tmpl)
    ex_name, ex = acquires[0]
    for fault_name, fault in STORE_FAULTS.items():
        yield ("acquire-%s-store-%s" % (slug(ex_name), fault_name),
               request(POST, "/v1/locks/%s/acquire" % names[0], ex, fault=fault))


def main(argv):
    check = argv[1:2] == ["--check"]
    if check:
        argv = argv[1:]
    if len(argv) != 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    spec, out = oa.load_spec(argv[1]), argv[2]
    want = {PREFIX + name: data for name, data in inputs(spec)}
    have = {f for f in os.listdir(out) if f.startswith(PREFIX)} if os.path.isdir(out) else set()
    if check:
        stale = sorted(have - set(want))
        wrong = sorted(f for f in want
                       if f not in have or open(os.path.join(out, f), "rb").read() != want[f])
        for f in stale:
            print("gen_corpus: %s is not made from the spec any more" % f)
        for f in wrong:
            print("gen_corpus: %s is missing or differs from the spec" % f)
        if stale or wrong:
            print("gen_corpus: run tests/fuzz/gen_corpus.py proto/openapi.yaml tests/fuzz/corpus")
            return 1
        print("gen_corpus: %d seed inputs match %s" % (len(want), argv[1]))
        return 0
    os.makedirs(out, exist_ok=True)
    for f in have - set(want):
        os.remove(os.path.join(out, f))
    for f, data in want.items():
        with open(os.path.join(out, f), "wb") as fh:
            fh.write(data)
    print("gen_corpus: wrote %d seed inputs to %s" % (len(want), out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
