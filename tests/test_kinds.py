"""Each kind of game owns its rules (#52): no module outside `fairneg.engine.protocol`, where the kinds are declared, tests
which kind it runs or reads a kind's declaration to decide what to do. The package is read as syntax trees: a branch
on a kind would be a comparison of a game's `protocol` (or a kind's name) with a kind's name, a read of a declaration
field (`opening`, `deadline`, `vote`, ... or the old flags `responds`, `own_issue`, ...) off a kind, or the registry
walked by hand. Modules dispatch on a kind's methods instead, or on the legal actions of a decision point."""

import ast
from dataclasses import fields
from pathlib import Path

import fairneg
from fairneg.engine.protocol import KINDS, ProtocolKind

PACKAGE = Path(fairneg.__file__).parent
HOME = {"engine/protocol.py", "_modidx.py"}  # the kinds' own module; nbdev's index
FIELDS = {f.name for f in fields(ProtocolKind)} - {"name"}
OLD_FLAGS = {"responds", "simultaneous", "own_issue", "complement", "signs"}
KIND_CALLS = {"protocol_kind", "kind_of", "condition_kind"}


def _is_kind_call(node) -> bool:
    f = node.func if isinstance(node, ast.Call) else None
    return isinstance(f, (ast.Name, ast.Attribute)) and getattr(f, "id", getattr(f, "attr", None)) in KIND_CALLS


def _mentions_kind(node) -> bool:
    "An expression about a game's kind: a `protocol` or `kind` name or attribute, or a kind lookup."
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in ("protocol", "kind") or _is_kind_call(n):
            return True
        if isinstance(n, ast.Name) and n.id in ("protocol", "kind"):
            return True
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value == "protocol":
            return True
    return False


def kind_branches(source: str, names=None) -> list:
    "`(line, why)` for every place a module's source tests a kind or reads its declaration."
    names = set(KINDS) if names is None else set(names)
    tree, out = ast.parse(source), []
    kind_vars = {  # names bound to a kind lookup anywhere in the module (`k = protocol_kind(...)`)
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and _is_kind_call(n.value)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and (n.attr in FIELDS or n.attr in OLD_FLAGS):
            v = n.value
            if _is_kind_call(v) or isinstance(v, ast.Name) and v.id in kind_vars:
                out.append((n.lineno, f"reads the declaration field `{n.attr}` of a kind"))
        if isinstance(n, ast.Compare):
            consts = [c.value for c in [n.left, *n.comparators] if isinstance(c, ast.Constant)]
            consts += [
                e.value
                for c in n.comparators
                if isinstance(c, (ast.Tuple, ast.List, ast.Set))
                for e in c.elts
                if isinstance(e, ast.Constant)
            ]
            hit = [c for c in consts if c in names]
            if hit and _mentions_kind(n):
                out.append((n.lineno, f"compares a kind with `{hit[0]}`"))
        if isinstance(n, ast.Name) and n.id == "KINDS":
            out.append((n.lineno, "walks the kinds' registry (ask `fairneg.engine.protocol` for what it needs)"))
    return out


def test_no_kind_branch_outside_the_kinds():
    found = [
        f"{p.relative_to(PACKAGE)}:{line}: {why}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.relative_to(PACKAGE).as_posix() not in HOME
        for line, why in kind_branches(p.read_text())
    ]
    assert not found, "a kind tested outside its declaration:\n" + "\n".join(found)


def test_the_search_finds_branches():
    "What the search must catch: each way a branch on a kind was written before the kinds owned their rules."
    cases = {
        "k = protocol_kind(dp.protocol)\nif k.responds:\n    pass": "field `responds`",
        "if protocol_kind(s.protocol.kind).own_issue:\n    pass": "field `own_issue`",
        "x = 1 if protocol_kind(p).deadline else 0": "field `deadline`",
        "if g.protocol == 'ultimatum':\n    pass": "compares a kind with `ultimatum`",
        "if condition == 'x' or dp['protocol'] in ('divide-dollar', 'table'):\n    pass": "with `divide-dollar`",
        "conds = {k.condition: k for k in KINDS.values()}": "registry",
    }
    for src, why in cases.items():
        found = kind_branches(src)
        assert found and why in found[0][1], (src, found)
    # what it leaves alone: a kind's methods, the legal actions, an agent's objective named like a kind
    for src in (
        "k = protocol_kind(dp.protocol)\nlines = k.status_lines(dp, None, False)",
        "if 'demand' in dp.legal:\n    pass",
        "if objective == 'table':\n    pass",
    ):
        assert kind_branches(src) == [], src


def test_a_game_file_loads_without_the_engine(tmp_path):
    "A game file naming a kind loads where only the game layer is imported (as `fairneg bank` commands do)."
    import json, subprocess, sys
    from fairneg.engine.game import game_to_dict
    from fairneg.engine.protocol import alternating_offers_game

    path = tmp_path / "alt.json"
    path.write_text(json.dumps(game_to_dict(alternating_offers_game())))
    code = (
        "import sys; from fairneg.engine.bank import bank_games; g = bank_games(sys.argv[1])[0]; "
        "print(g.protocol, 'fairneg.engine.protocol' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.split() == ["alternating-offers", "False"], r.stderr[-800:]
