#!/usr/bin/env python3
"""Generates tests/capi/header_errors_table.h from include/genie.h.

For every function the header declares, the table holds the error codes its
comment's "Errors:" line documents (following "as genie_x" references) and
three probes that call it with bad input: every handle NULL, every handle of
the wrong kind, and valid handles with every other pointer NULL. The test
(tests/capi/header_errors_test.c) checks that each call returns a code its
comment documents. Run after changing the header:

    python3 scripts/gen-header-errors.py            # rewrites the table
    python3 scripts/gen-header-errors.py --check    # fails if it is stale
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "genie.h"
TABLE = ROOT / "tests" / "capi" / "header_errors_table.h"

HANDLES = {"config", "context", "tensor", "graph", "future", "server", "server_config"}
# Handle parameters that may be NULL by design (defaults): not probed with NULL.
NULL_ALLOWED = {"genie_server_create", "genie_server_create_with", "genie_discover", "genie_cluster_members",
                "genie_init_abi"}
# Not called with valid handles and NULL arguments: they end or block on the
# handle (stop, wait, destroy).
NO_ARG_PROBE = {"genie_shutdown", "genie_server_stop", "genie_server_wait",
                "genie_config_destroy", "genie_tensor_destroy",
                "genie_graph_destroy", "genie_future_destroy",
                "genie_server_destroy", "genie_server_config_destroy",
                "genie_trace_stop", "genie_free"}


def parse(text):
    """(name, return type, [(type, name)], doc) for each declaration."""
    codes = re.findall(r"#define GENIE_ERR_(\w+) \(", text)
    decl = re.compile(
        r"(/\*\*(?:(?!\*/).)*?\*/)?\s*(?:#define (genie_init)\(|GENIE_API\s+([^;(]*?)\b(genie_\w+)\s*\(([^)]*)\)\s*;)",
        re.S)
    out, last_doc, docs = [], "", {}
    for m in decl.finditer(text):
        doc = m.group(1) or last_doc
        last_doc = doc
        if m.group(2):
            docs["genie_init"] = doc
            continue
        ret, name, params = m.group(3).strip(), m.group(4), m.group(5)
        plist = []
        for p in params.split(","):
            p = " ".join(p.split())
            if p in ("", "void"):
                continue
            pm = re.match(r"(.*?)(\w+)$", p)
            plist.append((pm.group(1).strip(), pm.group(2)))
        docs[name] = doc
        out.append((name, ret, plist, doc))
    return codes, out, docs


def documented(name, docs, codes, seen=None):
    seen = seen or set()
    if name in seen:
        return set()
    seen.add(name)
    doc = " ".join(docs[name].replace("*", " ").split())
    m = re.search(r"Errors:(.*?)(?:Threads:|$)", doc)
    if not m:
        raise SystemExit(f"{name}: no Errors: line in its comment")
    text = m.group(1)
    found = {c for c in codes if re.search(rf"\b{c}\b", text)}
    for ref in re.findall(r"\bas (genie_\w+)", text):
        found |= documented(ref, docs, codes, seen)
    if "validation error" in text or "errors of genie_graph_validate" in text:
        found |= documented("genie_graph_validate", docs, codes, seen)
    if "building calls above" in text:
        for b in ("genie_graph_create", "genie_graph_add_input", "genie_graph_add_constant",
                  "genie_graph_add_node", "genie_graph_set_attr_int", "genie_graph_mark_output",
                  "genie_graph_set_role", "genie_graph_set_phase", "genie_graph_validate"):
            found |= documented(b, docs, codes, seen)
    return found


def bad_handle_value(doc):
    doc = " ".join(doc.replace("*", " ").split())
    m = re.search(r"Errors: none \((\S+) for (?:NULL or )?a bad handle\)", doc)
    return m.group(1) if m else None


def handle_kind(t):
    m = re.fullmatch(r"(?:const )?genie_(\w+)_t \*", t)
    return m.group(1) if m and m.group(1) in HANDLES else None


def arg(t, n, mode):
    """C expression for parameter (t, n) in probe `mode`: null, kind, args."""
    kind = handle_kind(t)
    if kind:
        if mode == "null":
            return "NULL"
        if mode == "kind":
            other = "h->tensor" if kind == "config" else "h->config"
            return f"({t.replace(' *', '')} *){other}"
        return f"h->{kind}"
    if t.startswith("genie_op_ctx_t") or t.startswith("const genie_op_ctx_t"):
        return "NULL"
    if t.endswith("*"):
        if mode == "args":
            return "NULL"
        if t == "const char *":
            return '"x"'
        return f"({t})(void *)probe_buf"
    if t in ("genie_event_fn",):
        return "NULL" if mode == "args" else "probe_event_fn"
    if t in ("genie_future_callback_t",):
        return "NULL" if mode == "args" else "probe_future_fn"
    if t == "genie_dtype_t":
        return "GENIE_DTYPE_F32"
    if t.startswith("genie_") and t.endswith("_t") and t != "genie_status_t":
        return f"({t})0"
    return "0"


def generate():
    text = HEADER.read_text()
    codes, fns, docs = parse(text)
    lines = [
        "/* Generated by scripts/gen-header-errors.py from include/genie.h: do not edit. */",
        "#ifndef GENIE_HEADER_ERRORS_TABLE_H",
        "#define GENIE_HEADER_ERRORS_TABLE_H",
        "#include \"header_errors_probe.h\"",
        "",
    ]
    rows = []
    for name, ret, params, doc in fns:
        kinds = [handle_kind(t) for t, _ in params]
        has_handle = any(kinds)
        codes_ = sorted(documented(name, docs, codes))
        status = ret == "genie_status_t"
        probes = {}
        for mode in ("null", "kind", "args"):
            if mode in ("null", "kind") and (not has_handle or name in NULL_ALLOWED):
                continue
            if mode == "args" and (name in NO_ARG_PROBE or not status):
                continue
            call = f"{name}({', '.join(arg(t, n, mode) for t, n in params)})"
            fn = f"probe_{mode}_{name}"
            if status:
                body = f"return {call};"
            elif ret == "void":
                body = f"{call}; return 0;"
            elif ret.endswith("*"):
                body = f"return {call} != NULL ? 1 : 0;"
            else:
                body = f"return (long){call};"
            used = "h" in call.replace("h->", "h ") and "h->" in call
            lines.append(f"static long {fn}(const probe_handles_t *h) {{"
                         + ("" if used else " (void)h;") + f" {body} }}")
            probes[mode] = fn
        kind = "PROBE_STATUS" if status else "PROBE_VOID" if ret == "void" else \
            "PROBE_POINTER" if ret.endswith("*") else "PROBE_VALUE"
        bad = bad_handle_value(doc)
        badv = {"NULL": "0", None: "PROBE_NO_VALUE"}.get(bad, bad)
        codes_c = ", ".join(f"GENIE_ERR_{c}" for c in codes_) or "0"
        lines.append(f"static const genie_status_t codes_{name}[] = {{{codes_c}}};")
        rows.append(f"  {{\"{name}\", {kind}, codes_{name}, {len(codes_)}, {badv}, "
                    + ", ".join(probes.get(m, "NULL") for m in ("null", "kind", "args")) + "},")
    lines += ["", "static const probe_fn_t probe_table[] = {"] + rows + ["};", "",
              "#endif", ""]
    return "\n".join(lines)


def main():
    out = generate()
    if "--check" in sys.argv:
        if not TABLE.exists() or TABLE.read_text() != out:
            print(f"{TABLE.relative_to(ROOT)} is stale: run python3 scripts/gen-header-errors.py")
            return 1
        print("header error table up to date")
        return 0
    TABLE.write_text(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
