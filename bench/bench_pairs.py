"""Counterfactual-pairs benchmark: annotating 18,048 logged LLM decision points with the four counterfactual types.

    .venv/bin/python bench/bench_pairs.py                   # the target run (~1 min with episode generation)
    .venv/bin/python bench/bench_pairs.py --points 4000     # quick look

Target (project issue 7): `fairneg.train.pairs.annotate` over 18,048 decision points × 4 types (72,192 rows, the size of
the seed's dataset) in under 30 s on 2 cores.

Setup (not timed): 24 generated five-seat private games (`generate_game(s, n_parties=5, info_mode="private")`,
seeds 41000-41023); every seat is the `random-legal` stand-in LLM (`fairneg.play.rollout.RandomLegalPolicy`: a random
but legal answer per request, seeded by the turn; 5% of its answers do not parse, so there are retries and
non-action rows), co-stepped with `fairneg.play.rollout.run_cell`, which logs `states.jsonl`. Episode seeds are added
until the episodes hold at least `--points` LLM decision points.

Timed: `annotate(lines, out=FILE, workers=2, max_points=N)` exactly as `fairneg pairs annotate` runs it: replay
every episode from its logged state, rebuild each LLM decision point, score it with the four types (one shared
belief per information side), price the actions, render the prompt for `view_ref`, and write the JSON Lines rows.
The process is pinned to 2 cores when the machine has more. Then, on a serial subsample (`--per-type-points`),
each type alone (ms per decision point, replay and rows included), all four together, and replay alone, so the
per-type cost and what the shared belief saves are visible.

Timings are noisy (the machine is shared); `--repeats` runs the timed part several times and reports the median.
Exit status 1 when the target fails.
"""

from __future__ import annotations
import argparse, os, statistics, sys, tempfile, time
from pathlib import Path
from fairneg.engine.game import generate_game
from fairneg.play.agents import COUNTERFACTUAL_TYPES
from fairneg.play.rollout import run_cell, RandomLegalPolicy
from fairneg.train.pairs import annotate, replay

TARGET_S, TARGET_POINTS = 30.0, 18_048


def make_lines(points: int, n_games: int = 24, width: int = 256, seed0: int = 41000) -> list:
    "states.jsonl lines of all-`random-legal` five-seat private episodes holding at least `points` LLM decision points."
    games = [generate_game(s, n_parties=5, info_mode="private") for s in range(seed0, seed0 + n_games)]
    pol = {"random-legal": RandomLegalPolicy(p_invalid=0.05)}
    lines, seed, n = [], 0, 0
    while n < points:
        res = run_cell(
            games,
            "random-legal",
            range(seed, seed + 8),
            experiment_name="bench_pairs",
            width=width,
            extra_policies=pol,
            progress=False,
        )
        lines += res["states"]
        seed += 8
        n = sum(len(l["turn_extras"]) for l in lines)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=TARGET_POINTS, help="decision points to annotate")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument(
        "--per-type-points", type=int, default=1500, help="serial subsample for the per-type costs (0: skip)"
    )
    a = ap.parse_args()
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > a.workers:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: a.workers])
    print(
        f"cores {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()}, "
        f"load {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}"
    )
    t = time.perf_counter()
    lines = make_lines(a.points)
    print(
        f"setup: {len(lines)} episodes, {sum(len(l['turn_extras']) for l in lines):,} LLM decision points "
        f"in {time.perf_counter() - t:.1f} s (not timed)"
    )
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as d:
        for k in range(a.repeats):
            f = Path(d) / f"pairs{k}.jsonl"
            rep = annotate(lines, COUNTERFACTUAL_TYPES, out=f, workers=a.workers, max_points=a.points)
            walls.append(rep["seconds"])
            cpus.append(rep["worker_cpu_seconds"])
            print(
                f"  run {k + 1}: {rep['decision_points']:,} decision points × 4 types = {rep['n_rows']:,} rows in "
                f"{rep['seconds']:.2f} s ({f.stat().st_size / 2**20:.0f} MiB written, view mismatches {rep['view_mismatch']})"
            )
    wall = statistics.median(walls)
    cpu = statistics.median(cpus) if None not in cpus else None
    print(
        f"annotate: {a.points:,} decision points × 4 types on {a.workers} workers: {wall:.2f} s "
        f"({a.points / wall:,.0f} decision points/s)"
    )
    if cpu is not None:
        print(
            f"  worker CPU time {cpu:.2f} s in all ({cpu / a.points * 1e3:.3f} ms per decision point); on {a.workers} idle cores "
            f"that is ~{cpu / a.workers:.1f} s of wall time (the difference to {wall:.1f} s is waiting for a core)"
        )
    if a.per_type_points:
        n = a.per_type_points
        t = time.perf_counter()
        npts = 0
        for l in sorted(lines, key=lambda l: (l["instance_id"], l["episode_seed"])):
            npts += len(replay(l))
            if npts >= n:
                break
        rp = (time.perf_counter() - t) / npts * 1e3
        print(
            f"per-type cost, serial, {n:,} decision points (ms per decision point; replay, pricing, rows and view_ref included):"
        )
        print(f"  {'replay only':18} {rp:6.3f}")
        tot = 0.0
        for ty in COUNTERFACTUAL_TYPES:
            r = annotate(lines, [ty], max_points=n)
            ms = r["seconds"] / r["decision_points"] * 1e3
            tot += ms - rp
            print(f"  {ty:18} {ms:6.3f}   (scoring alone ~{ms - rp:.3f})")
        r = annotate(lines, COUNTERFACTUAL_TYPES, max_points=n)
        print(
            f"  {'all four':18} {r['seconds'] / r['decision_points'] * 1e3:6.3f}   (the four alone would be ~{tot + rp:.3f}: "
            f"beliefs are shared between the types with the same information)"
        )
    ok = wall < TARGET_S or a.points != TARGET_POINTS
    print(
        f"target: {TARGET_POINTS:,} decision points × 4 types under {TARGET_S:.0f} s on 2 cores: "
        + ("PASS" if wall < TARGET_S else "FAIL")
        + f" (wall {wall:.1f} s; load average now {os.getloadavg()[0]:.2f})"
        + ("" if a.points == TARGET_POINTS else f" (not measured: --points {a.points})")
    )
    if cpu is not None and not ok:
        print(
            f"  note: the worker CPU time says {cpu / a.workers:.1f} s on {a.workers} idle cores; a wall time above that is "
            "other processes holding the cores (see the load average)"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
