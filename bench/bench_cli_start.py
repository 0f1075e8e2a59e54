"""Benchmark of the `fairneg` front door: how long the console script takes to print a help text or a usage error.

    python bench/bench_cli_start.py              # every command's --help and four usage errors, 3 runs each
    python bench/bench_cli_start.py --runs 5

Target (issue #52): `fairneg --help`, every subcommand's `--help` and every usage error in under 1 s (the median of
`--runs` runs, each a fresh process, wall clock). Printed beside two comparisons measured in the same run, the same way:
Python's own start (`python -c pass`, the floor no command can go below) and the start of a process that imports what
the commands use to draw, train and test (torch, transformers, altair, scipy.stats): what every help text paid when the
command modules imported them at the top.
"""

from __future__ import annotations
import argparse, statistics, subprocess, sys, time
from pathlib import Path

TARGET_S = 1.0
HEAVY = "import torch, transformers, altair, scipy.stats"
USAGE_ERRORS = [
    ["trian"],
    ["train", "--no-such-flag"],
    ["eval", "analyze"],
    ["geometry"],
]  # a typo, a bad flag, missing arguments


def fairneg_cmd() -> list:
    "The installed console script beside this Python, or `python -m fairneg.cli`."
    script = Path(sys.executable).parent / "fairneg"
    return [str(script)] if script.exists() else [sys.executable, "-m", "fairneg.cli"]


def command_paths() -> list:
    "Every command and group of the `fairneg` app, as argument lists (the root first)."
    import typer
    from fairneg.cli import app

    root = typer.main.get_command(app)
    out, todo = [], [([], root)]
    while todo:
        path, cmd = todo.pop(0)
        out.append(path)
        if hasattr(cmd, "list_commands"):
            ctx = cmd.make_context("fairneg", ["--help"], resilient_parsing=True)
            todo += [(path + [n], cmd.get_command(ctx, n)) for n in cmd.list_commands(ctx)]
    return out


def wall(argv: list, runs: int) -> tuple:
    "(median, max) wall-clock seconds of `runs` fresh runs of argv, and the last run's exit code."
    ts, rc = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        rc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), max(ts), rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per command (the median is compared)")
    a = ap.parse_args()
    floor, _, _ = wall([sys.executable, "-c", "pass"], a.runs)
    heavy, _, _ = wall([sys.executable, "-c", HEAVY], a.runs)
    print(f"comparisons ({a.runs} runs each, median): python -c pass {floor:.2f} s; python -c '{HEAVY}' {heavy:.2f} s")
    rows = [
        (" ".join(["fairneg", *p, "--help"]), *wall(fairneg_cmd() + p + ["--help"], a.runs), 0) for p in command_paths()
    ]
    rows += [(" ".join(["fairneg", *p]), *wall(fairneg_cmd() + p, a.runs), 2) for p in USAGE_ERRORS]
    missed = []
    for name, med, worst, rc, want in rows:
        ok = med < TARGET_S and rc == want
        if not ok:
            missed.append(name)
        print(f"{name:<44} median {med:5.2f} s  max {worst:5.2f} s  exit {rc}  {'PASS' if ok else 'FAIL'}")
    meds = [r[1] for r in rows]
    print(
        f"{len(rows)} commands: median of medians {statistics.median(meds):.2f} s, slowest {max(meds):.2f} s "
        f"(target < {TARGET_S:.1f} s each; python's own start {floor:.2f} s, the heavy imports {heavy:.2f} s)"
    )
    if missed:
        print(f"target: FAIL ({len(missed)} over {TARGET_S:.1f} s or a wrong exit code: {', '.join(missed)})")
        raise SystemExit(1)
    print("target: PASS")


if __name__ == "__main__":
    main()
