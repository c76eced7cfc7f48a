# Stage of scripts/test: picketd's integration suites with every picketd
# process under valgrind memcheck; any error or leak (definite or indirect)
# in any of them fails the run. Uses the main build/ tree.
set -euo pipefail
logs=$(mktemp -d /tmp/picket-valgrind-XXXXXX)
trap 'rm -rf "$logs"' EXIT
export PICKET_PICKETD_WRAPPER="valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect --track-origins=yes --log-file=$logs/picketd.%p.log"
# The timing-sensitive waiter suite is left to the normal and ASan runs:
# under valgrind picketd is 20-50x slower and the latency bounds mean nothing.
export PICKET_TIME_SCALE=10
bad=0
(cd "$ROOT/build" && ctest --output-on-failure -j "$JOBS" -R '^picketd_(api|redis|fence|api_etcd)$') || bad=1
n=0
for f in "$logs"/picketd.*.log; do
  [ -e "$f" ] || continue
  n=$((n + 1))
  if [ -s "$f" ]; then
    echo "valgrind found problems in a picketd process:" >&2
    cat "$f" >&2
    bad=1
  fi
done
[ "$n" -gt 0 ] || { echo "valgrind stage: no picketd ran under valgrind" >&2; exit 1; }
echo "valgrind: $n picketd processes, $([ $bad = 0 ] && echo 'no errors, no leaks' || echo 'PROBLEMS')"
exit $bad
