#!/usr/bin/env bash
# Per-call overhead of the language bindings: the same tiny graph (out = a +
# b, two f32 [4] tensors, resident), submitted and waited for, embedded, from
# C (bench_binding_overhead: the baseline), Go (bindings/go/bench),
# Rust (bindings/rust/examples) and Python (bench/binding_overhead.py).
# Each program prints `per_call_ns X` (the mean over --iters calls); the
# programs run interleaved, C, Go, Rust, Python, for several rounds, and the
# table gives per language the p50 (and min, max) over rounds, and the
# medians over rounds of the ratio to, and the difference from, the C run of
# the same round.
#
#   bench/binding_overhead.sh [--quick] [--rounds R] [--iters N] [BUILD_DIR]
#
# BUILD_DIR (default: build, the Release build of `make build`) must hold
# the library and bench/bench_binding_overhead; the Go and Rust programs are
# built here against it (installed into a temporary prefix, found through
# pkg-config). A language whose toolchain or binding is missing is skipped,
# with the reason. --quick: 2 rounds of 50 calls (a smoke run for the test
# suite; the figures mean nothing).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=build rounds=7 iters=5000 quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; rounds=2; iters=50 ;;
    --rounds) rounds=${2:?--rounds needs a number}; shift ;;
    --iters) iters=${2:?--iters needs a number}; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "binding_overhead.sh: unknown option '$1'" >&2; exit 2 ;;
    *) B=$1 ;;
  esac
  shift
done
[[ "$rounds" =~ ^[1-9][0-9]*$ && "$iters" =~ ^[1-9][0-9]*$ ]] || { echo "binding_overhead.sh: --rounds and --iters need positive integers" >&2; exit 2; }
B=$(cd "$B" && pwd) || { echo "binding_overhead.sh: no build directory $B (run make build)" >&2; exit 2; }
C_BENCH="$B/bench/bench_binding_overhead"
[ -x "$C_BENCH" ] || { echo "binding_overhead.sh: $C_BENCH not built (GENIE_BUILD_BENCH=ON)" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset GENIE_MASTER_ADDR GENIE_MASTER_PORT
cmake --install "$B" --prefix "$TMP/prefix" >/dev/null
export PKG_CONFIG_PATH=$(dirname "$(find "$TMP/prefix" -name genie.pc | head -n 1)")
libdir=$(dirname "$(find "$TMP/prefix" -name 'libgenie.so.1' | head -n 1)")
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# A sanitized library (make test's build) needs its runtimes preloaded into
# programs that were not built with them.
binding_env=(env)
sanitized=no
# (No -q: grep must read all of ldd's output. With -q it may exit at the
# first match, and under pipefail the SIGPIPE ldd then gets turns the
# condition false, so the runtimes would not be preloaded.)
if ldd "$libdir/libgenie.so.1" | grep libasan >/dev/null; then
  sanitized=yes
  binding_env=(env LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
               ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0" PYTHONMALLOC=malloc)
fi

LANGS=(c) CMDS=("$C_BENCH")
if command -v go >/dev/null && command -v swig >/dev/null; then
  # A fresh Go build cache: go's cache key does not include pkg-config's
  # output (the temporary prefix).
  if (cd "$SRC/bindings/go" && GOPROXY=off GOFLAGS=-mod=mod GOSUMDB=off GOCACHE="$TMP/gocache" \
        GOPATH="$TMP/gopath" go build -o "$TMP/go_overhead" ./bench/binding_overhead) 2>"$TMP/go.err"; then
    LANGS+=(go) CMDS+=("${binding_env[*]} $TMP/go_overhead")
  else
    echo "skip: go: building bindings/go/bench/binding_overhead failed: $(tail -n 3 "$TMP/go.err")"
  fi
else
  echo "skip: go: go or swig not installed"
fi
if [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ]; then
  if (cd "$SRC/bindings/rust" && RUSTC=/usr/bin/rustc CARGO_HOME="$B/bindings/rust/cargo-home" \
        CARGO_TARGET_DIR="$B/bindings/rust/target" /usr/bin/cargo build --offline --locked -q --release \
        --example binding_overhead) 2>"$TMP/rust.err"; then
    LANGS+=(rust) CMDS+=("${binding_env[*]} $B/bindings/rust/target/release/examples/binding_overhead")
  else
    echo "skip: rust: building bindings/rust/examples/binding_overhead failed: $(tail -n 3 "$TMP/rust.err")"
  fi
else
  echo "skip: rust: Debian's cargo/rustc not installed"
fi
if [ ! -f "$SRC/bench/binding_overhead.py" ]; then
  echo "skip: python: no bench/binding_overhead.py"
elif ! ls "$B"/bindings/python/genie/_capi*.so >/dev/null 2>&1 || [ ! -x /usr/bin/python3 ]; then
  echo "skip: python: the Python binding was not built in $B"
else
  LANGS+=(python) CMDS+=("${binding_env[*]} PYTHONPATH=$B/bindings/python /usr/bin/python3 $SRC/bench/binding_overhead.py")
fi

# --- interleaved rounds --------------------------------------------------------------
for ((r = 1; r <= rounds; r++)); do
  for i in "${!LANGS[@]}"; do
    lang=${LANGS[$i]}
    # shellcheck disable=SC2086
    out=$(${CMDS[$i]} --iters "$iters" 2>"$TMP/$lang.err") || {
      echo "binding_overhead.sh: $lang run failed:" >&2; cat "$TMP/$lang.err" >&2; exit 1; }
    ns=$(printf '%s\n' "$out" | sed -n 's/^per_call_ns \([0-9.][0-9.e+]*\)$/\1/p')
    [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [ -n "$ns" ] || {
      echo "binding_overhead.sh: $lang printed '$out', not one line 'per_call_ns X'" >&2; exit 1; }
    echo "$ns" >>"$TMP/$lang.ns"
    [ "$lang" = c ] && c_ns=$ns
    awk -v a="$ns" -v c="$c_ns" 'BEGIN { printf "%.6f\n", a / c }' >>"$TMP/$lang.ratio"
    awk -v a="$ns" -v c="$c_ns" 'BEGIN { printf "%.1f\n", a - c }' >>"$TMP/$lang.diff"
  done
done

# median FILE / min FILE / max FILE
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
cpu=$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$B/CMakeCache.txt" 2>/dev/null)
echo "binding overhead: submit + wait of out = a + b (f32 [4]), embedded, $iters calls per run, $rounds interleaved rounds"
echo "machine: $(nproc) cores, $cpu; build: ${build_type:-?}, sanitized: $sanitized; $(date -u +%Y-%m-%dT%H:%MZ)"
[ "$quick" = 1 ] && echo "(--quick: a smoke run, the figures mean nothing)"
printf '%-8s %12s %12s %12s %12s %14s\n' language "p50 us/call" "min us" "max us" "ratio vs C" "ns over C"
for lang in "${LANGS[@]}"; do
  p50=$(median "$TMP/$lang.ns")
  mn=$(sort -g "$TMP/$lang.ns" | head -n 1)
  mx=$(sort -g "$TMP/$lang.ns" | tail -n 1)
  ratio=$(median "$TMP/$lang.ratio")
  diff=$(median "$TMP/$lang.diff")
  awk -v l="$lang" -v p="$p50" -v mn="$mn" -v mx="$mx" -v r="$ratio" -v d="$diff" \
    'BEGIN { printf "%-8s %12.2f %12.2f %12.2f %11.3fx %14.0f\n", l, p / 1e3, mn / 1e3, mx / 1e3, r, d }'
done
