#!/usr/bin/env python3
"""Writes the settings reference of docs/configuration.md from
src/core/config_settings.def, the one declaration of each setting.

The table sits between the markers <!-- settings:begin --> and
<!-- settings:end -->; the text around it is kept. Run after changing the
settings:

    python3 scripts/gen-config-settings.py            # rewrites the table
    python3 scripts/gen-config-settings.py --check    # fails if it is stale
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEF = ROOT / "src" / "core" / "config_settings.def"
DOC = ROOT / "docs" / "configuration.md"
BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"
FIELDS = ["field", "type", "default", "env", "kind", "lo", "hi", "side", "setter", "ctype", "help"]


def split_args(text):
    args, depth, cur, quoted, i = [], 0, "", False, 0
    while i < len(text):
        c = text[i]
        if quoted:
            cur += c
            if c == "\\":
                cur += text[i + 1]
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted, cur = True, cur + c
        elif c in "([{" or (c == "<" and text[i - 1].isalnum() and text[i + 1].isalpha()):
            depth, cur = depth + 1, cur + c
        elif c in ")]}" or (c == ">" and depth > 0 and text[i - 1].isalnum()):
            depth, cur = depth - 1, cur + c
        elif c == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    args.append(cur.strip())
    return args


def settings():
    code = "\n".join(line for line in DEF.read_text().splitlines() if not line.lstrip().startswith("//"))
    out = []
    for m in re.finditer(r"GENIE_SETTING\((.*?)\)\s*(?=GENIE_SETTING\(|\Z)", code, re.S):
        args = split_args(" ".join(m.group(1).split()))
        if len(args) != len(FIELDS):
            sys.exit(f"{DEF}: an entry has {len(args)} fields, not {len(FIELDS)}: {m.group(1)[:80]}")
        s = dict(zip(FIELDS, args))
        s["help"] = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', s["help"]))
        s["env"] = s["env"].strip('"') if s["env"] != "nullptr" else ""
        out.append(s)
    return out


def bounds(s):
    k, lo, hi = s["kind"], s["lo"], s["hi"]
    big = {"INT64_MAX": "", "1073741824": "2^30", "1099511627776": "2^40"}
    if k == "Int":
        return f"≥ {lo}" if hi == "INT64_MAX" else f"{lo}..{big.get(hi, hi)}"
    if k in ("Bool",):
        return "0, 1"
    if k == "OnOff":
        return "on, off, 1, 0"
    if k == "Text":
        return f"≤ {hi} bytes" if hi != "0" else "a path"
    return {"NodeId": "≤ 255 of [A-Za-z0-9._-]", "AuthToken": "empty or 16..4096 bytes",
            "Cluster": "1..64 of [A-Za-z0-9._-]", "Transport": "[a-z0-9_]{1,64}",
            "TransportList": "names [a-z0-9_]{1,64}", "EtcdEndpoints": f"≤ {hi} URLs",
            "Role": "client, server, worker", "Backend": "auto, tcp, rdma, dpdk, dpdk_gpudev, ucx",
            "LogLevel": "off … trace"}[k]


def default(s):
    d = s["default"]
    named = {"true": "1", "false": "0", "kDefaultMaxGraphBytes": "33554432 (32 MiB)", "kDefaultMaxGraphNodes": "65536",
             "kDefaultSessionMaxTensors": "65536", "kDefaultSessionMaxGraphs": "256",
             "64 << 20": "67108864 (64 MiB)", "{}": "none", '""': "none",
             "GENIE_NODE_ROLE_CLIENT": "client", "GENIE_BACKEND_AUTO": "auto", "LogLevel::Warn": "warn"}
    return named.get(d, d.strip('"'))


def table():
    rows = ["| setting | environment | default | bounds | side | C setter | meaning |",
            "|---|---|---|---|---|---|---|"]
    for s in settings():
        setter = "—" if s["ctype"] == "NONE" else f"`{s['setter']}`"
        env = f"`{s['env']}`" if s["env"] else "—"
        rows.append(f"| `{s['field']}` | {env} | {default(s)} | {bounds(s)} | {s['side'].lower()} | {setter} "
                    f"| {s['help']} |")
    return "\n".join(rows) + "\n"


def main():
    doc = DOC.read_text()
    a, b = doc.find(BEGIN), doc.find(END)
    if a < 0 or b < a:
        sys.exit(f"{DOC}: the markers {BEGIN} and {END} are missing")
    new = doc[:a + len(BEGIN)] + "\n" + table() + doc[b:]
    if "--check" in sys.argv[1:]:
        if new != doc:
            sys.exit(f"{DOC.relative_to(ROOT)} is stale against {DEF.relative_to(ROOT)}: "
                     "run python3 scripts/gen-config-settings.py")
        print(f"{DOC.relative_to(ROOT)}: the settings table matches {len(settings())} settings")
        return
    DOC.write_text(new)


if __name__ == "__main__":
    main()
