#!/usr/bin/env bash
# man/: picketd.8, picket.1 and libpicket.3 say what the programs and the
# headers have. Every flag of `picketd --help` (and its PICKET_* variable)
# is in picketd.8 and every flag picketd.8 names is one picketd has; every
# command and flag of `picket --help` is in picket.1, and every flag of its
# OPTIONS is one picket has; every PICKET_EXTERN function of
# client/include/picket/*.h is in libpicket.3 and every function its
# SYNOPSIS declares is one of them. Each page renders with groff -ww (and
# `man -l`) without a warning, and `cmake --install` puts them under
# share/man. Last, the same check is run on a picketd.8 with one flag taken
# out, and must fail: the test can see a missing flag.
set -u
src=$PICKET_SOURCE_DIR
bin=$PICKET_BIN_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; passes=$((passes + 1)); }

# roff text with \- made -, so that flags read as in --help
plain() { sed 's/\\-/-/g' "$1"; }
flags_of() { grep -oE -- '--[a-z][a-z0-9-]*' | sort -u; }
# the flags at the head of each .TP entry of a section (OPTIONS)
option_heads() {
  plain "$1" | awk -v sec="$2" '/^\.SH/ {on = ($2 == sec)} on && prev == ".TP" {print} {prev = $0}' |
    flags_of
}

"$bin/picketd" --help > "$tmp/picketd.help" || { echo "picketd --help failed"; exit 1; }
"$bin/picket" --help > "$tmp/picket.help" || { echo "picket --help failed"; exit 1; }

# check_picketd PAGE: prints what is wrong, returns 1 if anything is
check_picketd() {
  local page=$1 bad=0 f v
  local help_flags man_flags heads
  help_flags=$(grep -oE '^  --[a-z0-9-]+' "$tmp/picketd.help" | tr -d ' ' | sort -u)
  man_flags=$(plain "$page" | flags_of | grep -vx -- '--flag')
  heads=$(option_heads "$page" OPTIONS)
  for f in $help_flags; do
    grep -qx -- "$f" <<<"$heads" || { echo "  picketd --help has $f, picketd.8 OPTIONS does not"; bad=1; }
  done
  for f in $man_flags; do
    grep -qx -- "$f" <<<"$help_flags" || { echo "  picketd.8 names $f, picketd --help has no such flag"; bad=1; }
  done
  for v in $(grep -oE '\[PICKET_[A-Z0-9_]+;' "$tmp/picketd.help" | tr -d '[;'); do
    grep -q "$v" "$page" || { echo "  picketd.8 lacks $v"; bad=1; }
  done
  for v in $(grep -oE 'PICKET_[A-Z0-9_]+' "$page" | sort -u); do
    [ "$v" = PICKET_ ] && continue
    grep -q "\[$v;" "$tmp/picketd.help" || { echo "  picketd.8 names $v, picketd has no such setting"; bad=1; }
  done
  return $bad
}

if out=$(check_picketd "$src/man/picketd.8"); then
  pass "picketd.8 has every flag and PICKET_* setting of picketd --help, and no other"
else
  fail "picketd.8 and picketd --help differ:"$'\n'"$out"
fi

# picket.1: the commands, the flags anywhere in the page, the OPTIONS heads
bad=
help_flags=$(flags_of < "$tmp/picket.help")
picketd_flags=$(grep -oE '^  --[a-z0-9-]+' "$tmp/picketd.help" | tr -d ' ')
page=$src/man/picket.1
man_flags=$(plain "$page" | flags_of)
for f in $help_flags; do
  grep -qx -- "$f" <<<"$man_flags" || bad+="  picket --help has $f, picket.1 does not"$'\n'
done
heads=$(option_heads "$page" OPTIONS)
for f in $(sed -n '/^flags:/,/^exit codes:/p' "$tmp/picket.help" | grep -oE '^  --[a-z][a-z0-9-]*' | tr -d ' ' | sort -u); do
  grep -qx -- "$f" <<<"$heads" || bad+="  picket --help flags: has $f, picket.1 OPTIONS does not"$'\n'
done
grep -q -- '^  -h, --help' "$tmp/picket.help" && { plain "$page" | grep -q -- '^\.BR -h' || bad+="  picket.1 OPTIONS lacks -h"$'\n'; }
for f in $(option_heads "$page" OPTIONS); do
  grep -qx -- "$f" <<<"$help_flags" || bad+="  picket.1 OPTIONS has $f, picket --help does not"$'\n'
done
for f in $man_flags; do
  grep -qx -- "$f" <<<"$help_flags"$'\n'"$picketd_flags" ||
    bad+="  picket.1 names $f, neither picket nor picketd has it"$'\n'
done
cmds=$(sed -n '/^commands:/,/^flags:/p' "$tmp/picket.help" | grep -oE '^  [a-z]+( new)?' | sed 's/^  //')
[ "$(wc -l <<<"$cmds")" -ge 6 ] || bad+="  found only these commands in picket --help: $cmds"$'\n'
man_cmds=$(plain "$page" | awk '/^\.SH/ {on = ($2 == "COMMANDS")} on && prev == ".TP" {print} {prev = $0}' |
  sed -E 's/\\f[BIR]//g' | awk '{print $1 ($1 == "token" ? " " $2 : "")}')
while read -r c; do
  grep -qx "$c" <<<"$man_cmds" || bad+="  picket --help has command '$c', picket.1 COMMANDS does not"$'\n'
done <<<"$cmds"
while read -r c; do
  grep -qx "$c" <<<"$cmds" || bad+="  picket.1 has command '$c', picket --help does not"$'\n'
done <<<"$man_cmds"
if [ -z "$bad" ]; then
  pass "picket.1 has every command and flag of picket --help ($(wc -l <<<"$cmds") commands, $(wc -w <<<"$help_flags") flags), and no other"
else
  fail "picket.1 and picket --help differ:"$'\n'"$bad"
fi

# libpicket.3: the PICKET_EXTERN functions
bad=
funcs=$(grep -hv '^#' "$src"/client/include/picket/*.h | tr '\n' ' ' |
  grep -oE 'PICKET_EXTERN [^;(]*\(' | grep -oE '[a-z_0-9]+\($' | tr -d '(' | sort -u)
[ "$(wc -w <<<"$funcs")" -ge 40 ] || bad+="  only $(wc -w <<<"$funcs") PICKET_EXTERN functions found"$'\n'
for fn in $funcs; do
  grep -qw "$fn" "$src/man/libpicket.3" || bad+="  $fn is PICKET_EXTERN, libpicket.3 does not name it"$'\n'
done
synopsis=$(awk '/^\.SH/ {on = ($2 == "SYNOPSIS")} on' "$src/man/libpicket.3" |
  grep -oE '\bpicket_[a-z_0-9]+\(' | tr -d '(' | sort -u)
for fn in $synopsis; do
  grep -qx "$fn" <<<"$funcs" || bad+="  libpicket.3 declares $fn, no header has it"$'\n'
done
if [ -z "$bad" ]; then
  pass "libpicket.3 names all $(wc -w <<<"$funcs") PICKET_EXTERN functions and declares no other"
else
  fail "libpicket.3 and the headers differ:"$'\n'"$bad"
fi

# rendering
for p in picketd.8 picket.1 libpicket.3; do
  out=$(groff -man -Tutf8 -ww -z "$src/man/$p" 2>&1)
  if command -v man >/dev/null 2>&1; then
    out+=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$src/man/$p" 2>&1 >/dev/null)
  fi
  if [ -z "$out" ]; then pass "$p renders without warnings"; else fail "$p: $out"; fi
done

# cmake --install puts them under ${CMAKE_INSTALL_MANDIR}
if cmake --install "$bin/.." --prefix "$tmp/inst" > "$tmp/install.log" 2>&1 &&
   [ -f "$tmp/inst/share/man/man8/picketd.8" ] && [ -f "$tmp/inst/share/man/man1/picket.1" ] &&
   [ -f "$tmp/inst/share/man/man3/libpicket.3" ]; then
  pass "cmake --install puts man8/picketd.8, man1/picket.1, man3/libpicket.3 under share/man"
else
  fail "cmake --install: $(tail -3 "$tmp/install.log"; find "$tmp/inst" -path '*man*' 2>/dev/null)"
fi

# the check itself: picketd.8 without --max-waiters must fail it
grep -v -- '--max-waiters \\" VALUE\|^\.BI "\\-\\-max\\-waiters " VALUE$' "$src/man/picketd.8" > "$tmp/picketd.8"
sed -i '/^\.BI "\\-\\-max\\-waiters " VALUE$/,+2d' "$tmp/picketd.8"
if cmp -s "$tmp/picketd.8" "$src/man/picketd.8"; then
  fail "could not take --max-waiters out of a copy of picketd.8"
elif out=$(check_picketd "$tmp/picketd.8"); then
  fail "a picketd.8 without --max-waiters passed the check"
else
  grep -q 'has --max-waiters, picketd.8 OPTIONS does not' <<<"$out" &&
    pass "a picketd.8 without --max-waiters fails the check ($(head -1 <<<"$out" | sed 's/^ *//'))" ||
    fail "a picketd.8 without --max-waiters failed for another reason: $out"
fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
