# Stage of scripts/test: libFuzzer over picketd's request path (server/api.c
# with the in-memory store of tests/fuzz/store_stub.c), for a bounded time.
# Its own clang build tree (build-fuzz/); the seed corpus is copied to a
# temp dir so the repository is never written. Any crash, sanitizer report,
# leak or broken reply (fuzz_api.c checks each one) fails the stage; the
# input that did it is kept in build-fuzz/artifacts/ for
# `build/bin/fuzz_api_replay FILE` or `build-fuzz/bin/fuzz_api FILE`.
#
#   PICKET_FUZZ_SECONDS        how long to fuzz the request path (default 60)
#   PICKET_FUZZ_AUTH_SECONDS   how long to fuzz the --auth-file parser (default 15)
set -euo pipefail
: "${ROOT:?ROOT must name the source tree}"
seconds=${PICKET_FUZZ_SECONDS:-60}
dir=$ROOT/build-fuzz
CC=clang cmake -S "$ROOT" -B "$dir" -DPICKET_FUZZ=ON -DPICKET_WERROR=ON >/dev/null
cmake --build "$dir" -j "${JOBS:-2}" --target fuzz_api fuzz_auth

# The seeds alone first (the fuzz-labelled tests of this tree), then fuzzing.
(cd "$dir" && ctest --output-on-failure -L fuzz)

work=$(mktemp -d /tmp/picket-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dir/artifacts"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# fuzz TARGET SECONDS SEEDS_DIR [libFuzzer flags...]: fuzzes a copy of the
# seeds (the repository is never written) and prints the final stats.
fuzz() {
  local target=$1 secs=$2 seeds=$3
  shift 3
  mkdir -p "$work/$target"
  cp "$seeds"/* "$work/$target/"
  echo "fuzz: $target for ${secs}s"
  if ! "$dir/bin/$target" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$dir/artifacts/" -print_final_stats=1 "$@" \
      "$work/$target" > "$work/$target.log" 2>&1; then
    tail -n 60 "$work/$target.log" >&2
    echo "fuzz: $target FAILED; the input is in $dir/artifacts/" >&2
    exit 1
  fi
  grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
    "$work/$target.log" || true
}

fuzz fuzz_api "$seconds" "$ROOT/tests/fuzz/corpus" -dict="$ROOT/tests/fuzz/api.dict"
fuzz fuzz_auth "${PICKET_FUZZ_AUTH_SECONDS:-15}" "$ROOT/tests/fuzz/auth_corpus" -max_len=8192
echo "fuzz: passed"
