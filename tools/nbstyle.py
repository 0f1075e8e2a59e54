"""Developer helper: how the chapters read (issue #36). Formatting is ruff's (`make lint`, pyproject's [tool.ruff]).

python tools/nbstyle.py report [nbs/X.ipynb ...]      # cells, definitions, examples right after, long lines
python tools/nbstyle.py untested nbs/X.ipynb         # public definitions with no example cell right after them
python tools/nbstyle.py untested-all nbs/X.ipynb     # ... and private helpers and patched methods
"""

import ast, glob, json, re, sys
from collections import Counter

MAX = 120


def cells(path):
    "The notebook's code cells' sources."
    return ["".join(c["source"]) for c in json.load(open(path))["cells"] if c["cell_type"] == "code"]


def is_export(src):
    return bool(re.match(r"\s*#\|\s*export", src))


def blank_directives(src):
    "The cell with `#|` directives and magics blanked, so it parses as Python with its line numbers kept."
    return "\n".join("" if l.lstrip().startswith(("#|", "%", "!")) else l for l in src.split("\n"))


def definitions(src):
    "Names of the top-level functions and classes a cell defines."
    try:
        tree = ast.parse(blank_directives(src))
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def untested(path):
    "(name, kind) of each definition whose cell is not followed directly by a non-export code cell."
    out, srcs = [], [(c["cell_type"], "".join(c["source"])) for c in json.load(open(path))["cells"]]
    code = [(i, s) for i, (t, s) in enumerate(srcs) if t == "code"]
    for k, (i, s) in enumerate(code):
        names = definitions(s) if is_export(s) else []
        if not names:
            continue
        kind = "patched" if "@patch" in s else "private" if names[0].startswith("_") else "public"
        nxt = code[k + 1][1] if k + 1 < len(code) else ""
        if is_export(nxt) or not nxt.strip():
            out.append((names[0], kind))
    return out


def report(paths):
    "Print the figures #36 counts, over the given chapters."
    ex = [s for p in paths for s in cells(p) if is_export(s) and definitions(s)]
    print(
        f"export cells with a definition: {len(ex)}, {sum(len(s.splitlines()) for s in ex) / max(len(ex), 1):.1f} lines"
        f" on average, {sum(len(definitions(s)) > 1 for s in ex)} with several definitions"
    )
    tot = Counter(
        ("patched" if "@patch" in s else "private" if definitions(s)[0].startswith("_") else "public") for s in ex
    )
    miss = Counter(k for p in paths for _, k in untested(p))
    for k in ("public", "private", "patched"):
        print(f"{k} definitions with an example or test right after: {tot[k] - miss[k]} of {tot[k]}")
    for where, keep in (("export cells", is_export), ("other code cells", lambda s: not is_export(s))):
        long = [l for p in paths for s in cells(p) if keep(s) for l in s.split("\n") if len(l) > MAX]
        print(f"lines over {MAX} characters in {where}: {len(long)}")


if __name__ == "__main__":
    cmd, *args = sys.argv[1:] or ["report"]
    if cmd not in ("report", "untested", "untested-all"):
        if cmd in ("-h", "--help", "help"):
            print(__doc__)
            sys.exit(0)
        sys.exit(f"nbstyle: no command {cmd!r} (report, untested, untested-all; --help says more)")
    paths = args or sorted(glob.glob("nbs/[0-9]*.ipynb"))
    if cmd in ("untested", "untested-all"):
        for p in paths:
            for name, kind in untested(p):
                if kind == "public" or cmd == "untested-all":
                    print(f"{p}: {name} ({kind})")
    else:
        report(paths)
