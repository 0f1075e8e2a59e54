"The exported package imports its own modules relatively, as nbdev writes them from `from fairneg.x import ...`."

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "fairneg"


def absolute_self_imports(pkg: Path = PKG) -> list:
    "`file:line module` of every module-level `from fairneg... import` that nbdev left absolute in the package."
    out = []
    for f in sorted(pkg.rglob("*.py")):
        # nbdev rewrites a cell's top-level imports; one inside a function (fairneg.cli's verbs) stays as written
        for n in ast.parse(f.read_text()).body:
            if isinstance(n, ast.ImportFrom) and n.level == 0 and (n.module or "").split(".")[0] == "fairneg":
                out.append(f"{f.relative_to(pkg.parent)}:{n.lineno} {n.module}")
    return out


def test_package_imports_itself_relatively():
    # nbdev (maker.update_import) rewrites a multi-line `from fairneg.x import (` only when the statement's last line
    # reaches past the module name on its first: a short last line leaves the import absolute. Seen on 1581ecb.
    assert absolute_self_imports() == []


def private_names_crossing(pkg: Path = PKG) -> list:
    "`file:line module.name` of every private name (`_x`) one module of the package imports from another."
    out = []
    for f in sorted(pkg.rglob("*.py")):
        if f.name == "_modidx.py":
            continue
        for n in ast.walk(ast.parse(f.read_text())):
            own = isinstance(n, ast.ImportFrom) and (n.level > 0 or (n.module or "").split(".")[0] == "fairneg")
            for a in n.names if own else ():
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append(f"{f.relative_to(pkg.parent)}:{n.lineno} {n.module}.{a.name}")
    return out


def test_no_private_name_crosses_modules():
    # a name another module needs is that module's public name (#52: 18 such imports, e.g. report.sections took
    # `_fmt`, `_styled`, `_arm_of` and `_arm_step` from report.figures)
    assert private_names_crossing() == []


def test_a_wheel_holds_every_folder(tmp_path):
    # pyproject's `packages.find` once included `fairneg` alone: a wheel (not the editable install the tests use) held
    # none of llm/, eval/ or report/. Every folder with an `__init__.py` must be in the wheel, and the package data too.
    import subprocess, sys, zipfile

    import shutil

    src = tmp_path / "src"  # a copy, so that no `build/` folder of an earlier build stands in for this one
    shutil.copytree(PKG, src / "fairneg", ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(PKG.parent / f, src / f)
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src)]
    subprocess.run([*cmd, "-w", str(tmp_path)], check=True, capture_output=True, cwd=tmp_path)
    names = zipfile.ZipFile(next(tmp_path.glob("fairneg-*.whl"))).namelist()
    folders = {p.parent.relative_to(PKG.parent).as_posix() for p in PKG.rglob("__init__.py")}
    assert folders == {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    assert any(n.startswith("fairneg/data/llm_deliberation/") for n in names)  # the six public games
