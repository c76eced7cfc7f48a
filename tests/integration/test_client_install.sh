# test_client_install.sh BUILD_DIR [SANITIZERS]: installs the build into a temp prefix
# with `cmake --install`, then builds the C example of docs/libpicket.md
# (client/examples/hello.c, the same text as in docs/client.md) twice against the *installed*
# libpicket: with `pkg-config --cflags --libs picket` (shared library) and
# with find_package(picket) in CMake (static library), and runs both against
# a live picketd. Also checks that the shared library exports only picket_*.
. "$PICKET_SOURCE_DIR/tests/harness/harness.sh"
BUILD=${1:?usage: test_client_install.sh BUILD_DIR [SANITIZERS]}
CC=${CC:-cc}
# A sanitizer build installs an instrumented library: its users need the
# same runtime.
SANFLAGS=${2:+-fsanitize=$2}
h_start_redis
h_start_picketd
PREFIX="$H_DIR/prefix"

cmake --install "$BUILD" --prefix "$PREFIX" > "$H_DIR/install.log" 2>&1 ||
  h_fail "cmake --install failed: $(tail -5 "$H_DIR/install.log")"
pc=$(find "$PREFIX" -name picket.pc)
[ -n "$pc" ] || h_fail "picket.pc not installed"
LIBDIR=$(dirname "$(dirname "$pc")")
for f in include/picket/picket.h bin/picket; do
  [ -e "$PREFIX/$f" ] || h_fail "$f not installed"
done
for h in "$PICKET_SOURCE_DIR"/client/include/picket/*.h; do
  [ -e "$PREFIX/include/picket/$(basename "$h")" ] || h_fail "$(basename "$h") not installed"
done
[ -e "$LIBDIR/libpicket.so" ] && [ -e "$LIBDIR/libpicket.a" ] || h_fail "libpicket.{so,a} not in $LIBDIR"

# Only picket_* leaves the shared library (hidden visibility), and none of
# the internal picket__* or picket_proto_* symbols.
nm -D --defined-only "$LIBDIR/libpicket.so" | awk '{print $3}' > "$H_DIR/syms"
[ -s "$H_DIR/syms" ] || h_fail "no exported symbols"
bad=$(grep -v '^picket_' "$H_DIR/syms"; grep -e '^picket__' -e '^picket_proto_' "$H_DIR/syms")
[ -z "$bad" ] || h_fail "unexpected exported symbols: $bad"

# The example of docs/libpicket.md (section "libpicket: the C client") is this very file.
python3 - "$PICKET_SOURCE_DIR/docs/libpicket.md" "$PICKET_SOURCE_DIR/client/examples/hello.c" <<'PY' ||
import sys
doc, src = open(sys.argv[1]).read(), open(sys.argv[2]).read()
start = doc.index("```c\n", doc.index("libpicket: the C client")) + 5
sys.exit(0 if doc[start:doc.index("```\n", start)] == src else 1)
PY
  h_fail "the C example in docs/libpicket.md differs from client/examples/hello.c"

# 1. pkg-config, shared library.
export PKG_CONFIG_PATH="$(dirname "$pc")"
flags=$(pkg-config --cflags --libs picket) || h_fail "pkg-config --cflags --libs picket failed"
case "$flags" in *"$PREFIX"*) ;; *) h_fail "pkg-config flags do not point into the prefix: $flags" ;; esac
$CC -std=c11 -Wall -Wextra -Werror $SANFLAGS "$PICKET_SOURCE_DIR/client/examples/hello.c" $flags \
  -o "$H_DIR/hello" 2> "$H_DIR/cc.log" || h_fail "hello.c did not compile: $(cat "$H_DIR/cc.log")"
LD_LIBRARY_PATH="$LIBDIR" ldd "$H_DIR/hello" | grep -q "$LIBDIR/libpicket.so" ||
  h_fail "hello is not linked to the installed libpicket.so"
LD_LIBRARY_PATH="$LIBDIR" "$H_DIR/hello" "$PICKETD_URL" hello-pc > "$H_DIR/out" 2>&1 ||
  h_fail "hello exited $?: $(cat "$H_DIR/out")"
F=$(h_redis get 'picket:{hello-pc}:fence')
grep -q "^lock hello-pc fence $F\$" "$H_DIR/out" || h_fail "hello (fence $F): $(cat "$H_DIR/out")"
grep -q "^step 2 with fence $F\$" "$H_DIR/out" || h_fail "hello did not finish: $(cat "$H_DIR/out")"
grep -q '^done: success$' "$H_DIR/out" || h_fail "hello: $(cat "$H_DIR/out")"
[ "$(h_redis exists 'picket:{hello-pc}:lease')" = 0 ] || h_fail "hello did not release"

# 2. CMake package config, static library.
mkdir -p "$H_DIR/cm"
cat > "$H_DIR/cm/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(hello C)
find_package(picket 0.1 REQUIRED)
add_executable(hello $PICKET_SOURCE_DIR/client/examples/hello.c)
target_link_libraries(hello PRIVATE picket::picket_static)
CMAKE
cmake -S "$H_DIR/cm" -B "$H_DIR/cm/build" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_C_FLAGS="$SANFLAGS" -DCMAKE_EXE_LINKER_FLAGS="$SANFLAGS" > "$H_DIR/cm.log" 2>&1 &&
  cmake --build "$H_DIR/cm/build" >> "$H_DIR/cm.log" 2>&1 ||
  h_fail "find_package(picket) build failed: $(tail -20 "$H_DIR/cm.log")"
ldd "$H_DIR/cm/build/hello" | grep -q libpicket && h_fail "static hello links libpicket.so"
"$H_DIR/cm/build/hello" "$PICKETD_URL" hello-cmake > "$H_DIR/out" 2>&1 ||
  h_fail "static hello exited $?: $(cat "$H_DIR/out")"
grep -q '^done: success$' "$H_DIR/out" || h_fail "static hello: $(cat "$H_DIR/out")"

# 3. A held lock: the example reports it and exits 3.
"$PREFIX/bin/picket" --server "$PICKETD_URL" acquire hello-held --ttl 10s > /dev/null ||
  h_fail "installed picket could not acquire"
rc=0
LD_LIBRARY_PATH="$LIBDIR" "$H_DIR/hello" "$PICKETD_URL" hello-held > "$H_DIR/out" 2>&1 || rc=$?
[ "$rc" = 3 ] || h_fail "hello on a held lock exited $rc: $(cat "$H_DIR/out")"
echo "test_client_install: ok"
