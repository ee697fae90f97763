#!/usr/bin/python3
"""Fails when an install holds a header that no public header includes. Reads the install
manifest CMake wrote (install_manifest.txt: one installed file a line); the public headers are
those outside a detail/ folder (purgatory/*.hpp, purgatory/timer/*.hpp), and every installed
detail/ header must be reached from one of them through #include "purgatory/...". A header only
the library's sources or the tests use belongs beside the sources, not in the install.
Usage: check_installed_headers.py <install_manifest.txt> <install prefix>."""
import pathlib
import re
import sys

manifest, prefix = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
include = prefix / "include"
headers = {}
for line in manifest.read_text().splitlines():
    path = pathlib.Path(line.strip())
    if path.suffix == ".hpp" and include in path.parents:
        headers[path.relative_to(include).as_posix()] = path
if not headers:
    sys.exit(f"{manifest} lists no header under {include}")

INCLUDE = re.compile(r'^\s*#\s*include\s+"(purgatory/[^"]+)"', re.M)
public = [h for h in headers if "/detail/" not in h]
reached, todo = set(public), list(public)
while todo:
    for name in INCLUDE.findall(headers[todo.pop()].read_text()):
        if name not in headers:
            print(f"{name}, included by an installed header, is not installed")
            reached.add(name)  # reported once
        elif name not in reached:
            reached.add(name)
            todo.append(name)
unreached = sorted(set(headers) - reached)
for name in unreached:
    print(f"installed but included by no public header: include/{name}")
missing = sorted(n for n in reached if n not in headers)
sys.exit(1 if unreached or missing else 0)
