#!/usr/bin/python3
"""Fails when a shared library exports a dynamic symbol outside namespace purgatory (the ABI surface
of a shared build is the public API: hidden visibility, export macros, cmake/purgatory_exports.map),
or when it lacks one a user needs (then the check would be reading the wrong file).
Usage: check_exported_symbols.py <library.so> <symbol that must be exported>... , where each symbol
is a demangled name's prefix, such as 'purgatory::SystemTimer::SystemTimer('."""
import re
import subprocess
import sys

library, required = sys.argv[1], sys.argv[2:]
out = subprocess.run(["nm", "-D", "--defined-only", "-C", library], capture_output=True, text=True,
                     check=True).stdout
names = [line.split(" ", 2)[2] for line in out.splitlines() if line.count(" ") >= 2]
# Ours: purgatory::..., and the compiler's companions of our classes (typeinfo, vtable, thunks).
OURS = re.compile(r"^((typeinfo( name)?|vtable|VTT|construction vtable|guard variable) for |"
                  r"(non-)?virtual thunk to )?purgatory::")
foreign = [n for n in names if not OURS.match(n)]
missing = [r for r in required if not any(n.startswith(r) for n in names)]
for n in foreign:
    print(f"{library}: exports a symbol outside namespace purgatory: {n}")
for r in missing:
    print(f"{library}: does not export {r}...")
print(f"{library}: {len(names)} dynamic symbols, {len(foreign)} foreign, {len(missing)} missing")
sys.exit(1 if foreign or missing or not names else 0)
