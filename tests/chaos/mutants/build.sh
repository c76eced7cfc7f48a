#!/usr/bin/env bash
# tests/chaos/mutants/build.sh: build a deliberately broken picketd and
# fenced-kv ("mutant"), for the chaos suite to prove its checker catches it.
#
#   build.sh NAME OUTDIR   copy the repo's git-tracked files to OUTDIR/src,
#                          apply NAME.patch, build picketd and fenced-kv
#                          (Release, tests off) in OUTDIR/build, put them in
#                          OUTDIR/bin and print that directory (the only
#                          line on stdout; progress goes to stderr)
#   build.sh --list        print the mutant names, one a line
#
# A second run is a no-op (it prints OUTDIR/bin at once) unless the patch,
# this script or a source file outside tests/ and bench/ (not built with
# tests off) changed since OUTDIR/bin was built; then it copies again and
# rebuilds incrementally in the same OUTDIR/build.
# A patch that no longer applies (a refactor moved the lines it breaks) is
# one line on stderr and exit 1: update the mutant, do not skip it.
# Environment: JOBS (default 2) parallel compile jobs.
#   PICKET_MUTANT_TREE=DIR   keep the source copy and the build tree in DIR,
#                            shared by every mutant built with the same DIR
#                            (one at a time: flock): a mutant then costs an
#                            incremental rebuild of the files its patch and
#                            the previous mutant's patch touched (a second
#                            or two) instead of a whole Release build (about
#                            15 s on 2 cores). Without it, OUTDIR holds them.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"
prog="mutants/build.sh"

die() {
  echo "$prog: $*" >&2
  exit 1
}

list() {
  local p b
  for p in "$here"/*.patch; do
    [ -e "$p" ] || continue
    b=${p##*/}
    echo "${b%.patch}"
  done
}

usage() {
  echo "usage: $prog NAME OUTDIR | $prog --list   (mutants: $(list | paste -sd' '))" >&2
  exit 2
}

case "${1:-}" in
--list)
  [ $# -eq 1 ] || usage
  list
  exit 0
  ;;
-h | --help | "") usage ;;
esac
[ $# -eq 2 ] || usage
name=$1
case "$name" in
*/* | .* | "") die "bad mutant name '$name' (see $prog --list)" ;;
esac
patch_file="$here/$name.patch"
[ -f "$patch_file" ] || die "no mutant named '$name' (mutants: $(list | paste -sd' '))"
root=$(git -C "$here" rev-parse --show-toplevel 2>/dev/null) || die "$here is not inside a git work tree"

mkdir -p "$2" || die "cannot create $2"
out=$(cd "$2" && pwd)
case "$out/" in
"$root"/*)
  # Inside the repo only where git ignores it (e.g. build/...), or the copy
  # would copy itself on the next run once someone tracks it.
  git -C "$root" check-ignore -q "$out" || die "OUTDIR $out is inside $root and not ignored by git: use build/... or a dir outside the repo"
  ;;
esac

# One build per OUTDIR at a time (two chaos runs may share one).
exec 9>"$out/.lock"
flock 9

# The tree the mutant is built in: OUTDIR's own, or the shared one.
tree=$out
if [ -n "${PICKET_MUTANT_TREE:-}" ]; then
  mkdir -p "$PICKET_MUTANT_TREE" || die "cannot create $PICKET_MUTANT_TREE"
  tree=$(cd "$PICKET_MUTANT_TREE" && pwd)
fi
src="$tree/src" bld="$tree/build" bin="$out/bin"
# The files the last patch applied in this tree changed ("a/..." paths).
patched="$tree/patched"
stamp="$bin/.built"

# What the build was made from: the index (which files, which blobs), the
# patch and this script. Work-tree edits are caught by mtime below.
fingerprint() {
  {
    git -C "$root" ls-files -s
    git -C "$root" ls-files -d # deleted in the work tree: not copied
    cat "$patch_file" "$self"
  } | sha256sum | cut -d' ' -f1
}

tests_opt=""
if grep -q '^[[:space:]]*option(PICKET_TESTS\b' "$root/CMakeLists.txt"; then
  tests_opt="-DPICKET_TESTS=OFF"
fi

# The files the build reads: every tracked file, less tests/ and bench/ when
# tests are off (they are not configured then).
build_inputs() {
  if [ -n "$tests_opt" ]; then
    git -C "$root" ls-files -z -- . ':(exclude)tests' ':(exclude)bench'
  else
    git -C "$root" ls-files -z
  fi
}

fp=$(fingerprint)
if [ -f "$stamp" ] && [ -x "$bin/picketd" ] && [ -x "$bin/fenced-kv" ] &&
  [ "$(cat "$stamp")" = "$fp" ] && [ ! "$patch_file" -nt "$stamp" ] && [ ! "$self" -nt "$stamp" ]; then
  newer=$(cd "$root" && build_inputs |
    xargs -0 -r sh -c 'find "$@" -maxdepth 0 -newer "$0" -print 2>/dev/null' "$stamp" | head -n1) || true
  if [ -z "$newer" ]; then
    echo "$bin"
    exit 0
  fi
  echo "$prog: $name: $newer changed since the last build; rebuilding" >&2
fi

# One build per shared tree at a time, too (OUTDIR's lock is taken first,
# everywhere, so two builds never wait on each other in a circle).
if [ "$tree" != "$out" ]; then
  exec 8>"$tree/.lock"
  flock 8
fi

# Copy the tracked files (as they are in the work tree; files deleted there
# are skipped). tar keeps their mtimes, so the rebuild below is incremental.
t0=$(date +%s.%N) # the sources as of now: a later edit rebuilds next run
rm -f "$stamp" # from here on OUTDIR/bin is not this build until it succeeds
rm -rf "$src.new"
mkdir -p "$src.new"
(
  cd "$root"
  git ls-files -z | while IFS= read -r -d '' f; do
    if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
  done | tar --null --no-recursion -T - -cf -
) | tar -C "$src.new" -xf - || die "copying the sources of $root to $src.new failed"

# Apply: a dry run first, so a patch that does not apply leaves no half.
if ! why=$(patch -d "$src.new" -p1 -F0 --dry-run --no-backup-if-mismatch -f < "$patch_file" 2>&1); then
  rm -rf "$src.new"
  detail=$(printf '%s\n' "$why" | grep -Ei 'failed|can.t find|malformed|only garbage|reversed' |
    tr '\n' ' ' | sed 's/  */ /g; s/ $//' | cut -c1-200)
  die "$name.patch does not apply to $root (${detail:-patch failed}): update the mutant"
fi
patch -d "$src.new" -p1 -F0 --no-backup-if-mismatch -f -s < "$patch_file" >/dev/null ||
  die "$name.patch failed to apply after a clean dry run"
# The copy gave the files the previous patch changed their old mtimes back,
# older than the objects built from the patched text: make would keep those
# objects. Touching them rebuilds them (patch gave its own files a new one).
if [ -f "$patched" ]; then
  while IFS= read -r f; do
    if [ -e "$src.new/$f" ]; then touch "$src.new/$f"; fi
  done < "$patched"
fi
rm -rf "$src"
mv "$src.new" "$src"
sed -n 's/^+++ b\/\([^[:space:]]*\).*/\1/p' "$patch_file" > "$patched.tmp"
mv -f "$patched.tmp" "$patched"

log="$tree/build.log"
: > "$log"
if [ ! -f "$bld/CMakeCache.txt" ]; then
  echo "$prog: $name: configuring (Release${tests_opt:+, tests off})" >&2
  # shellcheck disable=SC2086
  cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Release $tests_opt >> "$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "$name: cmake configure failed (log: $log)"; }
fi
echo "$prog: $name: building picketd fenced-kv" >&2
cmake --build "$bld" --target picketd fenced-kv -j"${JOBS:-2}" >> "$log" 2>&1 ||
  { tail -n 30 "$log" >&2; die "$name: build failed (log: $log)"; }

mkdir -p "$bin"
rm -f "$stamp"
for b in picketd fenced-kv; do
  [ -x "$bld/bin/$b" ] || die "$name: the build made no $bld/bin/$b"
  cp -f "$bld/bin/$b" "$bin/$b.tmp"
  mv -f "$bin/$b.tmp" "$bin/$b"
done
echo "$name" > "$bin/MUTANT"
# The stamp's mtime is the copy's time: a source edited during the build
# is newer and rebuilds next run.
echo "$fp" > "$stamp.tmp"
touch -d "@$t0" "$stamp.tmp"
mv -f "$stamp.tmp" "$stamp"
echo "$bin"
