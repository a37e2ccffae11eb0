#!/usr/bin/env python3
"""Audits the `unsafe` blocks of the glue crate (src/): each must have a
`// SAFETY:` comment directly above it (on the lines just before the
statement that opens it) naming what it relies on; none may be the whole
body of a function longer than a few lines (blocks cover the FFI calls and
dereferences, not the logic around them); no SAFETY text may stand verbatim
in more than 3 places.

Usage: scripts/unsafe-audit.py [SRC_DIR] [--list]. Exit 1 on a violation."""

import collections
import os
import re
import sys

WHOLE_BODY_LINES = 12


def blocks(path):
    """(line number, SAFETY text or None, whole-body length or 0) per unsafe block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    in_test = False
    for i, line in enumerate(lines):
        code = re.sub(r'"(\\.|[^"\\])*"', '""', line.split("//")[0])
        if re.match(r"\s*mod tests\s*\{", code):
            in_test = True
        if not re.search(r"\bunsafe\s*\{", code) or re.search(r"\bunsafe\s+(fn|impl|extern|trait)\b", code):
            continue
        # The statement's first line: walk back over lines that continue it.
        start = i
        while start > 0 and lines[start - 1].rstrip().endswith(("=", "(", ",", "||", "&&", "=>")):
            start -= 1
        j = start - 1
        comment = []
        while j >= 0 and lines[j].strip().startswith("//"):
            comment.insert(0, lines[j].strip())
            j -= 1
        safety = None
        for k, c in enumerate(comment):
            if c.startswith("// SAFETY:"):
                safety = " ".join(x[2:].strip() for x in comment[k:])
                break
        whole = 0
        # A whole body: the previous code line opens a fn, and the block's end
        # is followed by the fn's end.
        prev = lines[j].strip() if j >= 0 else ""
        if re.search(r"\bfn\b.*\{$", prev) or (prev.endswith("{") and re.search(r"\)\s*(->.*)?\{$", prev) and "fn" in " ".join(lines[max(0, j - 8): j + 1])):
            if code.strip() in ("unsafe {",):
                depth = 0
                for k in range(i, len(lines)):
                    c = re.sub(r'"(\\.|[^"\\])*"', '""', lines[k].split("//")[0])
                    depth += c.count("{") - c.count("}")
                    if depth == 0:
                        nxt = next((lines[m].strip() for m in range(k + 1, len(lines)) if lines[m].strip()), "")
                        if nxt == "}" and k - i + 1 > WHOLE_BODY_LINES:
                            whole = k - i + 1
                        break
        out.append((i + 1, safety, whole, in_test))
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    src = args[0] if args else "src"
    listing = "--list" in sys.argv
    missing, whole, texts, total = [], [], collections.defaultdict(list), 0
    for root, _, names in os.walk(src):
        for n in sorted(names):
            if not n.endswith(".rs"):
                continue
            p = os.path.join(root, n)
            for line, safety, body, in_test in blocks(p):
                if in_test:
                    continue
                total += 1
                if safety is None:
                    missing.append(f"{p}:{line}")
                else:
                    texts[safety].append(f"{p}:{line}")
                if body:
                    whole.append(f"{p}:{line} ({body} lines)")
    repeated = {t: ps for t, ps in texts.items() if len(ps) > 3}
    print(f"{total} unsafe blocks; {total - len(missing)} with a SAFETY comment directly above; "
          f"{len(whole)} whole function bodies; {len(repeated)} SAFETY texts in more than 3 places")
    if listing:
        for m in missing:
            print("  no SAFETY:", m)
        for w in whole:
            print("  whole body:", w)
        for t, ps in repeated.items():
            print(f"  repeated {len(ps)}x: {t[:90]}")
    sys.exit(1 if missing or whole or repeated else 0)


if __name__ == "__main__":
    main()
