#!/usr/bin/env python3
"""Checks the header's ABI history against tests/data/abi-0.1.txt, the
functions and types of the 0.1.0 header:

  - every one of them is still declared (removing one breaks the ABI:
    deprecate it instead, and remove it with the next major version);
  - every function or type declared since carries "@since X.Y" in its
    comment (a group of declarations under one comment shares it), with
    0.1 < X.Y <= the header's GENIE_VERSION.

    python3 scripts/check-header-since.py          # the check (exit 1: what is wrong)
    python3 scripts/check-header-since.py --list   # the names and their @since
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "genie.h"
BASELINE = ROOT / "tests" / "data" / "abi-0.1.txt"

# A doc comment, then the declaration it documents: a GENIE_API function
# or a typedef (struct, enum or function pointer), up to its ';' or '{'.
UNIT = re.compile(
    r"(/\*\*(?:(?!\*/).)*\*/)?\s*"
    r"(GENIE_API[^;{]*?\b(genie_\w+)\s*\("
    r"|typedef\s+(?:struct|enum)\s+\w+\s*(?:\{|\w+\s*;[^\n]*)"
    r"|typedef\s[^;{]*?\(\s*\*\s*(genie_\w+)\s*\))",
    re.S)


def declarations(text):
    """[(name, since or None)] in header order."""
    out = []
    last_doc = None
    for m in UNIT.finditer(text):
        doc, decl = m.group(1), m.group(2)
        if decl.startswith("GENIE_API"):
            name = m.group(3)
        elif m.group(4):
            name = m.group(4)
        else:
            # typedef struct/enum: the name is the typedef's, after its body
            # for an enum, on the same line for an opaque struct.
            if decl.rstrip().endswith("{"):
                close = text.index("}", m.end())
                name = re.match(r"}\s*(genie_\w+)", text[close:]).group(1)
                tail = text[close:text.index("\n", close)]
            else:
                name = re.search(r"(genie_\w+)\s*;", decl).group(1)
                tail = decl
            doc = (doc or "") + tail
        # A declaration with no comment of its own shares the one above it
        # when nothing but whitespace separates them (a group).
        if m.group(1) is None and not decl.startswith("typedef"):
            between = text[m.start():m.start(2)]
            doc = last_doc if between.strip() == "" else None
        if doc is not None and m.group(1) is not None:
            last_doc = doc
        since = re.search(r"@since\s+(\d+)\.(\d+)", doc or "")
        out.append((name, (int(since.group(1)), int(since.group(2))) if since else None))
    return out


def main():
    text = HEADER.read_text()
    version = tuple(int(re.search(r"#define GENIE_VERSION_%s (\d+)" % p, text).group(1))
                    for p in ("MAJOR", "MINOR"))
    decls = declarations(text)
    if "--list" in sys.argv:
        for name, since in decls:
            print(name, "%d.%d" % since if since else "0.1")
        return 0
    baseline = {line.split("#")[0].strip() for line in BASELINE.read_text().splitlines()} - {""}
    declared = {name for name, _ in decls}
    problems = ["%s: in the 0.1 ABI (%s) but no longer declared: deprecate, do not remove"
                % (name, BASELINE.relative_to(ROOT)) for name in sorted(baseline - declared)]
    for name, since in decls:
        if name in baseline:
            if since is not None:
                problems.append("%s: in the 0.1 ABI, yet marked @since %d.%d" % ((name,) + since))
        elif since is None:
            problems.append("%s: added after 0.1, its comment needs '@since %d.%d'" % ((name,) + version))
        elif not ((0, 1) < since <= version):
            problems.append("%s: @since %d.%d is not between 0.1 and the header's %d.%d"
                            % ((name,) + since + version))
    for p in problems:
        print("check-header-since:", p)
    if problems:
        return 1
    print("check-header-since: %d declarations; %d of the 0.1 ABI, all present; %d later, each with @since"
          % (len(decls), len(baseline), len(decls) - len(baseline)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
