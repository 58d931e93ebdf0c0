#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/) with clang into their own build
# directory and runs each one.
#   scripts/fuzz.sh BUILD_DIR SECONDS    run each harness for SECONDS (make fuzz)
#   scripts/fuzz.sh BUILD_DIR brief      every seed once, then 2000 mutations
#                                        each (the fuzz test of make test)
# New inputs found go to BUILD_DIR/corpus/<harness> (the seeds in
# fuzz/corpus stay as committed); a crash leaves its input in BUILD_DIR and
# fails. Exit 0 pass, 1 a crash or build failure, 77 no clang with libFuzzer.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS|brief}
MODE=${2:?usage: scripts/fuzz.sh BUILD_DIR SECONDS|brief}
HARNESSES="frame graph_json server"

CC=$(command -v clang-14 || command -v clang || true)
CXX=$(command -v clang++-14 || command -v clang++ || true)
if [ -z "$CC" ] || [ -z "$CXX" ]; then
  echo "SKIP: no clang (install clang and libclang-rt-14-dev: scripts/install-deps.sh)"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
if ! "$CXX" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
  echo "SKIP: $CXX cannot link libFuzzer (install libclang-rt-14-dev): $(head -c 300 "$probe/err")"
  exit 77
fi

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$ROOT/fuzz" -B "$BUILD" "${gen[@]}" -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  "${launcher[@]}" >/dev/null
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target $(for h in $HARNESSES; do echo "${h}_fuzz"; done)

# Leaks are checked per input except in the server harness, whose server
# allocates on its own threads between inputs (sessions, pools).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for h in $HARNESSES; do
  work="$BUILD/corpus/$h"
  mkdir -p "$work"
  opts=(-artifact_prefix="$BUILD/$h-" -print_final_stats=1 -rss_limit_mb=4096 -malloc_limit_mb=1024 -timeout=30)
  [ "$h" = server ] && opts+=(-detect_leaks=0)
  if [ "$MODE" = brief ]; then
    opts+=(-runs=2000)
  else
    opts+=(-max_total_time="$MODE")
  fi
  echo "== $h"
  if ! "$BUILD/${h}_fuzz" "${opts[@]}" "$work" "$ROOT/fuzz/corpus/$h" >"$BUILD/$h.log" 2>&1; then
    echo "FAIL: $h: $(grep -m1 -E 'ERROR|SUMMARY|server_fuzz:' "$BUILD/$h.log" || tail -n 3 "$BUILD/$h.log")"
    tail -n 40 "$BUILD/$h.log"
    status=1
    continue
  fi
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' "$BUILD/$h.log" | sed 's/^/  /'
done
exit $status
