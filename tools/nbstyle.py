"""Developer helper: how the chapters read (issue #36), and a line wrapper that changes only whitespace.

    python tools/nbstyle.py report [nbs/X.ipynb ...]      # cells, definitions, examples right after, long lines
    python tools/nbstyle.py untested nbs/X.ipynb         # public definitions with no example cell right after them
    python tools/nbstyle.py untested-all nbs/X.ipynb     # ... and private helpers and patched methods
    python tools/nbstyle.py wrap nbs/*.ipynb             # wrap code lines over 120 characters

`wrap` breaks a long line after a comma, or before a comprehension's `for`/`if`, inside brackets, and aligns the
continuation under the opening bracket (fastcore's style); where none helps, it splits a string literal inside brackets
at a space into two adjacent literals (one constant to Python). Only whitespace between tokens changes, and each cell's
syntax tree is checked unchanged before a break is kept. A line long for its trailing comment gets the comment on
lines of its own above it. fastcore's docments reads a parameter's or a class-level field's comment there too, so
documenting comments move as well, except where above would document something else: the `def` line itself (its first
parameter's comment), a line holding the return annotation, the lines of a header or a field after the one it starts
on, and a line below a commented line that starts no parameter or field (docments would join the two comments);
papermill's `parameters` cell keeps its comments (its help) on their lines. The comment on the last line of a
statement over several lines stays too: it may speak of the whole statement (above its first line) or of the line's
own item (above that line), which only a reader can tell. It leaves a line alone where nothing helps: long
strings and docstrings, those documenting comments, and breaks that would leave a stub of a line or a continuation far
to the right. A comment that code reads in some other way is not recognised (05_protocol's `decision_point` names its
fields in per-line comments that its test reads; `wrap` moves them): run the chapters' tests after `wrap`.
"""
import ast, glob, io, json, re, sys, tokenize
from collections import Counter

MAX = 120

def cells(path):
    "The notebook's code cells' sources."
    return [''.join(c['source']) for c in json.load(open(path))['cells'] if c['cell_type'] == 'code']

def is_export(src): return bool(re.match(r'\s*#\|\s*export', src))

def blank_directives(src):
    "The cell with `#|` directives and magics blanked, so it parses as Python with its line numbers kept."
    return '\n'.join('' if l.lstrip().startswith(('#|', '%', '!')) else l for l in src.split('\n'))

def definitions(src):
    "Names of the top-level functions and classes a cell defines."
    try: tree = ast.parse(blank_directives(src))
    except SyntaxError: return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]

def untested(path):
    "(name, kind) of each definition whose cell is not followed directly by a non-export code cell."
    out, srcs = [], [(c['cell_type'], ''.join(c['source'])) for c in json.load(open(path))['cells']]
    code = [(i, s) for i, (t, s) in enumerate(srcs) if t == 'code']
    for k, (i, s) in enumerate(code):
        names = definitions(s) if is_export(s) else []
        if not names: continue
        kind = 'patched' if '@patch' in s else 'private' if names[0].startswith('_') else 'public'
        nxt = code[k + 1][1] if k + 1 < len(code) else ''
        if is_export(nxt) or not nxt.strip(): out.append((names[0], kind))
    return out

def report(paths):
    "Print the figures #36 counts, over the given chapters."
    ex = [s for p in paths for s in cells(p) if is_export(s) and definitions(s)]
    print(f"export cells with a definition: {len(ex)}, {sum(len(s.splitlines()) for s in ex) / max(len(ex), 1):.1f} lines"
          f" on average, {sum(len(definitions(s)) > 1 for s in ex)} with several definitions")
    tot = Counter(('patched' if '@patch' in s else 'private' if definitions(s)[0].startswith('_') else 'public')
                  for s in ex)
    miss = Counter(k for p in paths for _, k in untested(p))
    for k in ('public', 'private', 'patched'):
        print(f"{k} definitions with an example or test right after: {tot[k] - miss[k]} of {tot[k]}")
    for where, keep in (('export cells', is_export), ('other code cells', lambda s: not is_export(s))):
        long = [l for p in paths for s in cells(p) if keep(s) for l in s.split('\n') if len(l) > MAX]
        print(f"lines over {MAX} characters in {where}: {len(long)}")

def _cont(lines, ln, opened):
    "Column a continuation of line `ln` starts at, inside the bracket opened at `opened`."
    oline, ocol = opened
    if oline == ln: return ocol + 1
    after = lines[oline - 1][ocol + 1:]
    if after.strip() and not after.strip().startswith('#'): return ocol + 1 + len(after) - len(after.lstrip())
    return len(lines[ln - 1]) - len(lines[ln - 1].lstrip())  # a hanging indent: keep this line's

def _short_brackets(toks, span=40):
    "Where the brackets open whose whole content is on one line and shorter than `span`: never broken inside."
    opened, short = [], set()
    for t in toks:
        if t.type == tokenize.OP and t.string in '([{': opened.append(t.start)
        elif t.type == tokenize.OP and t.string in ')]}':
            o = opened.pop()
            if o[0] == t.start[0] and t.start[1] - o[1] < span: short.add(o)
    return short

def breaks(src, ln):
    "Where line `ln` may break: (column, continuation column, bracket depth); and whether it carries a comment."
    toks = list(tokenize.generate_tokens(io.StringIO(blank_directives(src)).readline))
    lines, stack, out, comment, target = src.split('\n'), [], [], False, {}
    short = _short_brackets(toks)
    for t in toks:
        d, here = len(stack), t.start[0] == ln
        if t.type == tokenize.NAME and t.string in ('for', 'lambda'): target[d] = t.string  # `for a, b in`, `lambda a, b:`
        elif t.type == tokenize.NAME and t.string == 'in' and target.get(d) == 'for': target.pop(d)
        elif t.type == tokenize.OP and t.string == ':' and target.get(d) == 'lambda': target.pop(d)
        if t.type == tokenize.OP and t.string in '([{': stack.append(t.start)
        elif t.type == tokenize.OP and t.string in ')]}':
            target.pop(d, None)
            stack.pop()
        elif here and stack and t.type == tokenize.OP and t.string == ',' and d not in target and stack[-1] not in short:
            out.append((t.end[1], _cont(lines, ln, stack[-1]), d))
        elif (here and stack and t.type == tokenize.NAME and t.string in ('for', 'if') and stack[-1] not in short
              and lines[ln - 1][:t.start[1]].strip()):
            out.append((t.start[1], _cont(lines, ln, stack[-1]), d))
        elif here and t.type == tokenize.COMMENT: comment = True
    return out, comment

def break_line(src, ln, header_lines):
    "The cell with line `ln` broken once, or None where no break helps."
    lines = src.split('\n')
    line = lines[ln - 1]
    cands, comment = breaks(src, ln)
    if comment and (ln in header_lines or len(line.split('#')[0].rstrip()) <= MAX): return None
    fits = [c for c in cands if c[0] <= MAX and c[1] <= 88 and len(line[c[0]:].split('#')[0].strip()) >= 16]
    if not fits: return None
    outer = min(c[2] for c in fits)
    col, cont, _ = max((c for c in fits if c[2] == outer), key=lambda c: c[0])
    if col < MAX // 3: col, cont, _ = max(fits, key=lambda c: c[0])  # an outer break too early to help
    rest = line[col:].lstrip()
    if cont + len(rest) >= len(line): return None
    return '\n'.join(lines[:ln - 1] + [line[:col].rstrip(), ' ' * cont + rest] + lines[ln:])

def split_string(src, ln):
    "The cell with a string literal crossing the limit on line `ln` split at a space into two (one constant), or None."
    lines, stack = src.split('\n'), []
    line = lines[ln - 1]
    for t in tokenize.generate_tokens(io.StringIO(blank_directives(src)).readline):
        if t.type == tokenize.OP and t.string in '([{': stack.append(t.start)
        elif t.type == tokenize.OP and t.string in ')]}': stack.pop()
        elif t.type == tokenize.STRING and t.start[0] == ln == t.end[0] and stack and t.start[1] < MAX - 24 < MAX < t.end[1]:
            m = re.match(r'([rRfFbBuU]{0,2})(["\'])', t.string)
            pre, q = m.group(1), m.group(2)
            if t.string[len(pre):len(pre) + 3] == q * 3 or 'b' in pre.lower(): return None
            depth, cut = 0, None
            for i, ch in enumerate(t.string):  # the last space outside `{...}` that keeps the first piece within the limit
                depth += (ch == '{') - (ch == '}') if 'f' in pre.lower() else 0
                col = t.start[1] + i
                if ch == ' ' and depth == 0 and col + 2 <= MAX and i > len(pre) + 8 and t.string[i - 1] != '\\': cut = i
            if cut is None or len(t.string) - cut < 20: return None
            first, second = t.string[:cut + 1] + q, pre + q + t.string[cut + 1:]
            if 'f' in pre.lower() and '{' not in second:  # a piece with no placeholder is a plain string
                second = second[:len(pre)].replace('f', '').replace('F', '') + second[len(pre):]
            return '\n'.join(lines[:ln - 1] + [line[:t.start[1]] + first, ' ' * t.start[1] + second + line[t.end[1]:]]
                             + lines[ln:])
    return None

def def_headers(src):
    "Line numbers of every def's header."
    tree = ast.parse(blank_directives(src))
    return {l for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            for l in range(n.lineno, n.body[0].lineno)}

def comment_homes(src):
    "(pinned, liftable, starts): comments that must stay put; those docments also reads above; parameters' and fields' lines."
    tree, pinned, doc, starts = ast.parse(blank_directives(src)), set(), set(), set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args        # docments reads a parameter's comment above its line (not `*args`/`**kw`, not the def's)
            own = {x.lineno for x in a.posonlyargs + a.args + a.kwonlyargs}
            starts |= own
            own -= {n.lineno} | ({n.returns.lineno} if n.returns else set())   # the def's, the return's comment
            pinned |= set(range(n.lineno, n.body[0].lineno)) - own
            doc |= own
        elif isinstance(n, ast.ClassDef):                                      # ... and above a field's first line
            fields = [f for f in n.body if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
            pinned |= {l for f in fields for l in range(f.lineno + 1, f.end_lineno + 1)}
            starts |= {f.lineno for f in fields}
            doc |= {f.lineno for f in fields}
    return pinned, doc - pinned, starts

def lift_comment(src, ln):
    "The cell with the trailing comment that makes line `ln` long on lines of its own above it, or None."
    lines = src.split('\n')
    line = lines[ln - 1]
    pinned, doc, starts = comment_homes(src)
    comments = {t.start[0]: t for t in tokenize.generate_tokens(io.StringIO(blank_directives(src)).readline)
                if t.type == tokenize.COMMENT}
    # docments reads upward through commented lines up to a parameter's or field's: a comment there would join
    if ln in pinned or (ln in doc and ln - 1 in comments and ln - 1 not in starts): return None
    # the last line of a statement over several lines: its comment may speak of the whole statement, or of the
    # line's own item; which, only a reader can tell, so the line is left for one
    if any(n.lineno < ln == n.end_lineno for n in ast.walk(ast.parse(blank_directives(src)))
           if isinstance(n, ast.stmt) and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))):
        return None
    com = [comments[ln]] if ln in comments else []
    if not com or not line[:com[0].start[1]].strip() or com[0].start[1] > MAX: return None
    code, words = line[:com[0].start[1]].rstrip(), com[0].string.lstrip('#').split()
    if not words: return None
    pad, above = ' ' * (len(line) - len(line.lstrip())), []
    for w in words:                                    # the comment's words, as many to a line as fit
        if above and len(pad) + len(above[-1]) + 1 + len(w) <= MAX: above[-1] += ' ' + w
        else: above.append(f"# {w}")
    return '\n'.join(lines[:ln - 1] + [pad + a for a in above] + [code] + lines[ln:])

def wrap_cell(src):
    "The cell with its long lines broken where a break helps; its syntax tree unchanged."
    tree = lambda s: ast.dump(ast.parse(blank_directives(s)))
    try: before = tree(src)
    except SyntaxError: return src
    left = set()
    while True:
        lines = src.split('\n')
        todo = [i + 1 for i, l in enumerate(lines) if len(l) > MAX and (i + 1, l) not in left]
        if not todo: return src
        try: cand = (break_line(src, todo[0], def_headers(src)) or split_string(src, todo[0])
                     or lift_comment(src, todo[0]))
        except (tokenize.TokenError, SyntaxError): cand = None
        try: ok = cand is not None and tree(cand) == before
        except SyntaxError: ok = False
        if ok: src = cand
        else: left.add((todo[0], lines[todo[0] - 1]))

def wrap(paths):
    "Wrap every notebook's long code lines in place."
    n0 = n1 = 0
    for p in paths:
        nb = json.load(open(p))
        for c in nb['cells']:
            src = ''.join(c['source'])
            if c['cell_type'] != 'code' or not any(len(l) > MAX for l in src.split('\n')): continue
            if 'parameters' in c.get('metadata', {}).get('tags', []): continue   # papermill reads its comments as help
            new = wrap_cell(src)
            n0, n1 = n0 + sum(len(l) > MAX for l in src.split('\n')), n1 + sum(len(l) > MAX for l in new.split('\n'))
            c['source'] = new.splitlines(keepends=True)
        with open(p, 'w') as f:
            json.dump(nb, f, indent=1, ensure_ascii=False)
            f.write('\n')
    print(f"lines over {MAX} characters: {n0} -> {n1}")

if __name__ == '__main__':
    cmd, *args = sys.argv[1:] or ['report']
    if cmd not in ('report', 'wrap', 'untested', 'untested-all'):
        if cmd in ('-h', '--help', 'help'): print(__doc__); sys.exit(0)
        sys.exit(f"nbstyle: no command {cmd!r} (report, untested, untested-all, wrap; --help says more)")
    paths = args or sorted(glob.glob('nbs/[0-9]*.ipynb'))
    if cmd in ('untested', 'untested-all'):
        for p in paths:
            for name, kind in untested(p):
                if kind == 'public' or cmd == 'untested-all': print(f"{p}: {name} ({kind})")
    else: {'report': report, 'wrap': wrap}[cmd](paths)
