#!/usr/bin/env python3
"""validate_responses: checks every HTTP reply the test suite received
against proto/openapi.yaml, so the spec cannot drift from what picketd serves.

The harness (tests/harness/harness.c, contract_log) appends one JSON line per
exchange to $PICKET_CONTRACT_LOG: method, path, status, content_type, body,
retry_after, allow. For each exchange this finds the operation (path template
+ method), the documented response for the status, and checks:

  * the status is documented for that operation; a path the spec does not
    list must be 404 and a method the path does not list must be 405 (the
    spec's x-picket-fallback responses);
  * Content-Type is one of the response's media types (exactly, where the
    spec gives parameters; else parameters ignored); a HEAD reply has no
    body and the Content-Type and headers of the GET with that status;
  * a JSON body (no duplicate keys) validates against the response schema,
    $refs resolved and OpenAPI 3.0 `nullable` honoured;
  * the documented headers the harness records are present and valid:
    Retry-After on 409 lock_held (and equal to retry_after_ms / 1000 rounded
    up), Allow on 405 (and naming exactly the methods the spec lists for the
    path; HEAD may be added where GET is);
  * /metrics is Prometheus text with picket_* names; /v1/openapi.yaml is
    this very file, byte for byte.

Exchanges with other servers of the test suite (fenced-kv: /kv/..., /fence/...)
are counted and skipped. The check fails when the log is missing, empty or
has no picketd exchange, so it cannot pass by seeing nothing.

Exit status: 0 all conforming, 1 a violation or no exchanges, 2 bad usage,
77 picketd is not built (--require names the binary), so there is nothing
to check yet.
"""

import argparse
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openapi_util as oa  # noqa: E402

# Paths of the other servers the suite talks to through the same harness.
OTHER_SERVERS = re.compile(r"^/(kv|fence)(/|$)")

# Headers the harness records, by the key it logs them under.
LOGGED_HEADERS = {"retry-after": "retry_after", "allow": "allow",
                  "www-authenticate": "www_authenticate"}

PROM_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
PROM_LABELS = r'\{(\s*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"(\\.|[^"\\\n])*"\s*,?)*\s*\}'
PROM_VALUE = r"([-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|[-+]?Inf|NaN)"
PROM_SAMPLE = re.compile(r"^(%s)(%s)?\s+%s(\s+-?\d+)?$" % (PROM_NAME, PROM_LABELS, PROM_VALUE))
PROM_META = re.compile(r"^#\s+(HELP|TYPE)\s+(%s)(\s+(.*))?$" % PROM_NAME)
PROM_TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class Checker:
    def __init__(self, spec_path):
        self.spec = oa.load_spec(spec_path)
        with open(spec_path, "rb") as f:
            self.spec_bytes = f.read()
        templates = list(self.spec.get("paths") or {})
        self.paths = [(oa.template_regex(t), t) for t in templates]
        self.fallback = self.spec.get("x-picket-fallback") or {}
        self.covered = {}  # (METHOD, template) -> set of statuses seen
        self.validators = {}

    # ---- mapping an exchange to the spec ------------------------------

    def readings(self, path):
        """The templates a path may be read as; [None]: an unknown path.

        Each {param} is one non-empty segment, as the spec's templates say
        and as picketd routes: "/v1/locks/a/b/acquire" and
        "/v1/locks//acquire" are unknown paths (404), not acquires of a bad
        name.
        """
        return [t for rx, t in self.paths if rx.match(path)] or [None]

    def check(self, ex):
        """Returns a list of problems with one exchange ([] if it conforms)."""
        path = ex["path"].split("?", 1)[0]  # as sent: templates match raw segments
        first = None
        for tmpl in self.readings(path):
            problems, key = self.check_reading(ex, path, tmpl)
            if not problems:
                self.covered.setdefault(key, set()).add(ex["status"])
                return []
            if first is None:
                first = problems
        return first

    def check_reading(self, ex, path, tmpl):
        method = ex["method"].upper()
        status = ex["status"]
        if tmpl is None:
            if status != 404:
                return ["path %s is not in the spec, so the reply must be 404, not %d"
                        % (path, status)], None
            resp = oa.resolve(self.spec, self.fallback.get("unknown-path"))
            return self.check_response(ex, resp, None, head=(method == "HEAD")), \
                ("*", "(unknown path)")

        item = self.spec["paths"][tmpl]
        documented = [m.upper() for m in oa.HTTP_METHODS if m in item]
        op = item.get(method.lower())
        head = method == "HEAD"
        if op is None:
            if status != 405:
                return ["%s %s: the spec lists only %s here, so the reply must be 405, not %d"
                        % (method, tmpl, ", ".join(documented), status)], None
            resp = oa.resolve(self.spec, self.fallback.get("unknown-method"))
            problems = self.check_response(ex, resp, None, head=(method == "HEAD"))
            problems += self.check_allow(ex, documented)
            return problems, ("*", "(method not allowed)")

        responses = op.get("responses") or {}
        resp = responses.get(str(status)) or responses.get("%dXX" % (status // 100)) \
            or responses.get("default")
        if resp is None:
            return ["%s %s: status %d is not documented (documented: %s)"
                    % (method, tmpl, status, ", ".join(sorted(responses)))], None
        if head and "get" in item:
            # HEAD is the GET without the body: its Content-Type and headers
            # are the GET's, for the same status.
            get_resps = item["get"].get("responses") or {}
            resp = get_resps.get(str(status)) or resp
            op = item["get"]
        resp = oa.resolve(self.spec, resp)
        return self.check_response(ex, resp, op, head), (method, tmpl)

    # ---- one response ------------------------------------------------

    def check_response(self, ex, resp, op, head):
        problems = []
        content = resp.get("content") or {}
        # A media type declared with parameters must be sent exactly so;
        # one declared without them matches whatever parameters come along.
        sent = (ex.get("content_type") or "").strip().lower()
        ctype = next((k for k in content if ";" in k and
                      re.sub(r"\s*;\s*", ";", k.lower()) == re.sub(r"\s*;\s*", ";", sent)),
                     sent.split(";", 1)[0].strip())
        body = ex.get("body") or ""
        where = "%s %s -> %d" % (ex["method"], ex["path"], ex["status"])
        parsed = None
        if head and body:
            problems.append("%s: a reply to HEAD must have no body, got %d bytes" % (where, len(body)))
        if not content:
            if body and not head:
                problems.append("%s: the spec documents no body, got %d bytes" % (where, len(body)))
        elif ctype not in content:
            problems.append("%s: Content-Type %r is not one of %s"
                            % (where, ex.get("content_type"), ", ".join(content)))
        elif not head:
            media = content[ctype]
            if ctype == "application/json":
                try:
                    parsed = oa.loads_strict(body)
                except ValueError as e:
                    return problems + ["%s: body is not JSON (%s): %.200s" % (where, e, body)]
            else:
                parsed = body
            schema = media.get("schema")
            if schema is not None:
                for err in self.schema_errors(schema, parsed):
                    problems.append("%s: body does not match the schema: %s; body: %.300s"
                                    % (where, err, body))
            op_id = (op or {}).get("operationId")
            if op_id == "getMetrics" and ex["status"] == 200:
                problems += ["%s: %s" % (where, p) for p in prometheus_problems(body)]
            elif op_id == "getOpenApi" and body.encode("utf-8") != self.spec_bytes:
                problems.append("%s: the served document differs from proto/openapi.yaml" % where)

        for name, header in (resp.get("headers") or {}).items():
            header = oa.resolve(self.spec, header)
            key = LOGGED_HEADERS.get(name.lower())
            if key is None:
                continue  # not recorded by the harness; check_openapi.py forbids this
            value = ex.get(key) or ""
            if not value:
                if header.get("required"):
                    problems.append("%s: header %s is missing" % (where, name))
                continue
            problems += ["%s: header %s: %s" % (where, name, p)
                         for p in header_problems(self.spec, header.get("schema") or {}, value)]

        # Retry-After is retry_after_ms in whole seconds, rounded up.
        ms = None
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            ms = parsed["error"].get("retry_after_ms")
        ra = ex.get("retry_after") or ""
        if isinstance(ms, int) and not isinstance(ms, bool) and ra.isdigit():
            if int(ra) != math.ceil(ms / 1000):
                problems.append("%s: Retry-After %s is not retry_after_ms %d / 1000 rounded up (%d)"
                                % (where, ra, ms, math.ceil(ms / 1000)))
        return problems

    def check_allow(self, ex, documented):
        allow = ex.get("allow") or ""
        got = {m.strip().upper() for m in allow.split(",") if m.strip()}
        want = set(documented)
        extra = got - want - ({"HEAD"} if "GET" in want else set())
        if not allow or extra or not want <= got:
            return ["%s %s -> 405: Allow %r does not name exactly the methods in the spec (%s)"
                    % (ex["method"], ex["path"], allow, ", ".join(sorted(want)))]
        return []

    def schema_errors(self, schema, value):
        key = id(schema)
        if key not in self.validators:
            self.validators[key] = oa.schema_validator(self.spec, schema)
        return ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(root)", e.message)
                for e in self.validators[key].iter_errors(value)]


def header_problems(spec, schema, value):
    schema = oa.resolve(spec, schema)
    if schema.get("type") == "integer":
        if not re.fullmatch(r"-?\d+", value):
            return ["%r is not an integer" % value]
        value = int(value)
    return oa.schema_errors(spec, schema, value)


def prometheus_problems(text):
    """Problems of a Prometheus text-format (0.0.4) document with picket_* names."""
    if not text.strip():
        return ["metrics: empty body"]
    problems = []
    if not text.endswith("\n"):
        problems.append("metrics: the last line does not end with a newline")
    samples = 0
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            m = PROM_META.match(line)
            if m and m.group(1) == "TYPE" and (m.group(4) or "").strip() not in PROM_TYPES:
                problems.append("metrics line %d: bad TYPE: %s" % (n, line))
            elif m and not m.group(2).startswith("picket_"):
                problems.append("metrics line %d: %s is not named picket_*" % (n, m.group(2)))
            continue
        m = PROM_SAMPLE.match(line)
        if not m:
            problems.append("metrics line %d: not a sample: %.200s" % (n, line))
        elif not m.group(1).startswith("picket_"):
            problems.append("metrics line %d: %s is not named picket_*" % (n, m.group(1)))
        else:
            samples += 1
    if samples == 0:
        problems.append("metrics: no samples")
    return problems


def read_log(path):
    """The exchanges of the log, or raises ValueError on a malformed line."""
    exchanges = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                ex = oa.loads_strict(line)
            except ValueError as e:
                raise ValueError("%s:%d: not a JSON line (%s)" % (path, n, e))
            if not isinstance(ex, dict) or not all(
                    isinstance(ex.get(k), t) for k, t in
                    (("method", str), ("path", str), ("status", int))):
                raise ValueError("%s:%d: needs method, path and status" % (path, n))
            ex["line"] = n
            exchanges.append(ex)
    return exchanges


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", required=True, help="proto/openapi.yaml")
    ap.add_argument("--log", required=True, help="the contract log (JSON lines)")
    ap.add_argument("--require", metavar="BINARY",
                    help="exit 77 (skipped) when this file does not exist")
    ap.add_argument("--max-report", type=int, default=40,
                    help="print at most this many violations")
    args = ap.parse_args(argv)

    if args.require and not os.path.exists(args.require):
        print("SKIP: %s is not built, so no reply to check" % args.require)
        return 77
    try:
        checker = Checker(args.spec)
    except (OSError, oa.SpecError, ValueError) as e:
        print("FAIL: cannot read the spec: %s" % e)
        return 1
    if not os.path.exists(args.log):
        print("FAIL: %s does not exist: no test logged an exchange. This test checks "
              "the replies the other tests received; run the whole suite." % args.log)
        return 1
    try:
        exchanges = read_log(args.log)
    except (OSError, ValueError) as e:
        print("FAIL: %s" % e)
        return 1

    checked = ignored = 0
    violations = []
    for ex in exchanges:
        if OTHER_SERVERS.match(ex["path"]):
            ignored += 1
            continue
        checked += 1
        try:
            problems = checker.check(ex)
        except oa.SpecError as e:
            problems = ["spec error: %s" % e]
        violations += ["line %d: %s" % (ex["line"], p) for p in problems]

    ops = {(m, t) for t, m, _, _ in oa.operations(checker.spec)}
    covered = {k for k in checker.covered if k in ops}
    for key in sorted(checker.covered, key=lambda k: (k[1], k[0])):
        print("  %-6s %-28s statuses %s" % (key[0], key[1],
                                            " ".join(str(s) for s in sorted(checker.covered[key]))))
    missing = sorted(ops - covered, key=lambda k: (k[1], k[0]))
    if missing:
        print("  not exercised: %s" % ", ".join("%s %s" % k for k in missing))
    if ignored:
        print("  %d exchanges with other servers (fenced-kv) skipped" % ignored)

    for v in violations[:args.max_report]:
        print("FAIL: " + v)
    if len(violations) > args.max_report:
        print("FAIL: ... and %d more" % (len(violations) - args.max_report))
    print("%d exchanges checked, %d operations covered (of %d), %d violations"
          % (checked, len(covered), len(ops), len(violations)))
    if checked == 0:
        print("FAIL: %s holds no picketd exchange" % args.log)
        return 1
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
