#!/usr/bin/env python3
"""examples_probe: sends every request example of proto/openapi.yaml to a
real picketd and expects each to be accepted, so the examples that people
copy from the spec (and that seed the fuzzer corpus) are requests picketd
really grants, not just values that fit a schema.

For each lock-name example and each request-body example it runs the
example against a fresh lock: acquire examples directly; renew and release
examples after acquiring with the example's own lease id (a client-chosen
lease), then GET the lock. It also GETs each operation that has no body.
Every exchange is appended to $PICKET_CONTRACT_LOG in the harness's format,
so contract_responses checks these replies too.

Usage: examples_probe.py SPEC BASE_URL
"""

import json
import os
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openapi_util as oa  # noqa: E402


def http(base, method, path, body=None):
    """One exchange: (status, parsed JSON or None); logged like harness_http."""
    data = None if body is None else json.dumps(body).encode()
    # JSON as JSON: picketd refuses a body of another type (415), and
    # urllib would send its form type.
    headers = {} if data is None else {"Content-Type": "application/json"}
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, headers, raw = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, headers, raw = e.code, e.headers, e.read()
    text = raw.decode("utf-8")
    log = os.environ.get("PICKET_CONTRACT_LOG")
    if log:
        # The request as sent, too: its Content-Type is read back from the
        # request rather than assumed.
        line = json.dumps({"method": method, "path": path, "status": status,
                           "content_type": headers.get("Content-Type", ""), "body": text,
                           "retry_after": headers.get("Retry-After", ""),
                           "allow": headers.get("Allow", ""),
                           "request_body": "" if data is None else data.decode("utf-8"),
                           "request_content_type": req.get_header("Content-type", "")})
        with open(log, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, None


def request_examples(spec, tmpl):
    op = spec["paths"][tmpl]["post"]
    media = oa.resolve(spec, op.get("requestBody") or {}).get("content", {}).get("application/json", {})
    return [(name, oa.resolve(spec, ex)["value"]) for name, ex in (media.get("examples") or {}).items()]


def main():
    spec_path, base = sys.argv[1], sys.argv[2].rstrip("/")
    spec = oa.load_spec(spec_path)
    param = spec["components"]["parameters"]["LockName"]
    names = [ex["value"] for ex in param["examples"].values()]
    tally = oa.Tally()
    expect = tally.check
    serial = 0

    def fresh(name):
        nonlocal serial
        serial += 1
        return "%s.%d" % (name, serial)

    for name in names:
        st, body = http(base, "GET", "/v1/locks/%s" % name)
        expect("GET the name example %s" % name, st == 200 and body["lock"] == name, (st, body))

        for ex_name, ex in request_examples(spec, "/v1/locks/{name}/acquire"):
            lock = fresh(name)
            st, body = http(base, "POST", "/v1/locks/%s/acquire" % lock, ex)
            expect("acquire example %s on %s" % (ex_name, lock), st == 200 and body["fence"] >= 1
                   and body["ttl_ms"] == ex.get("ttl_ms", 30000)
                   and body["owner"] == (ex.get("owner") or None)
                   and body["lease"] == ex.get("lease", body["lease"]), (st, body))

        for action in ("renew", "release"):
            for ex_name, ex in request_examples(spec, "/v1/locks/{name}/%s" % action):
                lock = fresh(name)
                st, grant = http(base, "POST", "/v1/locks/%s/acquire" % lock, {"lease": ex["lease"]})
                st, body = http(base, "POST", "/v1/locks/%s/%s" % (lock, action), ex)
                expect("%s example %s on %s" % (action, ex_name, lock),
                       st == 200 and body["lock"] == lock
                       and (action == "release" or body["fence"] == grant["fence"]), (st, body))
                st, body = http(base, "GET", "/v1/locks/%s" % lock)
                expect("GET after the %s example %s" % (action, ex_name),
                       st == 200 and body["held"] == (action == "renew") and "lease" not in body,
                       (st, body))

    # The operations without a request body, so this probe alone reaches
    # every operation of the spec.
    for path in ("/healthz", "/readyz", "/metrics", "/v1/openapi.yaml"):
        st, _ = http(base, "GET", path)
        expect("GET %s" % path, st == 200, st)

    return tally.summary()


if __name__ == "__main__":
    sys.exit(main())
