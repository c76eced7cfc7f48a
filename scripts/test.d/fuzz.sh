# Stage of scripts/test: libFuzzer over picketd's request path (server/api.c
# with the in-memory store of tests/fuzz/store_stub.c), for a bounded time.
# Its own clang build tree (build-fuzz/); the seed corpus is copied to a
# temp dir so the repository is never written. Any crash, sanitizer report,
# leak or broken reply (fuzz_api.c checks each one) fails the stage; the
# input that did it is kept in build-fuzz/artifacts/ for
# `build/bin/fuzz_api_replay FILE` or `build-fuzz/bin/fuzz_api FILE`.
#
#   PICKET_FUZZ_SECONDS   how long to fuzz (default 60)
set -euo pipefail
: "${ROOT:?ROOT must name the source tree}"
seconds=${PICKET_FUZZ_SECONDS:-60}
dir=$ROOT/build-fuzz
CC=clang cmake -S "$ROOT" -B "$dir" -DPICKET_FUZZ=ON -DPICKET_WERROR=ON >/dev/null
cmake --build "$dir" -j "${JOBS:-2}" --target fuzz_api

# The seeds alone first (the fuzz-labelled tests of this tree), then fuzzing.
(cd "$dir" && ctest --output-on-failure -L fuzz)

work=$(mktemp -d /tmp/picket-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$dir/artifacts"
cp "$ROOT"/tests/fuzz/corpus/* "$work/corpus/"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "fuzz: fuzz_api for ${seconds}s"
if ! "$dir/bin/fuzz_api" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -dict="$ROOT/tests/fuzz/api.dict" -artifact_prefix="$dir/artifacts/" -print_final_stats=1 \
    "$work/corpus" > "$work/fuzz.log" 2>&1; then
  tail -n 60 "$work/fuzz.log" >&2
  echo "fuzz: FAILED; the input is in $dir/artifacts/" >&2
  exit 1
fi
grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
  "$work/fuzz.log" || true
echo "fuzz: passed"
