#!/usr/bin/python3
"""Fails when a doctest TEST_CASE name contains ';'. CTest's test discovery splits names at ';'
(a CMake list separator), so such a test is registered as two halves that match nothing: doctest
then runs no test and CTest reports a pass. Usage: check_test_names.py <tests dir>."""
import pathlib
import re
import sys

CASE = re.compile(r'TEST_CASE(?:_FIXTURE)?\s*\(((?:\s*"(?:[^"\\]|\\.)*")+)', re.S)
bad = []
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.cpp")):
    for m in CASE.finditer(path.read_text()):
        name = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
        if ";" in name:
            bad.append(f"{path}: {name}")
for b in bad:
    print(f"test name contains ';' (CTest would split it and run nothing): {b}")
sys.exit(1 if bad else 0)
