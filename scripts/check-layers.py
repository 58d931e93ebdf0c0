#!/usr/bin/env python3
"""Fails when a folder includes a layer above it.

The layer order is read from docs/architecture.md (the line that starts
with "Layer order"), so the document and the check cannot disagree. Rules:
  - src/<layer>/ and dataplane/ include only their own layer and layers below
    it (genie.pb.h, generated from proto/genie.proto, belongs to control);
    layers written side by side ("server | runtime") are of one rank and
    include neither each other;
  - src/tools (the CLI), samples/ and bindings/ use only the public headers
    (genie.h, genie_seed.h) and their own files;
  - bench/ includes nothing from tests/ (internal benchmarks may include
    layers, which they link).
Usage: check-layers.py [REPO_ROOT]. Prints each violation; exits 1 if any.
"""
import os
import re
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
doc = os.path.join(root, "docs", "architecture.md")
order = None
with open(doc, encoding="utf-8") as f:
    for line in f:
        m = re.match(r"\s*Layer order[^:]*:\s*(.+)", line)
        if m:
            order = [[w.strip(" `.") for w in step.split("|")] for step in m.group(1).split("->")]
            break
if not order:
    sys.exit(f"{doc}: no 'Layer order (lowest first): a -> b -> ...' line")
rank = {name: i for i, step in enumerate(order) for name in step}
PUBLIC = {"genie.h", "genie_seed.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^>"]+)[>"]')
SOURCES = (".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh")


def layer_of_path(rel):
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 2 and parts[1] in rank:
        return parts[1]
    if parts[0] in rank and len(parts) > 1:
        return parts[0]
    return None


def layer_of_include(inc, src_dir):
    if inc == "genie.pb.h":
        return "control"
    if inc.startswith("../") or inc.startswith("./"):
        resolved = os.path.relpath(os.path.normpath(os.path.join(src_dir, inc)), root)
        return layer_of_path(resolved) or resolved
    first = inc.split("/")[0]
    return first if first in rank and "/" in inc else None


problems = []
for top in ("src", "dataplane", "bench", "samples", "bindings"):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        dirnames[:] = [d for d in dirnames if d not in ("target", "build") and not d.startswith(".")]
        for name in filenames:
            if not name.endswith(SOURCES):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            own = layer_of_path(rel)
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    target = layer_of_include(inc, dirpath)
                    where = f"{rel}:{lineno}: includes {inc}"
                    if own is not None:
                        if target in rank and rank[target] > rank[own]:
                            problems.append(f"{where}: layer {own} must not include layer {target} above it")
                        elif target in rank and rank[target] == rank[own] and target != own:
                            problems.append(f"{where}: layers {own} and {target} stand side by side:"
                                            " neither includes the other")
                        elif target is not None and target not in rank:
                            problems.append(f"{where}: layer {own} reaches outside the layers ({target})")
                    elif rel.startswith(("src/tools/", "samples/", "bindings/")):
                        if target is not None or inc.startswith("../"):
                            problems.append(f"{where}: {rel.split('/')[0] if not rel.startswith('src/') else 'the CLI'}"
                                            " uses only the public headers (genie.h, genie_seed.h) and its own files")
                    elif rel.startswith("bench/"):
                        if target is not None and target.startswith("tests/"):
                            problems.append(f"{where}: benchmarks must not include test code")
for p in problems:
    print(p)
if problems:
    print(f"{len(problems)} layer violation(s); the order is in docs/architecture.md")
    sys.exit(1)
print(f"layers ok: {' -> '.join(' | '.join(step) for step in order)}")
