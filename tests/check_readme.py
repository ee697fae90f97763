#!/usr/bin/python3
"""Fails when README.md is longer than 250 lines or one of its C++ snippets is not, line for line,
a contiguous part of a program under examples/ (those are built and run as CTest tests, so the
snippets a reader copies compile and run). Usage: check_readme.py <repository root>."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
readme = (root / "README.md").read_text()
examples = {p: p.read_text().splitlines() for p in sorted((root / "examples").glob("*.cpp"))}
errors = []
lines = readme.count("\n")
if lines > 250:
    errors.append(f"README.md has {lines} lines, more than 250")


def excerpt_of(snippet, text):
    n = len(snippet)
    return any(text[i:i + n] == snippet for i in range(len(text) - n + 1))


snippets = re.findall(r"```cpp\n(.*?)```", readme, re.S)
if not snippets:
    errors.append("README.md has no ```cpp snippet")
for snippet in snippets:
    body = snippet.rstrip("\n").splitlines()
    if not any(excerpt_of(body, text) for text in examples.values()):
        errors.append("README.md's snippet starting with '" + body[0].strip() +
                      "' is not an excerpt of any examples/*.cpp")
for e in errors:
    print(e)
sys.exit(1 if errors else 0)
