#!/usr/bin/env python3
"""check_openapi: the rules of proto/openapi.yaml that a generic OpenAPI
linter (lint_openapi.sh) cannot know, because they tie the spec to the rest
of picket:

  * the error codes are exactly PICKET_PROTO_ERROR_MAP (picket_proto.h) less
    the fenced-kv-only codes, and every error response carries only codes
    whose HTTP status in that table is the response's status;
  * the limits and defaults (name, owner and lease lengths, ttl_ms and
    wait_ms defaults and maxima) equal the #defines of picket_proto.h;
  * every example, default and header example validates against its schema
    (the examples seed the fuzzer corpus and the README, so a wrong one
    would teach a wrong request);
  * every $ref resolves, operationIds are unique, path parameters are
    declared, every operation has a 200, every GET has a HEAD with the same
    statuses, every 4xx/5xx is an Error body spelled out (no allOf, so
    generated types are exact; lock_held requires retry_after_ms and owner);
  * request schemas carry no `default:` (generators would make the field
    required); the server's defaults are x-picket-default;
  * every response header is one the harness records (Retry-After, Allow,
    WWW-Authenticate),
    so validate_responses.py can check it, and the x-picket-fallback
    responses exist (404 for unknown paths, 405 with Allow).

Usage: check_openapi.py [--selftest] SPEC HEADER
       (proto/openapi.yaml proto/include/picket_proto.h)
--selftest also proves each rule can fail: broken copies of the spec (and of
the header's numbers) must each fail the rule they break.
"""

import contextlib
import copy
import io
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openapi_util as oa  # noqa: E402

# Codes that only fenced storage (fenced-kv) answers with.
STORAGE_ONLY_CODES = {"stale_fence", "version_mismatch", "wrong_lock", "fence_invalid",
                      "too_many_locks"}
RECORDED_HEADERS = {"retry-after", "allow", "www-authenticate"}


class Rules:
    def __init__(self, spec, header):
        self.spec = spec
        self.codes = oa.error_code_map(header)
        self.code_statuses = oa.error_code_statuses(header)
        self.defines = oa.header_defines(header)
        self.tally = oa.Tally()

    def rule(self, name, problems):
        self.tally.check(name, not problems, "\n".join(problems))

    # ---- helpers --------------------------------------------------------

    def walk(self, node, where="#"):
        """Yields (json pointer, node) for every dict in the document."""
        if isinstance(node, dict):
            yield where, node
            for k, v in node.items():
                yield from self.walk(v, "%s/%s" % (where, str(k).replace("~", "~0").replace("/", "~1")))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from self.walk(v, "%s/%d" % (where, i))

    def responses(self):
        """Yields (where, status, response) for every response of every operation."""
        for tmpl, method, _, op in oa.operations(self.spec):
            for status, resp in (op.get("responses") or {}).items():
                yield "%s %s %s" % (method, tmpl, status), str(status), oa.resolve(self.spec, resp)
        fb = self.spec.get("x-picket-fallback") or {}
        for key, status in (("unknown-path", "404"), ("unknown-method", "405")):
            if key in fb:
                yield "x-picket-fallback %s" % key, status, oa.resolve(self.spec, fb[key])

    def error_object(self, schema):
        """The `error` member of an error body schema, or None."""
        schema = oa.resolve(self.spec, schema)
        if "error" not in (schema.get("required") or []):
            return None
        return oa.resolve(self.spec, (schema.get("properties") or {}).get("error") or {})

    def error_codes_of(self, schema):
        """The codes an error schema allows: the enum on error.code."""
        err = self.error_object(schema) or {}
        code = oa.resolve(self.spec, (err.get("properties") or {}).get("code") or {})
        return set(code["enum"]) if "enum" in code else None

    def is_error_schema(self, schema):
        """The Error shape, spelled out: {error: {code, message, ...}} with
        both required, code an enum and message the shared ErrorMessage."""
        err = self.error_object(schema)
        if err is None or "allOf" in oa.resolve(self.spec, schema):
            return False
        props = err.get("properties") or {}
        message = oa.resolve(self.spec, props.get("message") or {})
        return ({"code", "message"} <= set(err.get("required") or []) and
                self.error_codes_of(schema) is not None and
                message is oa.resolve(self.spec, self.spec["components"]["schemas"]["ErrorMessage"]))

    # ---- the rules ----------------------------------------------------------

    def check_version(self):
        v = str(self.spec.get("openapi", ""))
        self.rule("OpenAPI 3.0.x (the version Debian's official schema covers)",
                  [] if v.startswith("3.0.") else ["openapi is %r" % v])

    def check_refs(self):
        problems = []
        for where, node in self.walk(self.spec):
            if "$ref" in node:
                try:
                    oa.resolve(self.spec, node)
                except oa.SpecError as e:
                    problems.append("%s: %s" % (where, e))
        self.rule("every $ref resolves", problems)

    def check_operations(self):
        problems = []
        seen = {}
        for tmpl, method, item, op in oa.operations(self.spec):
            oid = op.get("operationId")
            if not oid:
                problems.append("%s %s has no operationId" % (method, tmpl))
            elif oid in seen:
                problems.append("operationId %s used by %s and %s %s" % (oid, seen[oid], method, tmpl))
            seen[oid] = "%s %s" % (method, tmpl)
            params = [oa.resolve(self.spec, p) for p in (item.get("parameters") or []) +
                      (op.get("parameters") or [])]
            declared = {p["name"] for p in params if p.get("in") == "path"}
            used = set(re.findall(r"\{([^}/]+)\}", tmpl))
            if declared != used:
                problems.append("%s %s: path parameters declared %s, used %s"
                                % (method, tmpl, sorted(declared), sorted(used)))
            for p in params:
                if p.get("in") == "path" and p.get("required") is not True:
                    problems.append("%s %s: path parameter %s is not required" % (method, tmpl, p["name"]))
            if "200" not in (op.get("responses") or {}):
                problems.append("%s %s has no 200 response" % (method, tmpl))
            # picketd answers HEAD wherever it answers GET; say so per path.
            if method.upper() == "GET":
                head = item.get("head")
                if head is None:
                    problems.append("GET %s has no HEAD operation" % tmpl)
                elif set(head.get("responses") or {}) != set(op.get("responses") or {}):
                    problems.append("HEAD %s has other statuses than its GET" % tmpl)
        self.rule("operationIds unique, path parameters declared, a 200 everywhere, "
                  "a HEAD beside each GET", problems)

    def check_error_codes(self):
        problems = []
        want = set(self.codes) - STORAGE_ONLY_CODES
        enum = set(oa.resolve(self.spec, self.spec["components"]["schemas"]["ErrorCode"])["enum"])
        held = self.error_object(self.spec["components"]["schemas"]["LockHeldError"]) or {}
        if not {"retry_after_ms", "owner"} <= set(held.get("required") or []):
            problems.append("LockHeldError does not require retry_after_ms and owner")
        if enum != want:
            problems.append("ErrorCode enum %s != PICKET_PROTO_ERROR_MAP less %s: missing %s, extra %s"
                            % (sorted(enum), sorted(STORAGE_ONLY_CODES), sorted(want - enum),
                               sorted(enum - want)))
        used = set()
        for where, status, resp in self.responses():
            if int(status) < 400:
                continue
            for ctype, media in (resp.get("content") or {}).items():
                schema = media.get("schema") or {}
                if ctype != "application/json" or not self.is_error_schema(schema):
                    problems.append("%s: not an application/json Error body" % where)
                    continue
                codes = self.error_codes_of(schema) or set()
                used |= codes
                for code in sorted(codes):
                    if code not in enum:
                        problems.append("%s: %s is not in ErrorCode" % (where, code))
                    if code not in self.codes:
                        problems.append("%s: %s is not in PICKET_PROTO_ERROR_MAP" % (where, code))
                    elif int(status) not in self.code_statuses[code]:
                        problems.append("%s: %s is HTTP %s in PICKET_PROTO_ERROR_MAP"
                                        % (where, code, "/".join(map(str, sorted(self.code_statuses[code])))))
        if want - used:
            problems.append("no response carries %s" % ", ".join(sorted(want - used)))
        self.rule("error codes equal PICKET_PROTO_ERROR_MAP (less %s), each under its status"
                  % ", ".join(sorted(STORAGE_ONLY_CODES)), problems)

    def check_limits(self):
        d = self.defines
        s = self.spec["components"]["schemas"]
        acquire = s["AcquireRequest"]["properties"]
        renew = s["RenewRequest"]["properties"]
        want = [
            ("LockName maxLength", s["LockName"].get("maxLength"), d.get("PICKET_PROTO_NAME_MAX")),
            ("LockName pattern", s["LockName"].get("pattern"),
             "^(?!\\.{1,2}$)[A-Za-z0-9._:-]{1,%s}$" % d.get("PICKET_PROTO_NAME_MAX")),
            ("Owner maxLength", s["Owner"].get("maxLength"), d.get("PICKET_PROTO_OWNER_MAX")),
            ("LeaseId pattern", s["LeaseId"].get("pattern"),
             "^[0-9a-f]{%s}$" % d.get("PICKET_PROTO_LEASE_LEN")),
            ("acquire ttl_ms default", acquire["ttl_ms"].get("x-picket-default"),
             d.get("PICKET_PROTO_TTL_DEFAULT_MS")),
            ("acquire ttl_ms maximum", acquire["ttl_ms"].get("maximum"),
             d.get("PICKET_PROTO_MAX_TTL_DEFAULT_MS")),
            ("renew ttl_ms default", renew["ttl_ms"].get("x-picket-default"),
             d.get("PICKET_PROTO_TTL_DEFAULT_MS")),
            ("renew ttl_ms maximum", renew["ttl_ms"].get("maximum"),
             d.get("PICKET_PROTO_MAX_TTL_DEFAULT_MS")),
            ("acquire wait_ms maximum", acquire["wait_ms"].get("maximum"),
             d.get("PICKET_PROTO_MAX_WAIT_DEFAULT_MS")),
        ]
        problems = ["%s is %r, picket_proto.h says %r" % (n, got, exp)
                    for n, got, exp in want if exp is None or got != exp]
        # A `default:` in a request schema makes generators (openapi-typescript)
        # type the field as required; the server's default is x-picket-default.
        for name in ("AcquireRequest", "RenewRequest", "ReleaseRequest"):
            for where, node in self.walk(s[name], "#/components/schemas/%s" % name):
                if "default" in node:
                    problems.append("%s has default: (use x-picket-default)" % where)
        self.rule("limits and defaults equal picket_proto.h", problems)

    def check_examples(self):
        problems = []
        count = 0

        def check(where, schema, value):
            nonlocal count
            count += 1
            for e in oa.schema_errors(self.spec, schema, value):
                problems.append("%s: %s" % (where, e))

        for where, node in self.walk(self.spec):
            # A Media Type, Parameter or Header object: a schema plus examples.
            if "schema" in node and isinstance(node["schema"], dict):
                for name, ex in (node.get("examples") or {}).items():
                    ex = oa.resolve(self.spec, ex)
                    if "value" not in ex:
                        problems.append("%s/examples/%s has no value" % (where, name))
                        continue
                    check("%s/examples/%s" % (where, name), node["schema"], ex["value"])
                if "example" in node:
                    check("%s/example" % where, node["schema"], node["example"])
        for name, schema in (self.spec["components"].get("schemas") or {}).items():
            for where, node in self.walk(schema, "#/components/schemas/%s" % name):
                if "$ref" in node:
                    continue
                for key in ("example", "default", "x-picket-default"):
                    if key in node:
                        check("%s/%s" % (where, key), node, node[key])
        self.rule("all %d examples and defaults validate against their schemas" % count, problems)

    def check_headers_and_fallback(self):
        problems = []
        for where, status, resp in self.responses():
            for name in resp.get("headers") or {}:
                if name.lower() not in RECORDED_HEADERS:
                    problems.append("%s: header %s is not recorded by the harness, so no test "
                                    "could check it" % (where, name))
        fb = self.spec.get("x-picket-fallback") or {}
        for key, header in (("unknown-path", None), ("unknown-method", "Allow")):
            if key not in fb:
                problems.append("x-picket-fallback has no %s" % key)
            elif header and header not in (oa.resolve(self.spec, fb[key]).get("headers") or {}):
                problems.append("x-picket-fallback %s has no %s header" % (key, header))
        held = oa.resolve(self.spec, self.spec["components"]["responses"]["LockHeld"])
        if "Retry-After" not in (held.get("headers") or {}):
            problems.append("LockHeld has no Retry-After header")
        self.rule("headers are Retry-After/Allow only; 404/405 fallbacks exist", problems)


def run_rules(rules):
    for check in (rules.check_version, rules.check_refs, rules.check_operations,
                  rules.check_error_codes, rules.check_limits, rules.check_examples,
                  rules.check_headers_and_fallback):
        try:
            check()
        except (KeyError, TypeError, AttributeError, oa.SpecError) as e:
            rules.rule(check.__name__, ["the spec lacks what this rule needs: %r" % (e,)])
    return rules.tally.summary()


def _schemas(s):
    return s["components"]["schemas"]


# (what is broken, how, a phrase of the rule that must fail)
MUTATIONS = [
    ("a code missing", lambda s, d: _schemas(s)["ErrorCode"]["enum"].remove("not_replicated"),
     "error codes equal"),
    ("a fenced-kv code added", lambda s, d: _schemas(s)["ErrorCode"]["enum"].append("stale_fence"),
     "error codes equal"),
    ("a code under another status", lambda s, d: _schemas(s)["AcquireUnavailableError"]
     ["properties"]["error"]["properties"]["code"]["enum"].append("lock_held"), "error codes equal"),
    ("lock_held's owner optional", lambda s, d: _schemas(s)["LockHeldError"]["properties"]["error"]
     ["required"].remove("owner"), "error codes equal"),
    ("an error schema as allOf", lambda s, d: _schemas(s).update(StoreError={"allOf": [
        {"$ref": "#/components/schemas/Error"}]}), "error codes equal"),
    ("a success body as an error", lambda s, d: s["components"]["responses"]["StoreError"]
     ["content"]["application/json"].update(schema={"$ref": "#/components/schemas/Grant"}),
     "error codes equal"),
    ("a default that drifted", lambda s, d: _schemas(s)["AcquireRequest"]["properties"]["ttl_ms"]
     .update({"x-picket-default": 60000}), "limits and defaults"),
    ("a default: in a request", lambda s, d: _schemas(s)["AcquireRequest"]["properties"]["wait_ms"]
     .update(default=0), "limits and defaults"),
    ("a limit that drifted in picket_proto.h", lambda s, d: d.update(PICKET_PROTO_OWNER_MAX=64),
     "limits and defaults"),
    ("a wrong example", lambda s, d: s["paths"]["/v1/locks/{name}/acquire"]["post"]["responses"]
     ["200"]["content"]["application/json"]["examples"]["granted"]["value"].update(fence="42"),
     "examples and defaults validate"),
    ("a wrong request example", lambda s, d: s["paths"]["/v1/locks/{name}/acquire"]["post"]
     ["requestBody"]["content"]["application/json"]["examples"]["ttl"]["value"].update(ttl_ms=0),
     "examples and defaults validate"),
    ("a duplicate operationId", lambda s, d: s["paths"]["/healthz"]["get"].update(
        operationId="getReadiness"), "operationIds unique"),
    ("an undeclared path parameter", lambda s, d: s["paths"]["/v1/locks/{name}"].pop("parameters"),
     "operationIds unique"),
    ("a GET without HEAD", lambda s, d: s["paths"]["/healthz"].pop("head"), "a HEAD beside"),
    ("a dangling $ref", lambda s, d: s["paths"]["/readyz"]["get"]["responses"].update(
        {"503": {"$ref": "#/components/responses/Nope"}}), "every $ref resolves"),
    ("a header no test can see", lambda s, d: s["components"]["responses"]["LockHeld"]["headers"]
     .update({"X-Request-Id": {"schema": {"type": "string"}}}), "headers are"),
    ("no 405 fallback", lambda s, d: s["x-picket-fallback"].pop("unknown-method"), "headers are"),
    ("OpenAPI 3.1", lambda s, d: s.update(openapi="3.1.0"), "OpenAPI 3.0.x"),
]


def selftest(spec, header, tally):
    for name, mutate, phrase in MUTATIONS:
        bad = copy.deepcopy(spec)
        rules = Rules(bad, header)
        mutate(bad, rules.defines)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = run_rules(rules)
        hit = [line for line in out.getvalue().splitlines() if line.startswith("FAIL")]
        tally.check("rejects: %s" % name, rc == 1 and any(phrase in line for line in hit),
                    "wanted a failure of \"%s\":\n%s" % (phrase, out.getvalue()))


def main():
    args = sys.argv[1:]
    self_test = args[:1] == ["--selftest"]
    if self_test:
        args = args[1:]
    if len(args) != 2:
        print(__doc__)
        return 2
    try:
        spec = oa.load_spec(args[0])
        rules = Rules(spec, args[1])
    except (OSError, ValueError, oa.SpecError) as e:
        print("FAIL: %s" % e)
        return 1
    if not self_test:
        return run_rules(rules)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = run_rules(rules)
    tally = oa.Tally()
    tally.check("the spec passes every rule", rc == 0, out.getvalue())
    selftest(spec, args[1], tally)
    return tally.summary()


if __name__ == "__main__":
    sys.exit(main())
