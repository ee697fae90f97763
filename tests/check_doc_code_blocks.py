#!/usr/bin/python3
"""Fails when README.md is longer than 250 lines, or when a C++ block (```cpp or ```c++) of
README.md or docs/*.md is not, line for line (leading and trailing whitespace aside), a contiguous
part of a program CI compiles: examples/*.cpp (built and run as CTest tests), or a tests/docs/*.cpp
that tests/docs/CMakeLists.txt builds (for a doc's block that is no example's excerpt). So the
code a reader copies compiles, and a removed API cannot linger in a doc.
Usage: check_doc_code_blocks.py <repository root>."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
compiled = sorted((root / "examples").glob("*.cpp"))
docs_build = root / "tests" / "docs" / "CMakeLists.txt"
if docs_build.is_file() and re.search(r"add_subdirectory\(\s*docs\s*\)",
                                      (root / "tests" / "CMakeLists.txt").read_text()):
    listed = docs_build.read_text()
    compiled += [p for p in sorted((root / "tests" / "docs").glob("*.cpp")) if p.name in listed]
sources = {p: [line.strip() for line in p.read_text().splitlines()] for p in compiled}
errors = []
readme = (root / "README.md").read_text()
lines = readme.count("\n")
if lines > 250:
    errors.append(f"README.md has {lines} lines, more than 250")


def excerpt_of(block, text):
    n = len(block)
    return any(text[i:i + n] == block for i in range(len(text) - n + 1))


docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
blocks = {doc: re.findall(r"^[ \t]*```(?:cpp|c\+\+)[ \t]*\n(.*?)^[ \t]*```", doc.read_text(),
                          re.S | re.M) for doc in docs}
if not blocks[root / "README.md"]:
    errors.append("README.md has no ```cpp block")
for doc, found in blocks.items():
    for block in found:
        body = [line.strip() for line in block.strip("\n").splitlines()] or [""]
        if not any(excerpt_of(body, text) for text in sources.values()):
            errors.append(f"{doc.relative_to(root)}: the C++ block starting with '{body[0]}' is not "
                          "an excerpt of any examples/*.cpp or built tests/docs/*.cpp")
for e in errors:
    print(e)
sys.exit(1 if errors else 0)
