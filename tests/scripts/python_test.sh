#!/usr/bin/env bash
# The Python binding (bindings/python) with the project's Python environment
# (scripts/python-env.sh: Debian's /usr/bin/python3 plus the pinned PyTorch 2
# from PyPI; `make test` makes it):
#   1. the pytest suites in tests/bindings/python: API, bad input, the
#      genie.init front door, the remote_accelerator device,
#      torch.compile(backend="genie"), capture (GPT-2, Llama-style, CNN) and
#      the lazy tensor, and remote mode against a real `genie serve --port 0`;
#   2. `pip install` of bindings/python into a fresh virtual environment,
#      without an index, finding libgenie through GENIE_LIBRARY_DIR, then
#      used from outside the source tree; the same from a built wheel;
#   3. bench/torch_block.py, bench/torch_gpt.py, bench/torch_paths.py and bench/binding_overhead.py
#      once with --quick
#      (they must run and print their figures; the figures are not checked).
# Under GENIE_SANITIZE=1 libgenie carries ASan/UBSan: python3 runs with their
# runtimes preloaded and leak checks off (the interpreter's own heap).
# Env: GENIE_BUILD_DIR, GENIE_SOURCE_DIR (set by ctest). Exit 0 pass, 77 skip.
set -uo pipefail
B=${GENIE_BUILD_DIR:?GENIE_BUILD_DIR is not set}
SRC=${GENIE_SOURCE_DIR:?GENIE_SOURCE_DIR is not set}
PY=$("$SRC/scripts/python-env.sh" --path)
PKG=$B/bindings/python

[ -x /usr/bin/python3 ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
if [ ! -x "$PY" ]; then
  echo "FAIL: the project's Python environment is missing ($PY): run scripts/python-env.sh (make test does)"
  exit 1
fi
if ! ls "$PKG"/genie/_capi*.so >/dev/null 2>&1; then
  echo "SKIP: the Python binding was not built in $B (needs swig and python3-dev)"; exit 77
fi
"$PY" -c 'import numpy, pytest' 2>/dev/null || { echo "SKIP: python3-numpy / python3-pytest missing"; exit 77; }
"$PY" -c 'import torch' || { echo "FAIL: torch does not import in $PY"; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
unset GENIE_MASTER_ADDR GENIE_MASTER_PORT GENIE_AUTH_TOKEN GENIE_NODE_ID

export PYTHONDONTWRITEBYTECODE=1
if [ "${GENIE_SANITIZE:-0}" = "1" ]; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0:abort_on_error=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" PYTHONMALLOC=malloc
fi

# --- 1. pytest -----------------------------------------------------------------
if PYTHONPATH="$PKG" GENIE_BUILD_DIR="$B" "$PY" -m pytest -q -p no:cacheprovider \
     "$SRC/tests/bindings/python" 2>&1 | tee "$TMP/pytest.out" | tail -n 40; then
  :
fi
grep -qE '^[0-9]+ passed' "$TMP/pytest.out" && ! grep -qE '[0-9]+ (failed|error)' "$TMP/pytest.out" \
  || fail "pytest suites (tests/bindings/python)"

# --- 2. pip install without an index: from the source tree, and as a wheel ------
# From a copy, so that the build writes nothing into the source tree. Each
# fresh environment sees the project environment's torch (a .pth file), so
# that torch.compile finds backend="genie" through the installed package's
# entry point, without an import of genie.
cp -r "$SRC/bindings/python" "$TMP/src"
rm -rf "$TMP/src/build" "$TMP/src"/*.egg-info
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
check_installed() {  # $1: what was installed, $2: the venv
  local out
  out=$(cd / && "$2/bin/python" - <<'PY' 2>&1
import numpy as np, genie
assert "/venv" in genie.__file__, genie.__file__
with genie.Context(use_env=False) as ctx:
    g = genie.Graph("pip")
    g.input("x", [2, 3])
    g.node("relu", "r", ["x"], outputs="y")
    g.output("y")
    y = ctx.run(g, {"x": np.array([[-1, 2, -3], [4, -5, 6]], np.float32)})["y"]
    assert y.tolist() == [[0, 2, 0], [4, 0, 6]], y
from importlib.metadata import entry_points
assert [e.value for e in entry_points(group="torch_dynamo_backends") if e.name == "genie"] == \
    ["genie.torch.compile:genie_backend"]
print("installed genie", genie.__version__, "works")
PY
)
  grep -q "works" <<<"$out" && echo "ok: $1: $out" || fail "$1: $out"
}
new_venv() {  # $1: path
  /usr/bin/python3 -m venv --system-site-packages "$1" >"$TMP/venv.log" 2>&1 || return 1
  echo "$SITE" >"$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/genie-test-torch.pth"
}
if new_venv "$TMP/venv"; then
  if (cd "$TMP" && GENIE_LIBRARY_DIR="$B" GENIE_INCLUDE_DIR="$SRC/include" \
        "$TMP/venv/bin/pip" install --no-index --no-build-isolation -q ./src) >"$TMP/pip.log" 2>&1; then
    check_installed "pip install bindings/python" "$TMP/venv"
  else
    fail "pip install bindings/python"; tail -n 30 "$TMP/pip.log"
  fi
  if (cd "$TMP" && GENIE_LIBRARY_DIR="$B" GENIE_INCLUDE_DIR="$SRC/include" \
        "$TMP/venv/bin/pip" wheel --no-index --no-build-isolation --no-deps -q -w "$TMP/wheels" ./src) \
        >"$TMP/wheel.log" 2>&1 && new_venv "$TMP/venv-wheel" && \
     "$TMP/venv-wheel/bin/pip" install --no-index -q "$TMP"/wheels/genie-*.whl >>"$TMP/wheel.log" 2>&1; then
    check_installed "pip install of the built wheel ($(basename "$TMP"/wheels/genie-*.whl))" "$TMP/venv-wheel"
  else
    fail "building or installing the wheel"; tail -n 30 "$TMP/wheel.log"
  fi
else
  echo "note: python3 -m venv unavailable (python3-venv): pip install not tried"; cat "$TMP/venv.log"
fi

# --- 3. benchmarks, once, tiny ---------------------------------------------------
if PYTHONPATH="$PKG" "$PY" "$SRC/bench/binding_overhead.py" --iters 200 >"$TMP/ovh.out" 2>"$TMP/ovh.err"; then
  if grep -qE '^per_call_ns [0-9]+(\.[0-9]+)?$' "$TMP/ovh.out" && [ "$(wc -l <"$TMP/ovh.out")" -eq 1 ]; then
    echo "ok: bench/binding_overhead.py: $(cat "$TMP/ovh.out")"
  else
    fail "bench/binding_overhead.py must print exactly one line 'per_call_ns <float>': $(cat "$TMP/ovh.out")"
  fi
else
  fail "bench/binding_overhead.py exited $?"; cat "$TMP/ovh.err"
fi
if "$PY" -c 'import torch' 2>/dev/null; then
  if PYTHONPATH="$PKG" "$PY" "$SRC/bench/torch_block.py" --quick --json "$TMP/tb.json" >"$TMP/tb.out" 2>&1 \
     && grep -q "ratio" "$TMP/tb.out" && [ -s "$TMP/tb.json" ]; then
    echo "ok: bench/torch_block.py --quick"; cat "$TMP/tb.out"
  else
    fail "bench/torch_block.py --quick"; cat "$TMP/tb.out"
  fi
  # torch_paths.py checks each path's logits against eager before it times them.
  if PYTHONPATH="$PKG" "$PY" "$SRC/bench/torch_paths.py" --quick >"$TMP/tp.out" 2>&1 \
     && grep -q "ratio decode device/compile" "$TMP/tp.out"; then
    echo "ok: bench/torch_paths.py --quick"; cat "$TMP/tp.out"
  else
    fail "bench/torch_paths.py --quick"; cat "$TMP/tp.out"
  fi
  # torch_gpt.py exits 1 when the generated tokens differ from eager greedy.
  if PYTHONPATH="$PKG" GENIE_BUILD_DIR="$B" "$PY" "$SRC/bench/torch_gpt.py" --quick --json "$TMP/tg.json" \
       >"$TMP/tg.out" 2>&1 && grep -q "ratio decode step remote/embedded" "$TMP/tg.out" && [ -s "$TMP/tg.json" ]; then
    echo "ok: bench/torch_gpt.py --quick"; cat "$TMP/tg.out"
  else
    fail "bench/torch_gpt.py --quick"; cat "$TMP/tg.out"
  fi
else
  echo "note: torch not importable: bench/torch_block.py and bench/torch_gpt.py not run"
fi

[ "$failures" -eq 0 ] || { echo "python_test: $failures failure(s)"; exit 1; }
echo "python_test: all passed"
