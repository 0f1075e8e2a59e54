"""Geometry benchmark: how long `fairneg.engine.geometry.solve` takes, against a pure-Python enumeration of the same games.

    .venv/bin/python bench/bench_geometry.py                      # defaults: --games 1000 --workers 2
    .venv/bin/python bench/bench_geometry.py --repeats 50 --pure-repeats 1 --games 200   # quick look

Targets (project issue): a six-party, 720-deal game is solved (everything `solve` computes: utility matrix, IR,
PASS, NBS, KS, EGAL, UTIL, both Pareto frontiers, nnw and its spread, both fingerprints) in under 1 ms median;
a bank of 1,000 generated games is generated (`generate_game`) and solved in under 5 s with 2 worker processes.

Baseline. `solve_pure` computes only NBS, KS, EGAL, UTIL and |IR|. To compare like for like, this script adds the
rest in plain Python (`pure_extras`: PASS, nnw and its spread, both Pareto frontiers, both fingerprints) and
times it on the deal list `solve_pure` builds, so the baseline pays for one enumeration, as `solve` does. The
sheet fingerprint is pure Python in the library already (sorting, JSON, SHA-256), so both sides call the same
`sheet_fingerprint`. The baseline is checked against `solve` on every game it is timed on.

Timing: `time.perf_counter_ns` around each call, garbage collector left on, medians and 90th percentiles over
(games × repeats) calls. BLAS/OpenMP thread variables (OPENBLAS_NUM_THREADS, ...) are printed as found and never
changed here; `solve` does no linear algebra, so they should not matter. The machine may be shared: run it
more than once and read the medians.
"""

from __future__ import annotations
import argparse, gc, hashlib, itertools, json, math, os, platform, sys, time
from concurrent.futures import ProcessPoolExecutor
import numpy as np
import fairneg.engine.geometry as G
from fairneg.engine.game import generate_game, import_llm_deliberation, llmdel_games_dir
from fairneg.engine.geometry import SOLUTIONS, sheet_fingerprint, solutions_as_deals, solve, solve_pure

SOLVE_TARGET_US, BANK_TARGET_S = 1000.0, 5.0
THREAD_VARS = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)

# ---------------------------------------------------------------- pure-Python baseline (what solve_pure lacks)


def pure_rows(g) -> list:
    "Every feasible deal and its utility vector, as `solve_pure` enumerates them."
    rows = []
    for d in itertools.product(*[range(o) for o in g.n_options]):
        u = [float(sum(g.scores[i][k][o] for k, o in enumerate(d))) for i in range(g.n)]
        if g.pie is not None and sum(u) > g.pie + 1e-9:
            continue
        rows.append((d, u))
    return rows


def pure_pareto(rows) -> set:
    "Pareto-optimal deals of `rows` by sort-filter-skyline: best total first, compare with the front so far."
    front = []
    for d, u in sorted(rows, key=lambda du: (-sum(du[1]), [-x for x in du[1]])):
        if not any(all(f >= x for f, x in zip(fu, u)) and any(f > x for f, x in zip(fu, u)) for _, fu in front):
            front.append((d, u))
    return {d for d, _ in front}


def pure_solution_fp(g, rows, sols: dict) -> str:
    "`solution_fp` in plain Python: utility vectors at the solutions, party order and solution order removed."
    at = dict(rows)
    cols = [at[sols[s]] if sols[s] is not None else [-1e18] * g.n for s in SOLUTIONS]
    prows = sorted(tuple(round(c[i], 9) for c in cols) for i in range(g.n))
    return hashlib.sha256(json.dumps(sorted(json.dumps(c) for c in zip(*prows))).encode()).hexdigest()[:16]


def pure_extras(g, rows, sols: dict) -> dict:
    "Everything `solve` computes that `solve_pure` does not, in plain Python over `rows`."
    n, tau = g.n, [float(t) for t in g.thresholds]
    ideal = [float(sum(max(r) for r in sheet)) for sheet in g.scores]
    acc = lambda u: [(u[i] > tau[i]) if g.strict else (u[i] >= tau[i]) for i in range(n)]
    ir, passable = [], []
    for d, u in rows:
        a = acc(u)
        if all(a):
            ir.append((d, u))
        if sum(a) >= g.quorum and all(a[v] for v in g.veto):
            passable.append((d, u))
    nnw = lambda u: math.prod(max((u[i] - tau[i]) / (ideal[i] - tau[i]), 0.0) for i in range(n)) ** (1 / n)
    all_nnw = [nnw(u) for _, u in rows]
    v = [nnw(u) for _, u in ir]
    mean = sum(v) / len(v) if v else None
    spread = (max(v) - min(v), math.sqrt(sum((x - mean) ** 2 for x in v) / len(v))) if v else (None, None)
    return dict(
        n_pass=len(passable),
        nnw=all_nnw,
        nnw_spread=spread[0],
        nnw_std=spread[1],
        pareto_ir=pure_pareto(ir),
        pareto_pass=pure_pareto(passable),
        sheet_fp=sheet_fingerprint(g),
        solution_fp=pure_solution_fp(g, rows, sols),
    )


def check_agrees(g, geo, sols: dict, ex: dict):
    "Fail loudly if the baseline and `solve` disagree on anything they both compute."
    deals = [tuple(int(o) for o in d) for d in geo.deals]
    assert solutions_as_deals(geo) == {s: sols[s] for s in SOLUTIONS}, g.name
    assert int(geo.ir.sum()) == sols["n_ir"] and int(geo.passable.sum()) == ex["n_pass"], g.name
    assert {deals[p] for p in np.flatnonzero(geo.pareto_ir)} == ex["pareto_ir"], g.name
    assert {deals[p] for p in np.flatnonzero(geo.pareto_pass)} == ex["pareto_pass"], g.name
    assert np.allclose(geo.nnw, ex["nnw"], rtol=1e-12, atol=1e-12), g.name
    for k in ("nnw_spread", "nnw_std"):
        a, b = getattr(geo, k), ex[k]
        assert (a is None and b is None) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (g.name, k)
    assert geo.sheet_fp == ex["sheet_fp"] and geo.solution_fp == ex["solution_fp"], g.name


# ---------------------------------------------------------------- timing helpers


def times_us(f, repeats: int) -> list:
    "Wall time of `repeats` calls of `f`, in µs each."
    out = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        f()
        out.append((time.perf_counter_ns() - t) / 1e3)
    return out


def med_p90(xs) -> tuple:
    return float(np.median(xs)), float(np.percentile(xs, 90))


def time_fast(games, repeats: int) -> list:
    "Per-call µs of `solve` over every game (one warm-up call each)."
    out = []
    for g in games:
        solve(g)
        out += times_us(lambda: solve(g), repeats)
    return out


def time_pure(games, repeats: int, check: bool = True) -> tuple:
    "Per-call µs of `solve_pure` alone and of the full baseline (`solve_pure` + `pure_extras`), checked against `solve`."
    narrow, full = [], []
    for g in games:
        rows = pure_rows(g)
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            sols = solve_pure(g)
            t1 = time.perf_counter_ns()
            ex = pure_extras(g, rows, sols)
            t2 = time.perf_counter_ns()
            narrow.append((t1 - t0) / 1e3)
            full.append((t2 - t0) / 1e3)
        if check:
            check_agrees(g, solve(g), sols, ex)
    return narrow, full


# ---------------------------------------------------------------- breakdown of one solve


def stages(g) -> dict:
    "Closures for each stage of `solve`, fed with the previous stages' results (computed once here)."
    deals, index, U = G._feasible(g)
    st = G._sets(g, U)
    S, Z, tau, ir, ps = st["S"], st["Z"], st["tau"], st["ir"], st["passable"]
    sols = G._solutions(U, S, Z, tau, ir)
    pos = [sols[s] for s in SOLUTIONS]
    return {
        "enumeration + utility matrix": lambda: G._feasible(g),
        "IR / PASS / z (sets)": lambda: G._sets(g, U),
        "NBS KS EGAL UTIL": lambda: G._solutions(U, S, Z, tau, ir),
        "nnw + spread": lambda: G._nnw_spread(G.nnw_from_z(Z), ir),
        "Pareto IR": lambda: G.pareto_mask(U, ir),
        "Pareto PASS": lambda: G.pareto_mask(U, ps),
        "sheet_fp": lambda: sheet_fingerprint(g),
        "solution_fp": lambda: G._solution_fp(U, pos),
    }


def breakdown(games: dict, repeats: int):
    "Table of median µs per stage of `solve`, per game, with generation for generated games."
    cols = {
        name: {k: float(np.median(times_us(f, repeats))) for k, f in stages(g).items()} for name, g in games.items()
    }
    for name, g in games.items():
        cols[name]["(sum of stages)"] = sum(cols[name].values())
        cols[name]["solve (whole)"] = float(np.median(times_us(lambda: solve(g), repeats)))
        cols[name]["generate_game"] = (
            float(np.median(times_us(lambda: generate_game(g.meta["seed"]), repeats)))
            if g.meta.get("source") == "generator"
            else float("nan")
        )
    names = list(games)
    print(f"{'stage (median µs)':30s}" + "".join(f"{n[:22]:>24s}" for n in names))
    for k in cols[names[0]]:
        cells = []
        for n in names:
            v, tot = cols[n][k], cols[n]["solve (whole)"]
            cells.append(f"{'—':>24s}" if math.isnan(v) else f"{v:10.1f} ({100 * v / tot:5.1f}%)".rjust(24))
        print(f"{k:30s}" + "".join(cells))
    print(
        "  (each stage timed alone in a hot loop; run back to back inside solve they are slower, colder caches,\n"
        "   which is most of the gap between the sum and the whole; building the Geometry itself is ~2 µs)"
    )


# ---------------------------------------------------------------- the bank


def _bank_chunk(seeds) -> int:
    "Generate and solve a chunk of seeds in a worker; return how many deals were enumerated."
    return sum(solve(generate_game(s)).n_deals for s in seeds)


def bank(seeds: list, workers: int, chunks_per_worker: int = 4) -> float:
    "Wall seconds to generate and solve every seed: in-process when `workers` is 1, else a process pool (start-up included)."
    t = time.perf_counter()
    if workers <= 1:
        _bank_chunk(seeds)
    else:
        size = math.ceil(len(seeds) / (workers * chunks_per_worker))
        with ProcessPoolExecutor(max_workers=workers) as ex:
            list(ex.map(_bank_chunk, [seeds[i : i + size] for i in range(0, len(seeds), size)]))
    return time.perf_counter() - t


# ---------------------------------------------------------------- main


def header(args):
    "Where and how this ran."
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"fairneg geometry benchmark | Python {platform.python_version()} | numpy {np.__version__} | "
        f"{cpus} usable CPUs | load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print("thread env (left as found): " + ", ".join(f"{v}={os.environ.get(v, '<unset>')}" for v in THREAD_VARS))
    print(
        f"args: {' '.join(sys.argv[1:]) or '(defaults)'} -> games={args.games} workers={args.workers} "
        f"repeats={args.repeats} pure_repeats={args.pure_repeats} n720={args.n720} seed0={args.seed0}"
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", type=int, default=1000, help="size of the generated bank (generate + solve)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes for the bank")
    ap.add_argument("--repeats", type=int, default=200, help="timed `solve` calls per game")
    ap.add_argument("--pure-repeats", type=int, default=3, help="timed pure-Python calls per game")
    ap.add_argument("--n720", type=int, default=20, help="generated six-party games with exactly 720 deals to time")
    ap.add_argument(
        "--seed0", type=int, default=40000, help="first generator seed (the bank is seed0 .. seed0+games-1)"
    )
    args = ap.parse_args(argv)
    header(args)
    gdir = llmdel_games_dir()
    base, seven = import_llm_deliberation(gdir / "base"), import_llm_deliberation(gdir / "base_7players")
    seeds = list(range(args.seed0, args.seed0 + args.games))
    gen720, s = [], args.seed0
    while len(gen720) < args.n720:
        g = generate_game(s)
        s += 1
        if g.n_deals == 720:
            gen720.append(g)
    mixed = [generate_game(x) for x in seeds[: args.n720]]
    sets = [
        ("(a) llmdel base, 6 parties", [base]),
        (f"(b) generated, 6p, 720 deals ×{len(gen720)}", gen720),
        (f"(b') generated, 6p, mixed sizes ×{len(mixed)}", mixed),
        ("(c) llmdel base_7players, 7 parties", [seven]),
    ]

    print(f"\n== per-solve time (µs); solve: {args.repeats} calls/game, pure: {args.pure_repeats} calls/game")
    print(
        f"{'games':40s}{'deals':>11s}{'solve med':>11s}{'p90':>9s}{'solve_pure med':>16s}{'pure full med':>15s}"
        f"{'p90':>10s}{'× vs pure':>11s}{'× vs full':>11s}"
    )
    res = {}
    for name, games in sets:
        fast = time_fast(games, args.repeats)
        narrow, full = time_pure(games, args.pure_repeats)
        sizes = sorted({g.n_deals for g in games})
        size = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
        (fm, f9), (nm, _), (pm, p9) = med_p90(fast), med_p90(narrow), med_p90(full)
        res[name] = fm
        print(f"{name:40s}{size:>11s}{fm:11.0f}{f9:9.0f}{nm:16.0f}{pm:15.0f}{p9:10.0f}{nm / fm:10.1f}×{pm / fm:10.1f}×")
    print(
        "  solve_pure = NBS/KS/EGAL/UTIL/|IR| only; pure full = solve_pure + pure_extras (PASS, nnw + spread,\n"
        "  Pareto IR and PASS, sheet_fp, solution_fp), i.e. everything solve computes; checked equal to solve."
    )

    print("\n== where one solve spends its time (median µs; % of the whole solve)")
    breakdown(
        {"llmdel base": base, f"gen-{gen720[0].meta['seed']} (720)": gen720[0], "base_7players": seven}, args.repeats
    )

    print(f"\n== bank: generate_game + solve for seeds {seeds[0]}..{seeds[-1]} ({len(seeds)} games)")
    gc.collect()
    t_gen = time.perf_counter()
    games = [generate_game(x) for x in seeds]
    t_gen = time.perf_counter() - t_gen
    t_sol = time.perf_counter()
    [solve(g) for g in games]
    t_sol = time.perf_counter() - t_sol
    sizes = np.array([g.n_deals for g in games])
    print(
        f"  deals per game: median {np.median(sizes):.0f}, min {sizes.min()}, max {sizes.max()}, "
        f"{(sizes == 720).sum()} games with 720"
    )
    print(f"  1 process, split:  generate {t_gen:6.2f} s + solve {t_sol:6.2f} s")
    t1 = bank(seeds, 1)
    print(f"  1 process:         {t1:6.2f} s  ({1e3 * t1 / len(seeds):.2f} ms/game)")
    tw = bank(seeds, args.workers)
    print(
        f"  {args.workers} processes:       {tw:6.2f} s  ({1e3 * tw / len(seeds):.2f} ms/game, pool start-up included; "
        f"speed-up {t1 / tw:.2f}×)"
    )
    k = min(len(seeds), max(20, len(seeds) // 20))
    t = time.perf_counter()
    for x in seeds[:k]:
        g = generate_game(x)
        rows = pure_rows(g)
        pure_extras(g, rows, solve_pure(g))
    tp = (time.perf_counter() - t) * len(seeds) / k
    print(
        f"  pure baseline, 1 process, extrapolated from the first {k} games: ~{tp:6.1f} s "
        f"({tp / t1:.0f}× the numpy bank; pure_rows enumerates a second time here, so this overstates it a little)"
    )

    print("\n== targets")
    verdicts = [
        (
            f"six-party 720-deal solve, median < {SOLVE_TARGET_US:.0f} µs: llmdel base",
            res[sets[0][0]] < SOLVE_TARGET_US,
            f"{res[sets[0][0]]:.0f} µs",
        ),
        (
            f"six-party 720-deal solve, median < {SOLVE_TARGET_US:.0f} µs: generated",
            res[sets[1][0]] < SOLVE_TARGET_US,
            f"{res[sets[1][0]]:.0f} µs",
        ),
        (
            f"bank of {len(seeds)} generated + solved, {args.workers} workers, < {BANK_TARGET_S:.0f} s",
            tw < BANK_TARGET_S,
            f"{tw:.2f} s",
        ),
    ]
    if len(seeds) != 1000 or args.workers != 2:
        print("  (the bank target is stated for 1000 games on 2 workers)")
    for what, ok, val in verdicts:
        print(f"  {'PASS' if ok else 'FAIL'}  {what:70s} {val}")
    return 0 if all(ok for _, ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
