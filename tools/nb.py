"""Developer helper: author notebooks in jupytext percent format and execute them in place.

    python tools/nb.py topy nbs/03_engine_game.ipynb > /tmp/03_engine_game.py   # notebook -> percent text
    python tools/nb.py tonb /tmp/03_engine_game.py nbs/03_engine_game.ipynb     # percent text -> notebook (outputs cleared)
    python tools/nb.py run nbs/03_engine_game.ipynb [...]                # execute in place (pinned) so examples show their output

The notebook stays the source of truth; the percent text is a scratch editing view, never committed.
"""

import sys, subprocess
from pathlib import Path
import jupytext, nbformat


def topy(nb_path):
    print(jupytext.writes(jupytext.read(nb_path), fmt="py:percent"))


def tonb(py_path, nb_path):
    nb = jupytext.read(py_path, fmt="py:percent")
    nb.metadata = {"kernelspec": {"display_name": "python3", "language": "python", "name": "python3"}}
    for c in nb.cells:
        c.metadata = {k: v for k, v in c.metadata.items() if k == "tags"}
    nbformat.write(nb, nb_path)


def run(*nbs):
    "Execute each notebook in place under the pinned numerics (its outputs are then the same on every machine)."
    for p in nbs:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "fairneg.core.numerics",
                sys.executable,
                "-m",
                "jupyter",
                "nbconvert",
                "--to",
                "notebook",
                "--execute",
                "--inplace",
                "--ExecutePreprocessor.timeout=900",
                p,
            ],
            check=True,
        )
        subprocess.run([str(Path(sys.executable).parent / "nbdev-clean"), "--fname", p], check=True)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    {"topy": topy, "tonb": tonb, "run": run}[cmd](*args)
