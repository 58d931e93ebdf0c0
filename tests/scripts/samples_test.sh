#!/usr/bin/env bash
# The MLP sample in every language (samples/c/mlp.c, samples/go,
# samples/rust, samples/python/mlp.py), embedded and remote against a real
# `genie serve --port 0`: each must print `checksum y = ...`, and all runs
# must print the same one. Then bench/binding_overhead.sh --quick (the
# per-call overhead benchmark of the bindings; figures are not checked).
# A language whose toolchain or binding is missing is left out with a note;
# with fewer than two languages there is nothing to compare (exit 77).
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
SRC=${GENIE_SOURCE_DIR:?GENIE_SOURCE_DIR is not set}

cmake --install "$B" --prefix "$TMP/prefix" >/dev/null
export PKG_CONFIG_PATH=$(dirname "$(find "$TMP/prefix" -name genie.pc | head -n 1)")
libdir=$(dirname "$(find "$TMP/prefix" -name 'libgenie.so.1' | head -n 1)")
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Programs not built with the sanitizers run with its runtimes preloaded
# when libgenie has them (leak checks off for Go's and Python's own heaps).
# Rust allocates with malloc, so its leak checks stay on.
binding_env=(env) rust_env=(env)
if [ "${GENIE_SANITIZE:-0}" = "1" ]; then
  preload="LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  binding_env=(env "$preload" ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=1 PYTHONMALLOC=malloc)
  rust_env=(env "$preload" ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0:abort_on_error=1)
fi

# --- build each sample -----------------------------------------------------------
NAMES=() CMDS=()
add() { NAMES+=("$1"); CMDS+=("$2"); }
[ -x "$B/sample_mlp" ] || fail "$B/sample_mlp was not built"
add c "$B/sample_mlp"

if command -v go >/dev/null && command -v swig >/dev/null; then
  export GOPROXY=off GOFLAGS=-mod=mod GOSUMDB=off GO111MODULE=on
  export GOCACHE="$TMP/gocache" GOPATH="$TMP/gopath"
  (cd "$SRC/samples/go" && go build -o "$TMP/mlp_go" .) 2>"$TMP/go_build.err" || fail "building samples/go"
  add go "${binding_env[*]} $TMP/mlp_go"
else
  echo "note: Go sample left out: go or swig not installed"
fi

if [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ]; then
  (cd "$SRC/samples/rust" && RUSTC=/usr/bin/rustc CARGO_HOME="$B/bindings/rust/cargo-home" \
     CARGO_TARGET_DIR="$B/samples/rust/target" /usr/bin/cargo build --offline --locked -q) \
     2>"$TMP/rust_build.err" || fail "building samples/rust"
  add rust "${rust_env[*]} $B/samples/rust/target/debug/mlp"
else
  echo "note: Rust sample left out: Debian's cargo/rustc not installed"
fi

if [ -f "$SRC/samples/python/mlp.py" ]; then
  if ls "$B"/bindings/python/genie/_capi*.so >/dev/null 2>&1 && [ -x /usr/bin/python3 ]; then
    add python "${binding_env[*]} PYTHONPATH=$B/bindings/python /usr/bin/python3 $SRC/samples/python/mlp.py"
  else
    echo "note: Python sample left out: the Python binding was not built in $B"
  fi
else
  echo "note: no samples/python/mlp.py yet"
fi
[ "${#NAMES[@]}" -ge 2 ] || { echo "SKIP: only ${NAMES[*]} can run: nothing to compare"; exit 77; }

# --- run them embedded, then remote ------------------------------------------------
start_server server

want=
for mode in embedded remote; do
  for i in "${!NAMES[@]}"; do
    name=${NAMES[$i]}
    out="$TMP/$name.$mode.out"
    if [ "$mode" = remote ]; then
      # shellcheck disable=SC2086
      GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TIMEOUT=20000 \
        ${CMDS[$i]} >"$out" 2>"$TMP/$name.$mode.err" || fail "$name sample ($mode) exited $?"
    else
      # shellcheck disable=SC2086
      ${CMDS[$i]} >"$out" 2>"$TMP/$name.$mode.err" || fail "$name sample ($mode) exited $?"
    fi
    got=$(sed -n 's/^checksum y = \(-\{0,1\}[0-9][0-9]*\.[0-9]\{4\}\)$/\1/p' "$out")
    [ -n "$got" ] || fail "$name sample ($mode) printed no 'checksum y = <%.4f>' line: $(cat "$out")"
    grep -qx "mode $mode" "$out" || fail "$name sample did not run $mode: $(head -n 1 "$out")"
    [ -z "$want" ] && want=$got
    [ "$got" = "$want" ] || fail "$name sample ($mode): checksum $got, the C sample printed $want"
    echo "ok: $name $mode: checksum y = $got"
  done
done
case "$want" in 0.0000|-0.0000|nan|-nan) fail "degenerate checksum $want" ;; esac
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "genie serve did not stop cleanly"
SERVER_PID=

# --- the overhead benchmark runs (tiny) -------------------------------------------
bash "$SRC/bench/binding_overhead.sh" --quick "$B" >"$TMP/bench.out" 2>"$TMP/bench.err" ||
  { cat "$TMP/bench.out"; fail "bench/binding_overhead.sh --quick exited $?"; }
cat "$TMP/bench.out"
grep -q '^c  *[0-9.]* ' "$TMP/bench.out" || fail "binding_overhead.sh printed no C row"
echo "samples_test: ${NAMES[*]} agree embedded and remote (checksum y = $want)"
