#!/usr/bin/env python3
"""selftest: proves that validate_responses.py can fail, and fails for the
right reason. It runs the validator on hand-made contract logs: one that
conforms (it must pass and skip the fenced-kv exchange), then one log per
defect (each must fail and name the defect), then an empty and a missing log.

Usage: selftest.py SPEC   (proto/openapi.yaml)
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import openapi_util as oa  # noqa: E402
import validate_responses  # noqa: E402

VALIDATOR = os.path.join(HERE, "validate_responses.py")
LEASE = "3b9f0c6d2a1e48f7b5c4d3e2f1a09876"
JSON = "application/json"


def ex(method, path, status, body, ctype=JSON, retry_after="", allow=""):
    if not isinstance(body, str):
        body = json.dumps(body)
    return {"method": method, "path": path, "status": status, "content_type": ctype,
            "body": body, "retry_after": retry_after, "allow": allow}


def err(code, message="m", **more):
    e = {"code": code, "message": message}
    e.update(more)
    return {"error": e}


GRANT = {"lock": "inv", "lease": LEASE, "fence": 7, "ttl_ms": 30000, "owner": None}
HELD = err("lock_held", retry_after_ms=1500, owner="w1")
PROM = "text/plain; version=0.0.4; charset=utf-8"
METRICS = ("# HELP picket_requests_total Requests.\n# TYPE picket_requests_total counter\n"
           'picket_requests_total{endpoint="acquire",result="ok"} 3\n'
           'picket_request_duration_seconds_bucket{le="+Inf"} 3\npicket_redis_up 1\n')


def good_log(spec_text):
    return [
        ex("POST", "/v1/locks/inv/acquire", 200, GRANT),
        ex("POST", "/v1/locks/inv/acquire", 200, dict(GRANT, owner="w1", fence=8)),
        ex("POST", "/v1/locks/inv/acquire", 409, HELD, retry_after="2"),
        ex("POST", "/v1/locks/inv/acquire", 400, err("invalid_argument", "ttl_ms")),
        ex("POST", "/v1/locks/a%2Fb/acquire", 400, err("invalid_argument", "name")),
        ex("POST", "/v1/locks/inv/acquire", 413, err("body_too_large"), ctype=JSON + "; charset=utf-8"),
        ex("POST", "/v1/locks/inv/acquire", 503, err("store_unavailable")),
        ex("POST", "/v1/locks/inv/renew", 200, {"lock": "inv", "fence": 7, "ttl_ms": 1000}),
        ex("POST", "/v1/locks/inv/renew", 409, err("lease_lost")),
        ex("POST", "/v1/locks/inv/release", 200, {"lock": "inv", "released": True}),
        ex("POST", "/v1/locks/inv/release", 502, err("store_error", "WRONGTYPE")),
        ex("GET", "/v1/locks/inv", 200,
           {"lock": "inv", "held": False, "fence": 8, "ttl_ms": 0, "owner": None}),
        ex("GET", "/v1/locks/inv/acquire", 405, err("method_not_allowed"), allow="POST"),
        ex("DELETE", "/v1/locks/inv", 405, err("method_not_allowed"), allow="GET, HEAD"),
        ex("GET", "/v2/nothing", 404, err("not_found")),
        ex("GET", "/v1/locks/inv/acquire/extra", 404, err("not_found")),
        # A slash in a name, or no name: not the acquire template, so 404.
        ex("POST", "/v1/locks/a/b/acquire", 404, err("not_found")),
        ex("POST", "/v1/locks//acquire", 404, err("not_found")),
        ex("POST", "/v1/locks/billing.nightly%3Aeu-west-1/acquire", 200, GRANT),
        ex("GET", "/v1/locks/", 404, err("not_found")),
        ex("HEAD", "/healthz", 200, ""),
        ex("HEAD", "/v1/locks/inv/renew", 405, "", allow="POST"),
        ex("GET", "/healthz", 200, {"status": "ok"}),
        ex("GET", "/readyz", 200, {"status": "ready", "replicas": 0}),
        ex("GET", "/readyz", 503, err("store_unavailable")),
        ex("GET", "/metrics", 200, METRICS, ctype=PROM),
        ex("HEAD", "/v1/locks/inv", 200, ""),
        ex("GET", "/v1/openapi.yaml", 200, spec_text, ctype="application/yaml"),
        # fenced-kv replies share the harness but not the spec: skipped.
        ex("PUT", "/kv/k1", 409, err("stale_fence", highest=9)),
    ]


# (name, exchange, a phrase the failure must contain)
BAD = [
    ("missing field", ex("POST", "/v1/locks/inv/acquire", 200,
                         {k: v for k, v in GRANT.items() if k != "fence"}), "'fence' is a required"),
    ("lease shown by GET", ex("GET", "/v1/locks/inv", 200,
                              {"lock": "inv", "held": True, "fence": 1, "ttl_ms": 5,
                               "owner": None, "lease": LEASE}), "Additional properties"),
    ("owner of the wrong type", ex("POST", "/v1/locks/inv/acquire", 200, dict(GRANT, owner=5)),
     "owner"),
    ("fence not an integer", ex("POST", "/v1/locks/inv/acquire", 200, dict(GRANT, fence=1.5)),
     "fence"),
    ("fence zero", ex("POST", "/v1/locks/inv/acquire", 200, dict(GRANT, fence=0)), "minimum"),
    ("lease in upper case", ex("POST", "/v1/locks/inv/acquire", 200,
                               dict(GRANT, lease=LEASE.upper())), "does not match"),
    ("released false", ex("POST", "/v1/locks/inv/release", 200,
                          {"lock": "inv", "released": False}), "released"),
    ("code of another status", ex("POST", "/v1/locks/inv/acquire", 400, err("lock_held")),
     "code"),
    ("unknown error code", ex("GET", "/v1/locks/inv", 400, err("bad_name")), "code"),
    ("no Retry-After", ex("POST", "/v1/locks/inv/acquire", 409, HELD), "Retry-After is missing"),
    ("wrong Retry-After", ex("POST", "/v1/locks/inv/acquire", 409, HELD, retry_after="1"),
     "rounded up"),
    ("lock_held without owner", ex("POST", "/v1/locks/inv/acquire", 409,
                                   err("lock_held", retry_after_ms=10), retry_after="1"),
     "'owner' is a required"),
    ("no Allow", ex("GET", "/v1/locks/inv/acquire", 405, err("method_not_allowed")), "Allow"),
    ("wrong Allow", ex("GET", "/v1/locks/inv/renew", 405, err("method_not_allowed"),
                       allow="GET, POST"), "Allow"),
    ("undocumented status", ex("POST", "/v1/locks/inv/renew", 404, err("not_found")),
     "not documented"),
    ("unknown path answered", ex("GET", "/v1/lockz", 200, {"status": "ok"}), "must be 404"),
    ("unlisted method answered", ex("PUT", "/v1/locks/inv", 200, {}), "must be 405"),
    ("wrong method read as a bad name", ex("GET", "/v1/locks/inv/acquire", 400,
                                           err("invalid_argument")), "must be 405"),
    ("a slash in a name read as a bad name", ex("POST", "/v1/locks/a/b/acquire", 400,
                                                err("invalid_argument", "name")), "must be 404"),
    ("HEAD with a body", ex("HEAD", "/v1/locks/inv", 200, '{"lock":"inv"}'), "must have no body"),
    ("wrong Content-Type", ex("GET", "/healthz", 200, {"status": "ok"}, ctype="text/html"),
     "Content-Type"),
    ("body not JSON", ex("GET", "/healthz", 200, "ok\n"), "not JSON"),
    ("duplicate key", ex("GET", "/healthz", 200, '{"status":"ok","status":"ok"}'), "duplicate"),
    ("metrics not Prometheus", ex("GET", "/metrics", 200, "picket_up one\n", ctype=PROM),
     "not a sample"),
    ("metric not picket_*", ex("GET", "/metrics", 200, "go_threads 5\n", ctype=PROM), "picket_"),
    ("metrics without the format version", ex("GET", "/metrics", 200, METRICS,
                                               ctype="text/plain"), "Content-Type"),
    ("HEAD with the GET's Content-Type wrong", ex("HEAD", "/v1/locks/inv", 200, "",
                                                  ctype="text/html"), "Content-Type"),
    ("a different spec served", ex("GET", "/v1/openapi.yaml", 200, "openapi: 3.0.3\n",
                                   ctype="application/yaml"), "differs"),
]


def run(spec, log_lines, log_path, extra_args=(), subprocess_=False):
    """Runs the validator on a log: (exit status, output). In this process
    (fast), or as its own process to prove the command line works too."""
    if log_lines is not None:
        with open(log_path, "w", encoding="utf-8") as f:
            for line in log_lines:
                f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    argv = ["--spec", spec, "--log", log_path] + list(extra_args)
    if subprocess_:
        p = subprocess.run([sys.executable, VALIDATOR] + argv, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
        return p.returncode, p.stdout
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = validate_responses.main(argv)
    return rc, out.getvalue()


def main():
    spec = sys.argv[1]
    with open(spec, encoding="utf-8") as f:
        spec_text = f.read()
    tally = oa.Tally()
    expect = tally.check
    with tempfile.TemporaryDirectory(prefix="picket-contract-") as tmp:
        log = os.path.join(tmp, "contract.jsonl")
        good = good_log(spec_text)
        rc, out = run(spec, good, log, subprocess_=True)
        expect("a conforming log passes", rc == 0 and "%d exchanges checked" % (len(good) - 1) in out
               and "1 exchanges with other servers" in out, out)

        for name, bad, phrase in BAD:
            # The defect among conforming exchanges, so it is found, not just any failure.
            rc, out = run(spec, good + [bad], log)
            lines = {l.split(":", 2)[1] for l in out.splitlines() if l.startswith("FAIL: line ")}
            expect("fails on: %s" % name, rc == 1 and phrase in out
                   and lines == {" line %d" % (len(good) + 1)}, out)

        rc, out = run(spec, [], log, subprocess_=True)
        expect("fails on an empty log", rc == 1 and "no picketd exchange" in out, out)
        rc, out = run(spec, [good[-1]], log)
        expect("fails on a log of fenced-kv exchanges only", rc == 1, out)
        rc, out = run(spec, good + ["{not json"], log)
        expect("fails on a malformed line", rc == 1 and "not a JSON line" in out, out)
        os.unlink(log)
        rc, out = run(spec, None, log)
        expect("fails on a missing log", rc == 1 and "does not exist" in out, out)
        rc, out = run(spec, None, log, ["--require", os.path.join(tmp, "picketd")])
        expect("skips (77) while picketd is not built", rc == 77, out)

    return tally.summary()


if __name__ == "__main__":
    sys.exit(main())
