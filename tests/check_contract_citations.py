#!/usr/bin/python3
"""Fails when docs/contracts.md cites a test or race point that does not exist. Every code span
of 25 characters or more in a table row must be, piece by piece (pieces separated by '...'), part
of a doctest TEST_CASE name under tests/ or a race point name in the library's sources; a renamed
test would otherwise leave its promise pointing at nothing.
Usage: check_contract_citations.py <repository root>."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
CASE = re.compile(r'TEST_CASE\s*\(((?:\s*"(?:[^"\\]|\\.)*")+)', re.S)
names = []
for path in sorted((root / "tests").rglob("*.cpp")):
    for m in CASE.finditer(path.read_text()):
        name = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
        names.append(name.replace('\\"', '"').replace("`", ""))
sources = "".join(p.read_text() for d in ("timer", "purgatory")
                  for p in sorted((root / d).rglob("*.[ch]pp")))

missing = []
for line in (root / "docs" / "contracts.md").read_text().splitlines():
    if not line.startswith("|"):
        continue
    for span in re.findall(r"`([^`]+)`", line):
        if len(span) < 25:
            continue
        for piece in (p.strip(" ,;") for p in span.split("...")):
            if len(piece) > 8 and not any(piece in n for n in names) and piece not in sources:
                missing.append(piece)
for m in missing:
    print(f"docs/contracts.md cites a test or race point that does not exist: {m}")
sys.exit(1 if missing else 0)
