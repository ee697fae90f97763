#!/usr/bin/python3
"""Fails when docs/contracts.md quotes a promise that its header does not say word for word.
Each text in "double quotes" in a table's promise column must appear in the file its section is
named after (`### system_timer.hpp` -> the public header of that name; `### timer/src/x.hpp
(internal)` -> that file; `## version.hpp` -> cmake/version.hpp.in; `## README.md` -> README.md),
after whitespace, markdown's backquotes and the `///` / `//` comment markers at the start of each
line are folded away, so a quote may cross the header's line breaks.
`...` inside a quote marks words left out: each piece between them must appear, in order.
A paraphrase carries no quotes. Usage: check_contract_quotes.py <repository root>."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
# Keyed as included: "timer/asio.hpp" and "asio.hpp" (purgatory's) are two headers.
headers = {p.relative_to(root / d / "purgatory").as_posix(): p
           for d in ("timer/include", "purgatory/include")
           for p in sorted((root / d).rglob("*.hpp")) if "detail" not in p.parts}
headers["version.hpp"] = root / "cmake" / "version.hpp.in"
headers["README.md"] = root / "README.md"


def normalised(text):
    """One line: comment markers, markdown code quotes and runs of whitespace folded away."""
    lines = (re.sub(r"^\s*//+ ?", "", line) for line in text.splitlines())
    return re.sub(r"\s+", " ", " ".join(lines).replace("`", "")).strip()


def cells(row):
    return [c.strip() for c in row.strip().strip("|").split("|")]


texts = {}
errors = []
component = ""  # "timer/" under "## timer/", else ""
section = None
promise_column = None
for number, line in enumerate((root / "docs" / "contracts.md").read_text().splitlines(), 1):
    if line.startswith("## "):
        component = "timer/" if line.strip() == "## timer/" else ""
    heading = re.match(r"#{2,3} (\S+\.(?:hpp|md))(?: \(internal\))?\s*$", line)
    if heading:
        section = heading.group(1)
        if "/" in section and (root / section).is_file():  # an internal header, by its path
            headers.setdefault(section, root / section)
        elif section.endswith(".hpp") and line.startswith("### "):
            section = component + section
        if section not in headers:
            errors.append(f"docs/contracts.md:{number}: section {section} names no public header")
            section = None
        continue
    if line.startswith("#"):
        section = None
        continue
    if not line.startswith("|"):
        promise_column = None
        continue
    row = cells(line)
    if promise_column is None:  # a table's header row
        promise_column = next((i for i, c in enumerate(row) if c.startswith("promise")), -1)
        continue
    if promise_column < 0 or set(line) <= set("|-: "):
        continue
    if section is None:
        if '"' in row[promise_column]:
            errors.append(f"docs/contracts.md:{number}: a quote outside a header's section")
        continue
    if section not in texts:
        texts[section] = normalised(headers[section].read_text())
    text = texts[section]
    for quote in re.findall(r'"([^"]+)"', row[promise_column]):
        at = 0
        for piece in (p.strip() for p in normalised(quote).split("...")):
            if not piece:
                continue
            found = text.find(piece, at)
            if found < 0:
                errors.append(f'docs/contracts.md:{number}: "{piece}" is not in {section}')
                break
            at = found + len(piece)
for e in errors:
    print(e)
sys.exit(1 if errors else 0)
