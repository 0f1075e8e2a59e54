"""Benchmarks of two revisions side by side: every `bench/bench_*.py` that both hold, run alternately (base, head,
base, head, ...) on this machine with the same arguments, and every figure they print set beside its counterpart.

    .venv/bin/python bench/compare.py --base 19820bf                         # every script, 2 rounds each
    .venv/bin/python bench/compare.py --base 19820bf --only geometry,rollout --rounds 3
    .venv/bin/python bench/compare.py --base 19820bf --only grpo_step --rounds 1 -- --backend hf --steps 3
    .venv/bin/python bench/compare.py --base 19820bf --only llm,grpo_step,grpo --same-models   # the same weights on both

The base revision is checked out in a git worktree (under `--work`) and run with this checkout's virtual environment,
its own package first on `PYTHONPATH`; the head is this working tree. Each run's output is kept (`--work`/logs).
The embedded small model's recipe is versioned, so two revisions may build different weights; `--same-models` makes
the base load the head's (a cache folder under `--work` whose base recipe names link to the head's models), so the
model benchmarks compare code, not weights.

Figures are matched by line: a line's numbers are replaced by `#` to give its template, and the k-th line of a template
in one run is set beside the k-th line of that template in every other run. A figure that differs between runs is
printed with each revision's values. Noise is what the rounds show: a figure is **beyond noise** when the two
revisions' ranges do not overlap and the gap between them is larger than the wider of the two ranges; with one round
there is no noise estimate and nothing is judged. Whether higher is worse depends on the figure (a time, a rate), so
the direction is printed and a person reads it; lines only one revision prints are counted and listed with `-v`.
"""

import argparse, os, re, subprocess, sys, time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUM = re.compile(
    r"(?<![\w.])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?"
)  # not inside a name (p90, B2); units may follow (9.5x, 12%)


def figures(text: str) -> dict:
    "Map (template, k) -> the numbers of the k-th line of that template in a run's output."
    seen, out = defaultdict(int), {}
    for line in text.splitlines():
        nums = NUM.findall(line)
        if not nums:
            continue
        tpl = NUM.sub("#", line).strip()
        out[(tpl, seen[tpl])] = [float(n.replace(",", "").replace("−", "-")) for n in nums]
        seen[tpl] += 1
    return out


def judge(base: list, head: list) -> str:
    "`beyond noise` (with a direction), `within noise`, or `no noise estimate` for one figure's values per round."
    if len(base) < 2 or len(head) < 2:
        return "no noise estimate"
    spread = max(max(base) - min(base), max(head) - min(head))
    if max(head) < min(base) and min(base) - max(head) > spread:
        return "beyond noise: head lower"
    if min(head) > max(base) and min(head) - max(base) > spread:
        return "beyond noise: head higher"
    return "within noise"


def compare(runs: dict) -> list:
    "Rows (template, k, position, base values, head values, verdict) for every figure that is not the same in all runs."
    keys = set.intersection(*(set(f) for f in runs["base"] + runs["head"]))
    order = {k: i for i, k in enumerate(runs["head"][0])}  # as the head's first run prints them
    rows = []
    for key in sorted(keys, key=order.get):
        per = {side: [f[key] for f in runs[side]] for side in ("base", "head")}
        if len({len(v) for vs in per.values() for v in vs}) != 1:
            continue
        for i in range(len(per["base"][0])):
            b, h = [v[i] for v in per["base"]], [v[i] for v in per["head"]]
            if len(set(b + h)) > 1:
                rows.append((key[0], key[1], i, b, h, judge(b, h)))
    return rows


def worktree(rev: str, work: Path) -> Path:
    "A detached git worktree of `rev` under `work` (reused when it is already there at that commit)."
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = work / f"base-{sha[:12]}"
    if not (tree / ".git").exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), sha], check=True, capture_output=True
        )
    return tree


def tree_env(tree: Path) -> dict:
    "The environment that makes a tree's own package the one imported (checked: an editable install would win otherwise)."
    env = dict(os.environ, PYTHONPATH=str(tree) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    got = subprocess.run(
        [sys.executable, "-c", "import fairneg; print(fairneg.__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(got).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"{tree}: python imports fairneg from {got}, not this tree")
    return env


def shared_models(base: Path, work: Path) -> Path:
    "A model cache where the base's embedded-model folders are the head's: the tiny recipe carries a version, so by default each revision plays its own weights."
    cache = work / "same-models"
    (cache / "tiny").mkdir(parents=True, exist_ok=True)
    path = "from fairneg.llm.tiny import tiny_path; d = tiny_path('{0}', 0, progress=False); print(d.name, d)"  # built when missing
    # the base may predate the package's folders (fairneg.tiny until 78a2003's successor moved it to fairneg.llm.tiny)
    BASE_FOLDER = (
        "try:\n    from fairneg.llm.tiny import tiny_folder\nexcept ImportError:\n    from fairneg.tiny import tiny_folder\n"
        "print(tiny_folder('{0}', 0).name)"
    )
    for size in ("pilot", "test"):
        head_name, head_dir = subprocess.run(
            [sys.executable, "-c", path.format(size)],
            cwd=ROOT,
            env=tree_env(ROOT),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        base_name = subprocess.run(
            [sys.executable, "-c", BASE_FOLDER.format(size)],
            cwd=base,
            env=tree_env(base),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for name in {head_name, base_name}:
            link = cache / "tiny" / name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(Path(head_dir).resolve())
    return cache


def run_one(tree: Path, script: str, args: list, log: Path) -> str:
    "Run one benchmark script of a tree (its package first on the path); its output, kept in `log`."
    env = tree_env(tree)
    t0 = time.time()
    p = subprocess.run([sys.executable, f"bench/{script}", *args], cwd=tree, env=env, capture_output=True, text=True)
    log.write_text(p.stdout + "\n--- stderr\n" + p.stderr)
    print(f"  {tree.name:>20s} {script}: rc {p.returncode}, {time.time() - t0:.0f} s  ({log})", flush=True)
    if p.returncode not in (0, 1):  # 1: a target missed, which is a figure too
        raise SystemExit(f"{script} failed in {tree} (rc {p.returncode}); see {log}")
    return p.stdout


def show(script: str, rows: list, only_base: int, only_head: int):
    "Print one script's differing figures side by side and its count of figures beyond noise."
    print(
        f"\n== {script}: {len(rows)} figures differ between runs; {only_base} lines only in base, {only_head} only in head"
    )
    fmt = lambda vs: "/".join(f"{v:g}" for v in vs)
    for tpl, k, i, b, h, verdict in rows:
        mark = "!!" if verdict.startswith("beyond") else "  "
        print(f"{mark} {tpl[:70]:70s} [{k}.{i}] base {fmt(b):>22s}  head {fmt(h):>22s}  {verdict}")
    beyond = [r for r in rows if r[5].startswith("beyond")]
    print(f"   {len(beyond)} of {len(rows)} beyond noise")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the revision to compare with (a commit, tag or branch)")
    ap.add_argument(
        "--only", default="", help="comma-separated script names without bench_ and .py (default: all both hold)"
    )
    ap.add_argument("--rounds", type=int, default=2, help="runs per revision, alternating base and head")
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "bench-compare", help="worktree and logs folder")
    ap.add_argument(
        "--same-models",
        action="store_true",
        help="both revisions load the head's embedded models (tiny, tiny-test), built here first when missing",
    )
    ap.add_argument("-v", action="store_true", help="also list the lines only one revision prints")
    ap.add_argument("args", nargs="*", help="arguments for every script (after --)")
    a = ap.parse_args()
    base = worktree(a.base, a.work)
    have = lambda t: {p.name for p in (t / "bench").glob("bench_*.py")}
    scripts = sorted(have(base) & have(ROOT))
    if a.only:
        scripts = [s for s in scripts if s[6:-3] in a.only.split(",")]
    if not scripts:
        raise SystemExit(f"no benchmark script in both {base.name} and the working tree matches {a.only!r}")
    if a.same_models:
        os.environ["FAIRNEG_CACHE"] = str(shared_models(base, a.work))
    logs = a.work / time.strftime("logs-%Y%m%d-%H%M%S")
    logs.mkdir(parents=True)
    print(
        f"base {base.name} against head {ROOT} | {a.rounds} round(s) | args {' '.join(a.args) or '(defaults)'}"
        + (f" | the head's models for both ({os.environ['FAIRNEG_CACHE']})" if a.same_models else "")
    )
    for s in scripts:
        runs = {"base": [], "head": []}
        for r in range(a.rounds):
            for side, tree in (("base", base), ("head", ROOT)):
                runs[side].append(figures(run_one(tree, s, a.args, logs / f"{s[:-3]}-{side}-{r}.txt")))
        b, h = set.intersection(*map(set, runs["base"])), set.intersection(*map(set, runs["head"]))
        show(s, compare(runs), len(b - h), len(h - b))
        if a.v:
            for side, ks in (("base", b - h), ("head", h - b)):
                for tpl, k in sorted(ks):
                    print(f"   only {side}: {tpl[:110]}")


if __name__ == "__main__":
    main()
