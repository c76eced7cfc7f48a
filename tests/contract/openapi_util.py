"""openapi_util: reading proto/openapi.yaml for the contract tests.

check_openapi.py (the rules a generic linter does not know) and
validate_responses.py (every reply of the test suite against the spec) both
need the same three things, so they live here once: loading the document,
following its local $refs, and turning an OpenAPI 3.0 schema into a JSON
Schema (draft 4, which OpenAPI 3.0 schemas are a dialect of) that
python3-jsonschema can check values against. Only Debian packages are used:
python3-yaml and python3-jsonschema.
"""

import json
import re
import warnings

import jsonschema
import yaml

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

# Keywords of an OpenAPI 3.0 Schema Object that are not JSON Schema
# validation keywords; dropped before validating (nullable is translated).
_ANNOTATIONS = ("nullable", "example", "discriminator", "xml", "externalDocs",
                "readOnly", "writeOnly", "deprecated")


class SpecError(Exception):
    """The document is broken (for example a $ref that leads nowhere)."""


def load_spec(path):
    # libyaml's loader when python3-yaml has it: the self-tests load the
    # spec dozens of times.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=loader)


def resolve(spec, node):
    """Follows a local $ref ("#/a/b") until it reaches a node without one."""
    seen = set()
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise SpecError("only local $refs are supported: %r" % (ref,))
        if ref in seen:
            raise SpecError("$ref cycle at %s" % ref)
        seen.add(ref)
        node = spec
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                raise SpecError("unresolvable $ref %s" % ref)
            node = node[part]
    return node


def to_json_schema(schema):
    """Returns a copy of an OpenAPI 3.0 schema as a draft-4 JSON Schema.

    nullable: true becomes a "null" type (and a None in an enum, as 3.0.3
    says); annotations and x- extensions are dropped. Walks only the
    keywords that hold schemas, so a property that happens to be called
    "example" is kept. $refs are kept: resolve them with schema_validator.
    """
    if isinstance(schema, bool) or not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS or key.startswith("x-"):
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(s) for name, s in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = to_json_schema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [to_json_schema(s) for s in value]
        else:
            out[key] = value
    if schema.get("nullable") is True:
        if "type" in out:
            out["type"] = [out["type"], "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = list(out["enum"]) + [None]
        elif "$ref" in out or "allOf" in out or "anyOf" in out or "oneOf" in out:
            out = {"anyOf": [{"type": "null"}, out]}
    return out


def schema_validator(spec, schema):
    """A draft-4 validator for `schema` whose $refs resolve in `spec`."""
    root = {"components": {"schemas": {
        name: to_json_schema(s)
        for name, s in (spec.get("components", {}).get("schemas") or {}).items()}}}
    with warnings.catch_warnings():
        # RefResolver is deprecated from jsonschema 4.18 on, but it is the
        # one API that both Debian 12 (4.10) and later releases have.
        warnings.simplefilter("ignore", DeprecationWarning)
        resolver = jsonschema.RefResolver("", root)
        return jsonschema.Draft4Validator(to_json_schema(schema), resolver=resolver)


def schema_errors(spec, schema, value):
    """The validation errors of `value`, as one short string each."""
    out = []
    for err in schema_validator(spec, schema).iter_errors(value):
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        out.append("%s: %s" % (where, err.message))
    return out


def loads_strict(text):
    """json.loads that rejects duplicate keys (picketd must never send them)."""
    def pairs(items):
        obj = {}
        for k, v in items:
            if k in obj:
                raise ValueError("duplicate key %r" % k)
            obj[k] = v
        return obj
    return json.loads(text, object_pairs_hook=pairs)


def operations(spec):
    """Yields (path template, METHOD, path item, operation) for every operation."""
    for tmpl, item in (spec.get("paths") or {}).items():
        for method in HTTP_METHODS:
            if method in item:
                yield tmpl, method.upper(), item, item[method]


def template_regex(tmpl):
    """A regex for a path template: each {param} is one non-empty segment."""
    parts = re.split(r"(\{[^}/]+\})", tmpl)
    param = "[^/]+"
    rx = "".join(param if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile("^" + rx + "$")


def error_code_map(header_path):
    """{wire code: HTTP status} from PICKET_PROTO_ERROR_MAP in picket_proto.h."""
    with open(header_path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"#define PICKET_PROTO_ERROR_MAP\(X\)(.*?)\n\s*\n", text, re.S)
    if not m:
        raise SpecError("PICKET_PROTO_ERROR_MAP not found in %s" % header_path)
    rows = re.findall(r'X\(\s*\w+\s*,\s*"([a-z_]+)"\s*,\s*(\d+)\s*,', m.group(1))
    if not rows:
        raise SpecError("PICKET_PROTO_ERROR_MAP in %s has no rows" % header_path)
    return {code: int(status) for code, status in reversed(rows)}  # the first row wins


def error_code_statuses(header_path):
    """{wire code: {HTTP statuses}}: a code may have a row per status
    (too_many_waiters: 429 for a client's own limit, 503 for the server's)."""
    with open(header_path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"#define PICKET_PROTO_ERROR_MAP\(X\)(.*?)\n\s*\n", text, re.S)
    out = {}
    for code, status in re.findall(r'X\(\s*\w+\s*,\s*"([a-z_]+)"\s*,\s*(\d+)\s*,', m.group(1)):
        out.setdefault(code, set()).add(int(status))
    return out


class Tally:
    """Counts and prints the checks of a test script: "ok   what" or
    "FAIL what" with its detail, then "N passed, M failed" at the end."""

    def __init__(self):
        self.passed = self.failed = 0

    def check(self, what, ok, detail=""):
        if ok:
            self.passed += 1
            print("ok   %s" % what)
        else:
            self.failed += 1
            print("FAIL %s" % what)
            if detail:
                print("     " + str(detail).rstrip().replace("\n", "\n     "))
        return ok

    def summary(self):
        """Prints the totals; returns the exit status (1 if any failed)."""
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0


def header_defines(header_path):
    """{macro: integer value} for the integer #defines of picket_proto.h."""
    with open(header_path, encoding="utf-8") as f:
        text = f.read()
    return {name: int(value) for name, value in
            re.findall(r"^#define (PICKET_PROTO_\w+) (\d+)\b", text, re.M)}
