#!/usr/bin/env python3
"""Checks what the sources say about operators against the op table.

src/graph/op_table.def is the one list of built-in operators. The C++ side
(schemas, CPU kernels, the scheduler's classes and cost rules) is checked by
tests/unit/exec_op_table_test.cpp; this script checks what is not linked
into the tests:

- the CUDA backend (src/exec/cuda): it registers a kernel for exactly the
  ops whose CUDA column says CUDA; the NO_CUDA lines are the documented
  exceptions, and one that gains a kernel must say so;
- the ONNX importer: every op it emits is in the table;
- the PyTorch emitter: its EMITTED_OPS, and every op it names in a node, are
  in the table.

Usage: check-op-table.py [SOURCE_DIR]
"""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
problems = []

table, cuda = [], set()
for line in (root / "src/graph/op_table.def").read_text().splitlines():
    m = re.match(r"\s*GENIE_OP\((\w+),\s*(\w+),\s*(CUDA|NO_CUDA)\)", line)
    if not m:
        continue
    name, _, col = m.groups()
    if name in table:
        problems.append(f"op_table.def: {name} listed twice")
    table.append(name)
    if col == "CUDA":
        cuda.add(name)
    elif "//" not in line:
        problems.append(f"op_table.def: {name} is NO_CUDA without a reason on its line")
ops = set(table)
if len(ops) < 40:
    problems.append(f"op_table.def: only {len(ops)} ops read")

# CUDA kernels: t["op"] = ... in the backend's kernel tables.
registered = set()
for f in sorted((root / "src/exec/cuda").rglob("*")):
    if f.suffix in (".cu", ".cpp"):
        registered |= set(re.findall(r'\bt\["([a-z_0-9]+)"\]\s*=', f.read_text()))
for op in sorted(registered - ops):
    problems.append(f"CUDA backend: kernel for '{op}', which is not in the op table")
for op in sorted(cuda - registered):
    problems.append(f"CUDA backend: no kernel for '{op}' (mark it NO_CUDA in op_table.def, with the reason)")
for op in sorted((ops - cuda) & registered):
    problems.append(f"CUDA backend: '{op}' has a kernel but is marked NO_CUDA")

# ONNX importer: the ops it emits.
onnx = set()
for f in sorted((root / "src/frontend/onnx").glob("*.cpp")):
    text = f.read_text()
    onnx |= set(re.findall(r'\{"[A-Z]\w*",\s*"([a-z_0-9]+)"\}', text))  # op_type -> op maps
    onnx |= set(re.findall(r'\b(?:emit1?|pool)\(\s*"([a-z_0-9]+)"', text))
    for line in text.splitlines():
        if re.search(r"\bemit1?\(|\bgop\b|\bgenie_op\b", line):
            onnx |= set(re.findall(r'[?:]\s*"([a-z_0-9]+)"', line))
if len(onnx) < 20:
    problems.append(f"ONNX importer: only {len(onnx)} ops found; has the importer moved?")
for op in sorted(onnx - ops):
    problems.append(f"ONNX importer: emits '{op}', which is not in the op table")

# PyTorch emitter: EMITTED_OPS and the literal ops of its nodes.
emit = (root / "bindings/python/genie/torch/_emit.py").read_text()
sets = {}
for name in ("_UNARY", "_BINARY", "_COMPARE"):
    m = re.search(rf"^{name} = \{{([^}}]*)\}}", emit, re.M)
    sets[name] = set(re.findall(r'"([a-z_0-9]+)"', m.group(1))) if m else set()
m = re.search(r"^EMITTED_OPS = frozenset\([^{]*\{(.*?)\}\)", emit, re.M | re.S)
if not m:
    problems.append("PyTorch emitter: no EMITTED_OPS")
    claimed = set()
else:
    claimed = set(re.findall(r'"([a-z_0-9]+)"', m.group(1))) | sets["_UNARY"] | sets["_BINARY"] | sets["_COMPARE"]
named = set(re.findall(r'\.(?:node|_pool)\(\s*"([a-z_0-9]+)"', emit))
for op in sorted(claimed - ops):
    problems.append(f"PyTorch emitter: EMITTED_OPS has '{op}', which is not in the op table")
for op in sorted(named - claimed):
    problems.append(f"PyTorch emitter: a node of '{op}', which is not in EMITTED_OPS")

for p in problems:
    print(p)
if problems:
    sys.exit(1)
print(f"op table: {len(ops)} ops; CUDA {len(cuda)} (exceptions: {sorted(ops - cuda) or 'none'}); "
      f"ONNX importer emits {len(onnx)}; PyTorch emitter {len(claimed)}")
