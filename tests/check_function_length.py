#!/usr/bin/python3
"""Fails when a C++ function is longer than a limit (default 80 lines).

A function's length runs from the first line of its signature to its closing brace; lambdas and
local classes inside it count toward it. A heuristic over the text, not a parser: comments,
string and character literals (raw strings too) are blanked first, then braces are matched, and a
brace opens a function when what precedes it at namespace or class scope ends in a parameter list
(possibly followed by qualifiers, a trailing return type or a constructor's initializer list).

    check_function_length.py [--max 80] [--top N] PATH...   (files, or folders searched for
                                                               .cpp, .hpp, .h and .cc files)
"""
import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".cc")


def blank(s):
    """`s` with every character but newlines made a space."""
    return re.sub(r"[^\n]", " ", s)


def blank_literals(text):
    """`text` with comments, string and char literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith('R"', i) and not (i > 0 and re.match(r"\w", text[i - 1])):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i + m.end())
                end = n if end < 0 else end + len(m.group(1)) + 2
                out.append('""' + blank(text[i + 2:end]))
                i = end
                continue
            out.append(c)
            i += 1
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + blank(text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


SCOPE_HEAD = re.compile(
    r"^(template\s*<.*>\s*)?(inline\s+)?(namespace\b|extern\s+\"\"|"
    r"(class|struct|union|enum(\s+class)?)\b[^()]*$)", re.S)
FUNCTION_TAIL = re.compile(
    r"\)\s*(const|noexcept(\s*\([^()]*\))?|override|final|mutable|volatile|&&?|\s)*"
    r"(->[^{;]*)?(:.*)?$", re.S)


def functions(text):
    """(name, first line, last line) of every function defined at namespace or class scope."""
    code = blank_literals(text)
    # Preprocessor lines (with their continuations) belong to no declaration.
    code = re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: blank(m.group(0)), code)
    found = []
    scopes = []  # "scope" (namespace, class, the file) or "function" or "other", per open brace
    head_start = 0  # where the text that the next brace belongs to begins
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        at_scope = not scopes or scopes[-1] == "scope"
        if c in ";}":
            if c == "}" and scopes:
                kind = scopes.pop()
                if kind[0] == "function":
                    found.append((kind[1], kind[2], code.count("\n", 0, i) + 1))
            head_start = i + 1
        elif c == "{":
            if not at_scope:
                scopes.append("other")
            else:
                head = code[head_start:i].strip()
                before = code[:i].rstrip()
                init_list = FUNCTION_TAIL.search(head) and re.search(r"\)\s*:", head)
                if init_list and before and (before[-1].isalnum() or before[-1] in "_>"):
                    # A member's brace initializer in a constructor's initializer list: skip it.
                    depth, i = 1, i + 1
                    while i < n and depth:
                        depth += {"{": 1, "}": -1}.get(code[i], 0)
                        i += 1
                    continue
                if SCOPE_HEAD.match(head):
                    scopes.append("scope")
                elif FUNCTION_TAIL.search(head) and "(" in head and not head.startswith("="):
                    raw_head = code[head_start:i]
                    text_start = head_start + len(raw_head) - len(raw_head.lstrip())
                    first = code.count("\n", 0, text_start) + 1
                    name = re.search(r"([~\w:<>]+)\s*\(", head)
                    scopes.append(("function", name.group(1) if name else "?", first))
                else:
                    scopes.append("other")
            head_start = i + 1
        i += 1
    return found


def sources(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                for f in sorted(files):
                    if f.endswith(SOURCE_SUFFIXES):
                        yield os.path.join(root, f)
        else:
            yield p


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=80, help="longest function allowed, in lines")
    parser.add_argument("--top", type=int, default=0, help="also print the N longest functions")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    all_functions = []
    for path in sources(args.paths):
        with open(path, encoding="utf-8") as f:
            for name, first, last in functions(f.read()):
                all_functions.append((last - first + 1, path, first, name))
    all_functions.sort(key=lambda f: (-f[0], f[1], f[2]))
    for length, path, first, name in all_functions[:args.top]:
        print(f"{length:4d}  {path}:{first}  {name}")
    too_long = [f for f in all_functions if f[0] > args.max]
    for length, path, first, name in too_long:
        print(f"{path}:{first}: {name} is {length} lines, more than {args.max}", file=sys.stderr)
    print(f"{len(all_functions)} functions, {len(too_long)} longer than {args.max} lines")
    return 1 if too_long else 0


if __name__ == "__main__":
    sys.exit(main())
