"""Golden hashes: what a redesign must leave unchanged (issue #36), as one sha256 per output, printed and written to JSON.

    python tools/golden.py --out before.json            # at the commit before the change
    python tools/golden.py --out after.json --compare before.json

Each hash covers one output over every protocol kind (a six-party table game in full and private information, the
ultimatum game, divide-the-dollar), both contexts (window, conversation) and both framings (table, prose), with every
computable agent and the project's small test model (`tiny-test`) at the table:
- `decision_points`: every decision point a seat was asked at, whole;
- `prompts`: the exact chat messages each request showed;
- `transcripts`, `episodes`: the `rollout_transcripts.jsonl` and `episodes.jsonl` rows;
and then a two-step GRPO run of `tiny-test` (its `training_steps.jsonl` rows and adapter tensors), the `eval.json` of
the report's demo run (eight held-out games, two arms, primary and ultimatum conditions) and every table of its report.
Fields that say when, where, how long or with which code version (timings, memory, hosts, dates, `code_version`) are
left out, so two runs of one commit on one machine agree; `--repeat` runs everything twice and says whether they do.
"""

import argparse, dataclasses, hashlib, json, shutil, sys, tempfile, time
from html.parser import HTMLParser
from pathlib import Path

VOLATILE = (
    "time",
    "seconds",
    "created",
    "host",
    "code_version",
    "memory",
    "gpu",
    "wall",
    "elapsed",
    "tokens_per_s",
    "throughput",
    "tflops",
    "rss",
    "_source",
    "python",
    "torch_version",
    "platform",
    "started",
    "finished",
    "path",
)
VOLATILE_ENDS = ("_s", "_at", "_mb", "_gb", "_pid", "date")


def volatile(key: str) -> bool:
    "Whether a field says when, where, how long or with which code: left out of every hash."
    k = str(key).lower()
    return any(v in k for v in VOLATILE) or k.endswith(VOLATILE_ENDS)


def stable(x):
    "`x` without its volatile fields, with dataclasses as dicts, ready for canonical JSON."
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        x = dataclasses.asdict(x)
    if isinstance(x, dict):
        return {str(k): stable(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0])) if not volatile(k)}
    if isinstance(x, (list, tuple)):
        return [stable(v) for v in x]
    if isinstance(x, float):
        return round(x, 10)
    return x


def digest(x) -> str:
    return hashlib.sha256(json.dumps(stable(x), sort_keys=True, default=str, ensure_ascii=False).encode()).hexdigest()[
        :16
    ]


class Recorder:
    "Wraps a policy: keeps each request's decision point and the messages it showed."

    def __init__(self, policy, log: list):
        self.policy, self.log = policy, log

    def __getattr__(self, k):
        return getattr(self.policy, k)

    def act_batch(self, requests):
        from fairneg.play.rollout import request_messages

        for r in requests:
            self.log.append(dict(dp=r.dp, messages=request_messages(r)))
        return self.policy.act_batch(requests)


def games():
    from fairneg.engine.game import generate_game, ultimatum_game, divide_dollar_game

    return dict(
        table=[generate_game(36000), generate_game(36001, info_mode="private")],
        ultimatum=[ultimatum_game()],
        divide=[divide_dollar_game(2), divide_dollar_game(3)],
    )


AGENTS = ("greedy_anchor", "passive_gate", "bayes_rational", "oracle_omniscient", "fairness_oracle", "fairness_private")


def seating(n: int, seed: int) -> list:
    "The agents rotated by the seed, with the small test model in seat `seed mod n`: every episode has an LLM seat."
    seats = [AGENTS[(seed + j) % len(AGENTS)] for j in range(n)]
    seats[seed % n] = "tiny-test"
    return seats


def play_hashes(seeds=(0, 1)) -> dict:
    "Decision points, prompts, transcripts and episode rows of every kind × context × framing."
    from fairneg.play.rollout import EpisodeSpec, co_step, transcript_rows, make_policies
    from fairneg.engine.settings import PlaySettings
    from fairneg.llm.policies import seat_policies

    model = seat_policies(["tiny-test"], max_new_tokens=80)
    out = {}
    for kind, gs in games().items():
        for context in ("window", "conversation"):
            for framing in ("table", "prose"):
                specs = []
                for g in gs:
                    for s in seeds:
                        specs.append(
                            EpisodeSpec(
                                g,
                                s,
                                seating(g.n, s),
                                f"golden_{kind}",
                                PlaySettings(context=context, framing=framing, max_turns=4),
                            )
                        )
                log = []
                pols = {
                    n: Recorder(p, log) for n, p in make_policies([n for sp in specs for n in sp.seats], model).items()
                }
                eps = co_step(specs, pols, width=8, progress=False)
                key = f"{kind}/{context}/{framing}"
                out[f"{key}/decision_points"] = digest([e["dp"] for e in log])
                out[f"{key}/prompts"] = digest([e["messages"] for e in log])
                out[f"{key}/transcripts"] = digest([t for e in eps for t in transcript_rows(e)])
                out[f"{key}/episodes"] = digest([e.row for e in eps])
    return out


def grpo_hashes(work: Path) -> dict:
    "A two-step GRPO run of the small test model: its rows and its adapter's tensors."
    from fairneg.engine.bank import generate_bank
    from fairneg.train.grpo import make_config, train
    from safetensors.numpy import load_file

    generate_bank(n_games=2, out=work / "bank", progress=False)
    cfg = make_config(
        None,
        model="tiny-test",
        bank=str(work / "bank"),
        out=str(work / "grpo"),
        lam=0.5,
        steps=2,
        groups=2,
        k=2,
        max_turns=4,
        max_new_tokens=80,
        scratchpad_chars=16,
        message_chars=16,
        checkpoint_steps=[2],
        seed=0,
    )
    rows = train(cfg, progress=False)
    ad = load_file(str(work / "grpo" / "checkpoint-2" / "adapter_model.safetensors"))
    h = hashlib.sha256()
    for k in sorted(ad):
        h.update(k.encode())
        h.update(ad[k].tobytes())
    return {"grpo/rows": digest(rows), "grpo/adapter": h.hexdigest()[:16]}


MOVED = {
    "py:fairneg.report:demo_mix": "py:fairneg.run.demo:demo_mix"
}  # names a commit gave a thing that later moved (#36)


def moved(text: str) -> str:
    "`text` with the old names of moved things replaced by the new: their data, not their address, is compared."
    for old, new in MOVED.items():
        text = text.replace(old, new)
    return text


def report_hashes(work: Path) -> dict:
    "The demo run's eval.json and every table of its report."
    from fairneg.report import render_report

    try:
        from fairneg.run.demo import demo_run
    except ImportError:
        from fairneg.report import demo_run  # before #36 moved the demo next to the pilot
    run = demo_run(work / "demo", B=200)
    ev = json.loads(moved((run / "eval.json").read_text()))
    render_report(run, work / "r.html")
    html = moved((work / "r.html").read_text())
    tables = html_tables(html)
    return {"eval/eval.json": digest(ev), "report/tables": digest(tables), "report/n_tables": len(tables)}


class _Tables(HTMLParser):
    "Every `<table>` of a page as rows of cell texts (the stdlib parser: no lxml needed)."

    def __init__(self):
        super().__init__()
        self.tables, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def html_tables(html: str) -> list:
    p = _Tables()
    p.feed(html)
    return p.tables


def all_hashes(work: Path) -> dict:
    "Every hash, the runs written under `work` (one fixed folder, so the paths a config records are the same each time)."
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        d, res = work, {}
        for name, fn in (
            ("play", lambda: play_hashes()),
            ("grpo", lambda: grpo_hashes(d)),
            ("report", lambda: report_hashes(d)),
        ):
            t0 = time.perf_counter()
            res.update(fn())
            print(f"  {name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the hashes to this JSON file")
    ap.add_argument("--compare", help="a JSON file of hashes from another commit: list each output that differs")
    ap.add_argument("--repeat", action="store_true", help="compute everything twice and say whether the two agree")
    ap.add_argument(
        "--work", default=str(Path(tempfile.gettempdir()) / "fairneg-golden"), help="the scratch folder (emptied first)"
    )
    a = ap.parse_args(argv)
    res = all_hashes(Path(a.work))
    for k, v in res.items():
        print(f"{k:45s} {v}")
    if a.repeat:
        again = all_hashes(Path(a.work))
        diff = [k for k in res if again.get(k) != res[k]]
        print(f"repeat: {'the same' if not diff else 'DIFFERS in ' + ', '.join(diff)}")
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    if a.compare:
        old = json.loads(Path(a.compare).read_text())
        diff = sorted(k for k in set(old) | set(res) if old.get(k) != res.get(k))
        print(
            f"against {a.compare}: {len(res) - len(diff)} of {len(set(old) | set(res))} the same"
            + ("" if not diff else "; differ: " + ", ".join(diff))
        )
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
