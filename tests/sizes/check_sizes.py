#!/usr/bin/env python3
"""The weight rule, checked: no source file over 500 lines, no function over 80.

Every line of a header is compiled by every includer and read by every newcomer, so the project
keeps files short enough to read in one sitting and functions short enough to see whole
(docs/design.md, "Size"). This walks the C++ and CUDA sources (include/, src/, python/src/,
tests/, bench/, examples/) and the Python sources (python/laptime/, examples/, bench/, scripts/,
tests/sizes/, tests/goals/), and prints every file over the file limit and every function whose
body spans more lines than the function limit, with its line. Files in EXEMPT are skipped.
Exits 1 when there is one, 0 otherwise.

    python3 tests/sizes/check_sizes.py [ROOT]

A C++ function is a brace block opened at namespace or class scope after a parenthesised
parameter list (a lambda inside a function is part of that function); its length runs from the
line of its opening brace to the line of its closing one. Comments, string and character literals
are blanked before braces are counted. A Python function is a `def` (its nested defs included),
from its `def` line to its last line (ast's end_lineno).
"""
import ast
import pathlib
import re
import sys

FILE_LIMIT = 500
FUNCTION_LIMIT = 80
CPP_DIRS = ("include", "src", "python/src", "tests", "bench", "examples")
CPP_SUFFIXES = (".hpp", ".cpp", ".h", ".cu")
PY_DIRS = ("python/laptime", "examples", "bench", "scripts", "tests/sizes", "tests/goals")
# Files the limits do not apply to, each with its reason. Only generated files and fixtures whose
# size is the point belong here: code people read and change keeps the limits.
EXEMPT = {
    # The compile benchmark's fixture: a training program of a real trainer's size, built to time
    # what including laptime adds to a big translation unit. Shrinking it would void the timing.
    "bench/compile/trainer/trainer.cu": "fixture of the compile benchmark, trainer-sized",
}

_LITERAL = re.compile(
    r'//[^\n]*|/\*.*?\*/|R"([^(\s]*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
    re.S,
)
_SCOPE_WORD = re.compile(r"\b(namespace|class|struct|union|enum)\b")
# A constructor's member initialiser in braces (`S() : x_{1} {`): the brace follows a name, after
# the parameter list's ')' and a ':'. It is neither a body nor the end of the header.
_MEMBER_INIT = re.compile(r"\)[^;{}]*?:[^:][^;{}]*[\w>]\s*$", re.S)


def blank_literals(text):
    """The text with comments and literals replaced by spaces, newlines kept (so lines count)."""
    return _LITERAL.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _opens_function(header):
    """Whether a '{' that follows HEADER (the text since the last ';', '{' or '}') at namespace
    or class scope opens a function body, rather than a type, a namespace or an initialiser."""
    head = header.strip()
    if head.startswith("#"):
        head = head.split("\n")[-1]
    paren = head.find("(")
    scope = _SCOPE_WORD.search(head)
    if scope and (paren < 0 or scope.start() < paren):
        return False
    if paren < 0:
        return False
    eq = head.find("=")
    # `T x = f(...) {` does not occur; `T x = {` is an initialiser: '=' before any '('.
    return not (0 <= eq < paren)


def cpp_functions(text):
    """(first line, last line) of each function body in C++ TEXT, outermost functions only."""
    code = blank_literals(text)
    stack = []  # per open brace: "body" (a function's), "init" (a member initialiser) or ""
    header_start = 0
    found = []
    line = 1
    for i, ch in enumerate(code):
        if ch == "\n":
            line += 1
        elif ch == "{":
            header = code[header_start:i]
            kind = ""
            if not any(k == "body" for k, _ in stack):
                if _MEMBER_INIT.search(header):
                    kind = "init"
                elif _opens_function(header):
                    kind = "body"
            stack.append((kind, line))
            if kind != "init":
                header_start = i + 1
        elif ch == "}":
            kind, first = stack.pop() if stack else ("", line)
            if kind == "body":
                found.append((first, line))
            if kind != "init":
                header_start = i + 1
        elif ch == ";":
            header_start = i + 1
    return found


def py_functions(text):
    """(first line, last line) of each outermost def in Python TEXT (methods included)."""
    tree = ast.parse(text)
    found = []

    def visit(node, inside):
        for child in ast.iter_child_nodes(node):
            is_def = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_def and not inside:
                found.append((child.lineno, child.end_lineno))
            visit(child, inside or is_def)

    visit(tree, False)
    return found


def sources(root):
    """(path, the function finder for its language) of every checked file under ROOT."""
    for top in CPP_DIRS:
        for path in sorted((root / top).rglob("*")):
            if path.suffix in CPP_SUFFIXES and path.is_file():
                yield path, cpp_functions
    for top in PY_DIRS:
        for path in sorted((root / top).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path, py_functions


def problems(root):
    """A line for each file over the file limit and each function over the function limit."""
    for rel in sorted(EXEMPT):
        if not (root / rel).is_file():
            yield f"{rel}: exempt from the limits but missing (drop it from EXEMPT)"
    for path, functions in sources(root):
        rel = path.relative_to(root)
        if rel.as_posix() in EXEMPT:
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        if lines > FILE_LIMIT:
            yield f"{rel}: {lines} lines (a file holds at most {FILE_LIMIT})"
        for first, last in functions(text):
            length = last - first + 1
            if length > FUNCTION_LIMIT:
                yield (f"{rel}:{first}: a function of {length} lines "
                       f"(at most {FUNCTION_LIMIT})")


def main(argv):
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).parents[2])
    found = list(problems(root.resolve()))
    for line in found:
        print(line)
    print(f"sizes: {len(found)} over the limits (files {FILE_LIMIT} lines, "
          f"functions {FUNCTION_LIMIT})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
