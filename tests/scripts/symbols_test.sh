#!/usr/bin/env bash
# The shared library exports the C API only (genie_* symbols), under the
# ABI-major SONAME, and does not load the BLAS with it (it is loaded by the
# first matrix product: exec/cpu/blas.hpp).
set -euo pipefail
lib=$(ls "$GENIE_BUILD_DIR"/libgenie.so.*.*.* | head -n 1)
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[ "$soname" = "libgenie.so.1" ] || { echo "FAIL: SONAME is '$soname', want libgenie.so.1"; exit 1; }

if objdump -p "$lib" | awk '/NEEDED/ {print $2}' | grep -q openblas; then
  echo "FAIL: libgenie links the BLAS (it should load it on first use)"; exit 1
fi

syms=$(nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}' | sed 's/@.*//' | sort -u)
count=$(printf '%s\n' "$syms" | grep -c '^genie_' || true)
[ "$count" -ge 50 ] || { echo "FAIL: only $count genie_* symbols exported"; exit 1; }
for want in genie_init_abi genie_graph_submit genie_tensor_alloc genie_status_str; do
  grep -qx "$want" <<<"$syms" || { echo "FAIL: $want is not exported"; exit 1; }
done
others=$(printf '%s\n' "$syms" | grep -v '^genie_' | grep -v '^GENIE_1$' || true)
if [ -n "$others" ]; then
  echo "FAIL: symbols outside the C API are exported:"
  printf '%s\n' "$others" | head -n 20
  exit 1
fi
echo "symbols_test: $count genie_* symbols exported, nothing else; SONAME $soname; the BLAS not linked"
