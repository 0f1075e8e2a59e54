"""Rollout benchmark: the negotiation engine's per-turn overhead, computable-agent tables, and co-stepping.

    .venv/bin/python bench/bench_rollout.py                       # defaults, ~1-2 min on 2 cores
    .venv/bin/python bench/bench_rollout.py --turns 2000 --repeats 1 --agent-repeats 1 --costep-k 1   # quick look
    .venv/bin/python bench/bench_rollout.py --skip-agents         # only the engine and co-stepping parts
    .venv/bin/python bench/bench_rollout.py --wait-agents 1200    # poll for fairneg.play.agents (every 60 s) before part 2

Targets (project issue):
 1. Engine overhead per turn (protocol step + decision point + render + parse, no policy) under 0.2 ms median.
 2. A table of six `bayes_rational` seats plays at least 10 episodes per second on one core.
 3. Co-stepping B episodes with a policy that costs a fixed time per call takes about 1/B of one episode at a
    time (here: the ratio within `--costep-tol` times the ideal 1/B). The ratio judged is of calls × cost + the
    process CPU time, width B over width 1: what the runner controls (how many policy calls, and its own CPU).
    The wall-clock ratio is printed beside it; it also holds the time the process waits for a core (after each
    sleep and while it computes), which grows with the load of a shared machine and decided the verdict at large B
    (B = 64 at load average 6 on 2 cores: wall ratio 0.0244 against 1.5/64 = 0.0234, where 7 calls × 50 ms + 0.060 s
    of CPU account for 0.410 s of the 0.464 s wall).

1. Engine. Episodes of generated six-party games (`generate_game`) are driven turn by turn with a cheap random
   but legal answer generator (propose a random deal, accept a live offer, pass, rarely walk; vote yes/no).
   Per turn, with `perf_counter_ns` around each part: `current_seats`, `decision_point`, `render_prompt`
   (table framing), `parse_action` on the answer text, `apply_action` with the same text (the real path: it
   parses again, checks and applies). The answer text is built from the decision point between the timed
   parts and is not counted. Engine total = current_seats + decision_point + render + apply_action
   (parse is inside apply_action; it is shown apart, and "step excl. parse" = apply_action - parse).
   Comparison: the same engine inside `fairneg.play.rollout.co_step` with a free scripted policy (what the runner
   adds: turn seeds, requests, batching, and `episode_row` with solve + metrics at the end).
2. Agents. `co_step` over fresh generated games × seeds, all six seats one agent, width `--width`; the process
   is pinned to one core (`os.sched_setaffinity(0, {core})`) for this part only and restored afterwards.
   Each repeat uses games not seen before (solve caches cannot help); one warm-up episode first. Agent time
   is measured inside `act_batch` by a thin wrapper; the rest is engine + runner + episode rows.
3. Co-stepping. `ScriptedPolicy(fn, cost_per_call=0.05)` stands in for a model (one `time.sleep` per batch
   call): p1 proposes the NBS label (KS where a game has no NBS), the others accept the first acceptable offer
   and vote yes. For each B > 1, the same B×k episodes run with `co_step(width=B)` and with the sequential
   baseline `co_step(width=1)`; the geometry of each game is solved beforehand and shared by both runs. B = 1
   is the baseline itself, so it is not a row (a width-1 run against a width-1 run compares nothing). Also printed: the number of policy
   calls and the process CPU time of each run, which together account for the wall time.
   A second scenario (`--variable`, on by default, not a target) has the non-chair seats accept only half
   the time, so episode lengths vary and the width-B run ends on its slowest episodes' tail.

Timings are noisy: this machine is shared with other processes. Every part is repeated (`--repeats`,
`--agent-repeats`, `--costep-repeats`) and medians are reported; the load average is printed at the start.
The garbage collector is left on. Exit status 1 when a measured target fails; a part that cannot run
(e.g. `fairneg.play.agents` not there yet) is reported as SKIP.
"""

from __future__ import annotations
import argparse, gc, importlib, importlib.util, json, os, platform, random, sys, time
import numpy as np
from fairneg.engine.game import generate_game
from fairneg.engine.geometry import solve
from fairneg.engine.protocol import (
    new_episode,
    current_seats,
    decision_point,
    parse_action,
    apply_action,
    is_done,
    outcome,
)
from fairneg.play.prompts import render_prompt
from fairneg.play.rollout import ScriptedPolicy, EpisodeSpec, co_step, make_policies

TURN_TARGET_US, EPS_TARGET = 200.0, 10.0
COST_PER_CALL = (
    0.05  # s per act_batch call, about one batched call of the embedded small model on 2 cores; with a cheaper
)
# stand-in (try --cost 0.005) the engine CPU, which batching does not shrink, shows in the ratio
AGENTS = ("bayes_rational", "oracle_omniscient", "fairness_oracle", "passive_gate", "greedy_anchor", "fairness_private")
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def med_p90(xs) -> tuple:
    return float(np.median(xs)), float(np.percentile(xs, 90))


# ---------------------------------------------------------------- 1. engine overhead per turn


def answer_maker(pad_chars: int, walk_p: float):
    "A cheap random-but-legal answer generator: `f(dp, game, rng) -> answer text` (with a scratchpad and message)."
    pad = ("I weigh the live offers against my threshold and the others' needs. " * 20)[:pad_chars]

    def make(dp, g, rng):
        ph = dp.phase
        if ph == "vote":
            a = {"atype": "vote", "offer_id": dp.ballot, "vote": "yes" if rng.random() < 0.7 else "no"}
        else:
            r, legal = rng.random(), dp.legal
            if ph == "open" or (r < 0.25 and "propose" in legal):
                a = {
                    "atype": "propose",
                    "deal": " ".join(f"{chr(65 + k)}{rng.randrange(no) + 1}" for k, no in enumerate(g.n_options)),
                }
            elif r < 0.60 and dp.acceptable:
                a = {"atype": "accept", "offer_id": rng.choice(dp.acceptable)}
            elif r < 1 - walk_p:
                a = {"atype": "pass"}
            else:
                a = {"atype": "walk"}
        return json.dumps(
            {"scratchpad": pad, "message": "Let us settle this quickly; I can live with a fair split.", "action": a}
        )

    return make


PARTS = ("current_seats", "decision_point", "render", "parse", "apply_action")


def engine_pass(games, n_turns: int, seed: int, make) -> dict:
    "Play episodes until `n_turns` turns are timed; per-turn µs of each part, plus episode start/finish costs."
    rng = random.Random(seed)
    t = {p: [] for p in PARTS}
    starts, ends, lengths, ok, attempts, ep = [], [], [], 0, 0, 0
    ns = time.perf_counter_ns
    while len(t["apply_action"]) < n_turns:
        g = games[ep % len(games)]
        a0 = ns()
        s = new_episode(g, seed * 100_000 + ep)
        starts.append((ns() - a0) / 1e3)
        ep += 1
        n0 = len(t["apply_action"])
        while True:
            t0 = ns()
            seats = current_seats(s)
            t1 = ns()
            if not seats:
                break
            seat = seats[0]
            dp = decision_point(s, seat)
            t2 = ns()
            msgs = render_prompt(dp, framing="table", game=g)
            t3 = ns()
            text = make(dp, g, rng)  # the "policy": not timed
            t4 = ns()
            parse_action(text)
            t5 = ns()
            rec = apply_action(s, seat, text)
            t6 = ns()
            for p, d in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t5 - t4, t6 - t5)):
                t[p].append(d / 1e3)
            ok += rec["legality"] == "ok"
            attempts += 1
        a0 = ns()
        outcome(s)
        ends.append((ns() - a0) / 1e3)
        lengths.append(len(t["apply_action"]) - n0)
        assert msgs and is_done(s)
    t = {p: np.array(v) for p, v in t.items()}
    t["step excl. parse"] = t["apply_action"] - t["parse"]
    t["engine total"] = t["current_seats"] + t["decision_point"] + t["render"] + t["apply_action"]
    return dict(t=t, starts=starts, ends=ends, lengths=lengths, episodes=ep, legal=ok / attempts)


def runner_pass(games, n_episodes: int, seed: int, make) -> tuple:
    "The same answers through `co_step` with a free policy: wall µs per turn (runner + engine + episode rows) and turns."
    rng = random.Random(seed)
    pol = ScriptedPolicy(lambda req: make(req.dp, req.game, rng), "random")
    specs = [EpisodeSpec(games[i % len(games)], seed * 100_000 + i, ["random"] * 6) for i in range(n_episodes)]
    t = time.perf_counter()
    eps = co_step(specs, {"random": pol}, width=64, progress=False)
    wall = time.perf_counter() - t
    turns = sum(e.row["n_turns"] for e in eps)
    return 1e6 * wall / turns, turns


def part_engine(args) -> dict:
    print(
        f"\n== 1. engine overhead per turn (µs), {len(args.games_1)} generated six-party games "
        f"(seeds {args.seed0}..{args.seed0 + len(args.games_1) - 1}), ≥{args.turns} turns × {args.repeats} passes"
    )
    make = answer_maker(args.pad_chars, args.walk_p)
    engine_pass(args.games_1, 200, 999, make)  # warm-up: imports, regex and system-prompt caches
    passes = []
    for r in range(args.repeats):
        gc.collect()
        passes.append(engine_pass(args.games_1, args.turns, r, make))
    rows = list(PARTS[:3]) + ["parse", "step excl. parse", "apply_action", "engine total"]
    print(f"{'part':34s}{'median':>9s}{'p90':>9s}{'mean':>9s}   per-pass medians")
    for p in rows:
        allv = np.concatenate([x["t"][p] for x in passes])
        m, p9 = med_p90(allv)
        label = {
            "apply_action": "step: apply_action (incl. parse)",
            "parse": "  parse: parse_action",
            "step excl. parse": "  step excl. parse",
            "render": "render_prompt (table)",
        }.get(p, p)
        print(
            f"{label:34s}{m:9.1f}{p9:9.1f}{allv.mean():9.1f}   "
            + " ".join(f"{float(np.median(x['t'][p])):6.1f}" for x in passes)
        )
    tot = np.concatenate([x["t"]["engine total"] for x in passes])
    pm = [float(np.median(x["t"]["engine total"])) for x in passes]
    st = np.concatenate([x["starts"] for x in passes])
    en = np.concatenate([x["ends"] for x in passes])
    L = np.concatenate([x["lengths"] for x in passes])
    print(
        f"  {len(tot)} turns in {sum(x['episodes'] for x in passes)} episodes (turns/episode median {np.median(L):.0f}, "
        f"min {L.min()}, max {L.max()}); answers legal: {min(x['legal'] for x in passes):.1%}"
    )
    print(
        f"  per episode, not in the per-turn figures: new_episode median {np.median(st):.0f} µs, "
        f"outcome {np.median(en):.0f} µs (≈{(np.median(st) + np.median(en)) / np.median(L):.1f} µs/turn amortized)"
    )
    print(f"  answers carry a {args.pad_chars}-char scratchpad and a one-line message (parse cost grows with length)")
    rt = []
    for r in range(args.repeats):
        gc.collect()
        rt.append(runner_pass(args.games_1, args.runner_episodes, 50 + r, make))
    rm = float(np.median([x[0] for x in rt]))
    print(
        f"  comparison, co_step with a free policy (runner + engine + episode_row/metrics, answer making included): "
        f"{rm:.1f} µs/turn wall (median of {len(rt)} runs of {args.runner_episodes} episodes, ~{rt[0][1]} turns)"
    )
    print(
        f"  engine total median {float(np.median(tot)):.1f} µs vs target {TURN_TARGET_US:.0f} µs "
        f"(per-pass medians {' '.join(f'{x:.1f}' for x in pm)})"
    )
    return dict(median=float(np.median(tot)), p90=float(np.percentile(tot, 90)), runner=rm, new_ep=float(np.median(st)))


# ---------------------------------------------------------------- 3. co-stepping with a costly policy


def scripted_fn(geos: dict, accept_p: float = 1.0):
    "p1 proposes the NBS label; others accept the first acceptable offer (with probability `accept_p`, by turn seed), vote yes."

    def fn(req):
        dp = req.dp
        if dp.phase == "open":
            geo = geos[id(req.game)]  # NBS, or KS where NBS is undefined (no IR deal with every surplus > 0)
            return json.dumps(
                {"action": {"atype": "propose", "deal": geo.label(geo.nbs if geo.nbs is not None else geo.ks)}}
            )
        if dp.phase == "vote":
            return json.dumps({"action": {"atype": "vote", "offer_id": dp.ballot, "vote": "yes"}})
        if dp.acceptable and (accept_p >= 1 or (req.seed % 1000) < 1000 * accept_p):
            return json.dumps({"action": {"atype": "accept", "offer_id": dp.acceptable[0]}})
        return json.dumps({"action": {"atype": "pass"}})

    return fn


def costep_once(specs, geos, width: int, cost: float, accept_p: float) -> tuple:
    pol = ScriptedPolicy(scripted_fn(geos, accept_p), "model", cost_per_call=cost)
    gc.collect()
    c, t = time.process_time(), time.perf_counter()
    eps = co_step(specs, {"model": pol}, width=width, progress=False, geos=geos)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return wall, pol.calls, sum(e.row["n_turns"] for e in eps), cpu


def part_costep(args) -> list:
    games = args.games_3
    geos = {id(g): solve(g) for g in games}
    scen = [("uniform: others accept at once", 1.0, args.costep_k, args.costep_repeats)]
    if args.variable:
        scen.append(("variable: others accept half the time", 0.5, args.variable_k, args.variable_repeats))
    print(f"\n== 3. co-stepping B episodes, policy cost {args.cost * 1e3:.1f} ms per act_batch call (time.sleep)")
    res, widths = [], [B for B in args.B if B > 1]
    if len(widths) < len(args.B):
        print(
            f"  B = {', '.join(str(B) for B in args.B if B <= 1)} dropped: width 1 is the baseline each row is compared with"
        )
    for title, acc, k, reps in scen:
        print(f"-- {title}; B×{k} episodes over {len(games)} games; median of {reps} run(s) per width")
        print(
            f"{'B':>4s}{'eps':>5s}{'turns':>7s}{'wall w=B':>10s}{'wall w=1':>10s}{'ratio':>8s}{'judged':>9s}{'ideal 1/B':>10s}"
            f"{'calls w=B':>10s}{'calls w=1':>10s}{'calls ratio':>12s}{'cpu w=B':>9s}{'(new_ep)':>9s}{'cpu w=1':>9s}{'speed-up':>10s}"
            "  per-run ratios"
        )
        for B in widths:
            specs = [EpisodeSpec(games[i % len(games)], 7000 + i, ["model"] * 6) for i in range(B * k)]
            costep_once(specs[:1], geos, 1, 0.0, acc)  # warm-up
            wb, w1 = [], []
            for _ in range(reps):
                wb.append(costep_once(specs, geos, B, args.cost, acc))
                w1.append(costep_once(specs, geos, 1, args.cost, acc))
            WB, W1 = float(np.median([x[0] for x in wb])), float(np.median([x[0] for x in w1]))
            CB, C1 = float(np.median([x[3] for x in wb])), float(np.median([x[3] for x in w1]))
            cB, c1, turns = wb[0][1], w1[0][1], wb[0][2]
            ratio = WB / W1
            work = lambda x: x[1] * args.cost + x[3]  # calls × cost + process CPU: no waiting for a core
            judged = float(np.median([work(x) for x in wb])) / float(np.median([work(x) for x in w1]))
            ok = judged <= args.costep_tol / B
            res.append(dict(scenario=title, B=B, ratio=judged, wall_ratio=ratio, ideal=1 / B, ok=ok, primary=acc >= 1))
            print(
                f"{B:4d}{B * k:5d}{turns:7d}{WB:9.3f}s{W1:9.3f}s{ratio:8.4f}{judged:9.4f}{1 / B:10.4f}{cB:10d}{c1:10d}{cB / c1:12.4f}"
                f"{CB:8.3f}s{B * k * args.new_ep_us / 1e6:8.3f}s{C1:8.3f}s{W1 / WB:9.1f}×  "
                + " ".join(f"{a[0] / b[0]:.4f}" for a, b in zip(wb, w1))
            )
    print(
        "  ratio = wall(width=B) / wall(width=1) on the same episodes (ideal 1/B); judged = the same ratio of calls × cost\n"
        "  + cpu (the wall without the waits for a core, which grow with the machine's load); calls = act_batch calls;\n"
        "  cpu = process CPU time of the run (engine + runner + the scripted policy's Python; the sleep is not CPU).\n"
        "  wall ≈ calls × (cost + sleep overshoot) + cpu: the ratio exceeds 1/B by the wave tail (calls ratio > 1/B)\n"
        "  and by the CPU, which batching does not shrink; (new_ep) = episodes × the median new_episode time of part 1,\n"
        "  the share of cpu w=B spent starting episodes (mostly `game_sha`, recomputed for every episode)."
    )
    return res


# ---------------------------------------------------------------- 2. computable agents on one core


class Timed:
    "Wraps a policy: time spent inside act_batch, calls and requests."

    def __init__(self, pol):
        self.pol, self.t, self.calls, self.reqs = pol, 0.0, 0, 0

    def act_batch(self, reqs):
        t = time.perf_counter()
        out = self.pol.act_batch(reqs)
        self.t += time.perf_counter() - t
        self.calls += 1
        self.reqs += len(reqs)
        return out


def agents_available(wait_s: float) -> tuple:
    "(module or None, why): import fairneg.play.agents, polling every 60 s for up to `wait_s` seconds while it is missing."
    t0 = time.time()
    while True:
        if importlib.util.find_spec("fairneg.play.agents") is not None:
            try:
                return importlib.import_module("fairneg.play.agents"), ""
            except Exception as e:
                why = f"fairneg.play.agents does not import: {type(e).__name__}: {e}"
        else:
            why = "fairneg/play/agents.py does not exist yet"
        if time.time() - t0 + 60 > wait_s:
            return None, why
        print(f"  ({why}; waiting 60 s, {time.time() - t0:.0f} s so far)", flush=True)
        time.sleep(60)


def agent_run(name: str, games, seeds, width: int) -> dict:
    specs = [EpisodeSpec(g, s, [name] * g.n) for g in games for s in seeds]
    pol = Timed(make_policies([name])[name])
    gc.collect()
    t = time.perf_counter()
    eps = co_step(specs, {name: pol}, width=width, progress=False)
    wall = time.perf_counter() - t
    rows = [e.row for e in eps]
    return dict(
        wall=wall,
        eps=len(eps),
        turns=sum(r["n_turns"] for r in rows),
        agent=pol.t,
        calls=pol.calls,
        deal=float(np.mean([bool(r["deal"]) for r in rows])),
        nnw=float(np.mean([r["nnw"] or 0 for r in rows])),
        bad=sum(r["illegal"] + r["fabrication"] + r["parse_error"] for r in rows),
    )


def part_agents(args) -> dict:
    print("\n== 2. computable agents: tables of six, episodes per second on ONE core")
    mod, why = agents_available(args.wait_agents)
    if mod is None:
        print(f"  SKIP: {why}")
        return dict(skip=why)
    before = os.sched_getaffinity(0) if hasattr(os, "sched_setaffinity") else None
    if before is not None:
        core = args.core if args.core in before else min(before)  # a core this process may run on
        os.sched_setaffinity(0, {core})
        print(
            f"  process pinned to core {core} (os.sched_setaffinity(0, {{{core}}})) for this part; "
            f"was {sorted(before)}" + (f" (--core {args.core} is not among them)" if core != args.core else "")
        )
    else:
        print("  WARNING: os.sched_setaffinity is not available here; NOT pinned")
    ng, ns = args.agent_games, args.agent_seeds
    print(
        f"  {ng} fresh generated games × {ns} seeds = {ng * ns} episodes per run, co_step width {args.width}; "
        f"up to {args.agent_repeats} runs per agent (fewer once {args.agent_budget:.0f} s are spent), eps/s their median"
    )
    print(
        f"{'agent':20s}{'eps/s':>8s}{'ms/ep':>8s}{'turns/ep':>9s}{'ms/turn':>8s}{'agent %':>8s}{'calls/run':>10s}"
        f"{'deal':>6s}{'nnw':>6s}{'bad':>5s}  per-run eps/s"
    )
    res = {}
    try:
        for j, name in enumerate(args.agents):
            try:
                agent_run(name, [generate_game(args.seed0 + 90_000 + j)], [0], args.width)  # warm-up
                runs, t0, r = [], time.perf_counter(), 0
                while r < args.agent_repeats and (r == 0 or time.perf_counter() - t0 < args.agent_budget):
                    base = args.seed0 + 100_000 + 1000 * j + ng * r
                    runs.append(
                        agent_run(name, [generate_game(base + i) for i in range(ng)], list(range(ns)), args.width)
                    )
                    r += 1
            except Exception as e:
                print(f"{name:20s}  ERROR {type(e).__name__}: {str(e)[:150]}")
                res[name] = dict(error=f"{type(e).__name__}: {e}")
                continue
            eps_s = [x["eps"] / x["wall"] for x in runs]
            m = float(np.median(eps_s))
            x, f = runs[int(np.argsort(eps_s)[len(runs) // 2])], runs[0]  # the median run's speed, the first run's play
            print(
                f"{name:20s}{m:8.1f}{1e3 / m:8.1f}{f['turns'] / f['eps']:9.1f}{1e3 * x['wall'] / x['turns']:8.2f}"
                f"{100 * x['agent'] / x['wall']:7.0f}%{f['calls']:10d}{f['deal']:6.2f}{f['nnw']:6.2f}{f['bad']:5d}  "
                + " ".join(f"{v:.1f}" for v in eps_s),
                flush=True,
            )
            res[name] = dict(eps_s=m, runs=len(runs))
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)
    print(
        "  agent % = time inside act_batch / wall; the rest is engine + runner + episode rows (solve + metrics);\n"
        "  bad = illegal + fabricated + unparsable attempts over the run; deal and nnw are run means (sanity only);\n"
        "  turns/ep, calls/run, deal, nnw and bad are the first run's (the same games every time, so two runs of the\n"
        "  benchmark compare like with like), ms/turn and agent % the median run's"
    )
    if before is not None:
        print(f"  affinity restored to {sorted(before)}")
    return res


# ---------------------------------------------------------------- main


def header(args):
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"fairneg rollout benchmark | Python {platform.python_version()} | numpy {np.__version__} | {cpus} usable CPUs | "
        f"load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print("  timings are noisy: the machine is shared with other processes; parts are repeated and medians reported")
    print("thread env (left as found): " + ", ".join(f"{v}={os.environ.get(v, '<unset>')}" for v in THREAD_VARS))
    print(f"args: {' '.join(sys.argv[1:]) or '(defaults)'}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed0", type=int, default=40000, help="first generator seed")
    ap.add_argument("--repeats", type=int, default=3, help="engine passes (part 1)")
    ap.add_argument("--turns", type=int, default=4000, help="turns timed per engine pass (part 1)")
    ap.add_argument("--engine-games", type=int, default=20, help="generated games cycled through in part 1")
    ap.add_argument("--runner-episodes", type=int, default=128, help="episodes per co_step comparison run (part 1)")
    ap.add_argument("--pad-chars", type=int, default=200, help="scratchpad length of the random answers (part 1)")
    ap.add_argument("--walk-p", type=float, default=0.01, help="chance a random answer on a turn is `walk` (part 1)")
    ap.add_argument("--skip-agents", action="store_true", help="skip part 2")
    ap.add_argument(
        "--agents", nargs="+", default=list(AGENTS), help="agents for part 2 (the first is held to the target)"
    )
    ap.add_argument("--agent-games", type=int, default=16, help="fresh games per agent run (part 2)")
    ap.add_argument("--agent-seeds", type=int, default=4, help="seeds per game per agent run (part 2)")
    ap.add_argument("--agent-repeats", type=int, default=3, help="runs per agent (part 2)")
    ap.add_argument(
        "--agent-budget", type=float, default=8.0, help="no further runs of an agent after this many s (part 2)"
    )
    ap.add_argument("--width", type=int, default=64, help="co_step width for the agents (part 2)")
    ap.add_argument("--core", type=int, default=0, help="the core part 2 is pinned to")
    ap.add_argument(
        "--wait-agents", type=float, default=0.0, help="poll up to this many s for fairneg.play.agents (part 2)"
    )
    ap.add_argument(
        "--B", type=int, nargs="+", default=[4, 16, 64], help="co-step widths > 1, each against width 1 (part 3)"
    )
    ap.add_argument("--costep-k", type=int, default=1, help="episodes = B × k, uniform scenario (part 3)")
    ap.add_argument("--variable-k", type=int, default=1, help="episodes = B × k, variable scenario (part 3)")
    ap.add_argument("--variable-repeats", type=int, default=1, help="runs per width, variable scenario (part 3)")
    ap.add_argument("--no-variable", dest="variable", action="store_false", help="skip the variable-length scenario")
    ap.add_argument("--costep-repeats", type=int, default=3, help="runs per width (part 3)")
    ap.add_argument("--cost", type=float, default=COST_PER_CALL, help="policy seconds per act_batch call (part 3)")
    ap.add_argument("--costep-tol", type=float, default=1.5, help="PASS when ratio <= tol / B (part 3)")
    ap.add_argument("--costep-games", type=int, default=8, help="generated games cycled through in part 3")
    args = ap.parse_args(argv)
    header(args)
    T0 = time.perf_counter()
    args.games_1 = [generate_game(args.seed0 + i) for i in range(args.engine_games)]
    args.games_3 = [generate_game(args.seed0 + 500 + i) for i in range(args.costep_games)]
    eng = part_engine(args)
    args.new_ep_us = eng["new_ep"]
    t1 = time.perf_counter()
    cst = part_costep(args)
    t3 = time.perf_counter()
    ags = dict(skip="--skip-agents") if args.skip_agents else part_agents(args)
    t2 = time.perf_counter()
    print(
        f"\n(part times: engine {t1 - T0:.0f} s, co-stepping {t3 - t1:.0f} s, agents {t2 - t3:.0f} s; "
        f"total {t2 - T0:.0f} s)"
    )

    print("\n== targets")
    verdicts = [
        (
            "PASS" if eng["median"] < TURN_TARGET_US else "FAIL",
            f"1. engine overhead per turn, median < {TURN_TARGET_US:.0f} µs",
            f"{eng['median']:.1f} µs (p90 {eng['p90']:.1f})",
        )
    ]
    lead = args.agents[0]
    if "skip" in ags:
        verdicts.append(("SKIP", f"2. six {lead} seats ≥ {EPS_TARGET:.0f} episodes/s on one core", ags["skip"]))
    elif "error" in ags.get(lead, {}) or lead not in ags:
        verdicts.append(
            (
                "FAIL",
                f"2. six {lead} seats ≥ {EPS_TARGET:.0f} episodes/s on one core",
                ags.get(lead, {}).get("error", "not run"),
            )
        )
    else:
        v = ags[lead]["eps_s"]
        verdicts.append(
            (
                "PASS" if v >= EPS_TARGET else "FAIL",
                f"2. six {lead} seats ≥ {EPS_TARGET:.0f} episodes/s on one core",
                f"{v:.1f} episodes/s",
            )
        )
    for c in cst:
        if c["primary"]:
            verdicts.append(
                (
                    "PASS" if c["ok"] else "FAIL",
                    f"3. co-step B={c['B']}: (calls×cost + cpu) ratio ≤ {args.costep_tol:g}/B",
                    f"{c['ratio']:.4f} vs ideal {c['ideal']:.4f} (wall ratio {c['wall_ratio']:.4f})",
                )
            )
    for c in cst:
        if not c["primary"]:
            print(
                f"  info  3'. variable lengths, B={c['B']}: ratio {c['ratio']:.4f} (wall {c['wall_ratio']:.4f}) vs ideal {c['ideal']:.4f} "
                f"({'within' if c['ok'] else 'outside'} {args.costep_tol:g}/B; not a target)"
            )
    for v, what, val in verdicts:
        print(f"  {v:4s}  {what:60s} {val}")
    return 1 if any(v == "FAIL" for v, _, _ in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
