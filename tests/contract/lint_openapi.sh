#!/usr/bin/env bash
# lint_openapi.sh: lints an OpenAPI document offline with an off-the-shelf
# validator from Debian 12: JSON::Validator (libjson-validator-perl), which
# resolves every $ref and checks the document against the official OpenAPI
# 3.0 JSON Schema that the openapi-specification package ships (found in
# JSON::Validator's cache, so nothing is fetched: it passes with no network).
#
#   lint_openapi.sh SPEC        exit 0 if valid; 1 with the errors if not
#   lint_openapi.sh --selftest SPEC
#                               also proves the linter can fail: broken
#                               copies of SPEC must each be rejected
set -euo pipefail

lint() { # lint FILE: prints the errors, returns 0 when there are none
  perl -MJSON::Validator::Schema::OpenAPIv3 -e '
    my $file = $ARGV[0];
    # Named class, not detection by content: a document that lost its
    # "paths" must still be read as OpenAPI, and fail.
    my $s = eval { JSON::Validator::Schema::OpenAPIv3->new($file) };
    if (!$s) { print "$file: cannot load: $@"; exit 1 }
    my $v = $s->data->{openapi} // "";
    if ($v !~ /^3\.0\.\d+$/) { print "$file: openapi is \"$v\", not 3.0.x\n"; exit 1 }
    my $e = $s->errors;
    print "$file: $_\n" for @$e;
    printf "%s: %d errors\n", $file, scalar @$e;
    exit(@$e ? 1 : 0);' "$1"
}

if ! perl -MJSON::Validator::Schema::OpenAPIv3 -e 1 2>/dev/null ||
   [ ! -f /usr/share/openapi-specification/schemas/v3.0/schema.json ]; then
  echo "FAIL: the linter needs the Debian packages libjson-validator-perl and openapi-specification (scripts/deps installs them)"
  exit 1
fi

if [ "${1:-}" != "--selftest" ]; then
  lint "${1:?usage: lint_openapi.sh [--selftest] SPEC}"
  exit
fi

spec=${2:?usage: lint_openapi.sh --selftest SPEC}
tmp=$(mktemp -d /tmp/picket-lint-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() { # check NAME WANT(0|1) FILE
  if lint "$3" > "$tmp/out" 2>&1; then got=0; else got=1; fi
  if [ "$got" = "$2" ]; then
    passed=$((passed + 1)); echo "ok   $1"
  else
    failed=$((failed + 1)); echo "FAIL $1"; sed 's/^/     /' "$tmp/out"
  fi
}
check "the spec passes" 0 "$spec"
mutate() { # mutate NAME SED-SCRIPT: a broken copy must be rejected
  sed "$2" "$spec" > "$tmp/bad.yaml"
  cmp -s "$spec" "$tmp/bad.yaml" && { failed=$((failed + 1)); echo "FAIL $1: the mutation changed nothing"; return; }
  check "rejects: $1" 1 "$tmp/bad.yaml"
}
mutate "a parameter in the body" 's/in: path/in: body/'
mutate "a dangling \$ref" "s|#/components/schemas/Grant'|#/components/schemas/Grnat'|"
mutate "no paths" 's/^paths:/pathz:/'
mutate "a response without description" '0,/description: Granted/{/description: Granted/d}'
mutate "a status that is not one" "s/^        '413':/        '41x':/"
mutate "a schema type that does not exist" '0,/type: integer/s//type: int/'
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
