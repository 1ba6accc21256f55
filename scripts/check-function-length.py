#!/usr/bin/env python3
"""Lists C++ functions longer than a limit.

Usage: check-function-length.py [--max=150] [--allow=FILE] PATH...

PATHs are files or folders (searched for .cpp, .h and .inc). A function is
a brace block opened after a parameter list at namespace or class scope; its
length counts the lines from its signature's last line to its closing
brace, lambdas and local classes included. The scanner strips comments,
string and character literals first, so braces inside them do not count.

--allow names a file of `path:function` lines that may exceed the limit
(e.g. a generated table); each line needs a reason after a '#'.

Exit status: 0 when every function is within the limit, 1 otherwise (one
line per offender: path:line: function is N lines), 2 on a usage error.
"""
import os
import re
import sys

CONTROL = {"if", "for", "while", "switch", "catch", "do", "else", "return",
           "sizeof", "decltype", "alignof", "noexcept", "requires"}


def strip(text):
    """Replaces comments and literals by spaces, keeping line breaks."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum() and text[i - 1] not in "uUL8":
                out.append(c)  # digit separator: 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_name(head):
    """The name before the parameter list of a function head, or None."""
    head = head.strip()
    if not head:
        return None
    # Drop a constructor's member-initializer list: `X::X(a) : b(c), d{e}`.
    depth = 0
    cut = len(head)
    for k in range(len(head) - 1, -1, -1):
        ch = head[k]
        if ch in ")]>":
            depth += 1
        elif ch in "([<":
            depth -= 1
        elif ch == ":" and depth == 0 and (k == 0 or head[k - 1] != ":") and (k + 1 >= len(head) or head[k + 1] != ":"):
            cut = k
    head = head[:cut].rstrip()
    # Trailing qualifiers and return types after the parameter list.
    head = re.sub(r"(\s*(const|noexcept|override|final|mutable|volatile|&&|&|->\s*[\w:<>,\s*&]+))*$", "", head)
    if not head.endswith(")"):
        return None
    depth = 0
    for k in range(len(head) - 1, -1, -1):
        if head[k] == ")":
            depth += 1
        elif head[k] == "(":
            depth -= 1
            if depth == 0:
                m = re.search(r"([~\w:]+(?:<[^()]*>)?|operator\s*[^\s(]+)\s*$", head[:k])
                if not m:
                    return None
                name = m.group(1)
                if name.split("::")[-1] in CONTROL or name.endswith("]"):
                    return None
                return name
    return None


def scan(path, text):
    """Yields (line, name, length) for each function in `text`."""
    code = strip(text)
    # Stack of scopes: ("ns"|"class"|"func"|"block", start line, name).
    stack = []
    head_start = 0
    line = 1
    for i, ch in enumerate(code):
        if ch == "\n":
            line += 1
        elif ch == "{":
            inside_func = any(kind == "func" for kind, _, _ in stack)
            kind, name = "block", None
            if not inside_func:
                head = code[head_start:i]
                if re.search(r"\b(namespace|extern\s*\"?)\b", head) and "(" not in head:
                    kind = "ns"
                elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", head):
                    kind = "class"
                else:
                    name = function_name(head)
                    if name and not re.search(r"=\s*$", head.strip()[:-1] if head.strip().endswith(")") else head):
                        kind = "func"
            stack.append((kind, line, name))
            head_start = i + 1
        elif ch == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "func":
                    yield start, name, line - start + 1
            head_start = i + 1
        elif ch == ";":
            head_start = i + 1


def main(argv):
    limit = 150
    allow = {}
    paths = []
    for a in argv:
        if a.startswith("--max="):
            limit = int(a.split("=", 1)[1])
        elif a.startswith("--allow="):
            for raw in open(a.split("=", 1)[1], encoding="utf-8"):
                entry, _, reason = raw.partition("#")
                entry = entry.strip()
                if not entry:
                    continue
                if not reason.strip():
                    print(f"{a}: '{entry}' has no reason", file=sys.stderr)
                    return 2
                allow[entry] = reason.strip()
        elif a.startswith("-"):
            print(f"unknown option {a}", file=sys.stderr)
            return 2
        else:
            paths.append(a)
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, f) for f in names if f.endswith((".cpp", ".h", ".inc"))]
        elif os.path.exists(p):
            files.append(p)
        else:
            print(f"{p}: no such file or folder", file=sys.stderr)
            return 2
    bad = 0
    for f in sorted(files):
        with open(f, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        rel = os.path.relpath(f)
        for start, name, length in scan(f, text):
            if length > limit and f"{rel}:{name}" not in allow:
                print(f"{rel}:{start}: {name} is {length} lines (limit {limit})")
                bad += 1
    if bad:
        print(f"{bad} function(s) longer than {limit} lines")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
