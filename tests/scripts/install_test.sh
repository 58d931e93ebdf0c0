#!/usr/bin/env bash
# Installs Genie into a temporary prefix and builds a C program against it
# twice: with `pkg-config --cflags --libs genie` and with CMake
# `find_package(Genie)` -> Genie::genie.
set -euo pipefail
src="$GENIE_SOURCE_DIR"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

cmake --install "$GENIE_BUILD_DIR" --prefix "$prefix" >/dev/null
pcdir=$(dirname "$(find "$prefix" -name genie.pc | head -n 1)")
libdir=$(dirname "$(find "$prefix" -name 'libgenie.so.1' | head -n 1)")
[ -f "$prefix/include/genie.h" ] || { echo "FAIL: genie.h not installed"; exit 1; }
[ -f "$libdir/libgenie.a" ] || { echo "FAIL: static library not installed"; exit 1; }
[ -x "$prefix/bin/genie" ] || { echo "FAIL: genie CLI not installed"; exit 1; }

# Sanitized builds: consumers must link the sanitizer runtimes too.
san=""
[ "${GENIE_SANITIZE:-0}" = "1" ] && san="-fsanitize=address,undefined"

export PKG_CONFIG_PATH="$pcdir"
libs=$(pkg-config --libs genie | sed "s/ *$//")
case "$libs" in
  "-L"*" -lgenie") ;;
  *) echo "FAIL: pkg-config --libs genie leaks more than -lgenie: '$libs'"; exit 1 ;;
esac
# A static link: every private requirement resolves, and each optional
# library the static archive calls into is among them.
pkg-config --static --libs genie >/dev/null || { echo "FAIL: pkg-config --static --libs genie"; exit 1; }
requires=$(pkg-config --print-requires-private genie)
undefined=$(nm -u "$libdir/libgenie.a" 2>/dev/null || true)
if grep -q "libdeflate_" <<<"$undefined" && ! grep -qw libdeflate <<<"$requires"; then
  echo "FAIL: libgenie.a uses libdeflate but genie.pc does not require it: $requires"; exit 1
fi
if grep -q "prometheus" <<<"$undefined" && ! grep -qw prometheus-cpp-pull <<<"$requires"; then
  echo "FAIL: libgenie.a uses prometheus-cpp but genie.pc does not require it: $requires"; exit 1
fi
cc $san -std=c99 -Wall -Werror "$src/tests/scripts/consumer.c" -o "$tmp/consumer_pc" \
  $(pkg-config --cflags --libs genie)
LD_LIBRARY_PATH="$libdir" "$tmp/consumer_pc"

mkdir -p "$tmp/cmake_consumer"
cat > "$tmp/cmake_consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(Genie 0.2 REQUIRED)
add_executable(consumer $src/tests/scripts/consumer.c)
target_link_libraries(consumer PRIVATE Genie::genie)
CMAKE
cmake -S "$tmp/cmake_consumer" -B "$tmp/cmake_build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" >/dev/null
cmake --build "$tmp/cmake_build" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/cmake_build/consumer"
echo "install_test: pkg-config and find_package(Genie) consumers built and ran"
