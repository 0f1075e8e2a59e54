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
