"""The pilot asks the seeds' question their way (issue #49): a reduced pilot under the second campaign's design (reward
floor, zoo seats, training seeds, a placebo, both DPO types on regret_g with a preregistered minimum of effective pairs)
runs end to end through the report. Its eval.json holds every seed's contrast, the arms' pooled contrasts and the paired
arm-vs-arm contrasts; the placebo trains on the same data and compute as the λ arm of its seed; the validity check and
the DPO arms' pairs verdicts are written. (Its 2 eval games are below the 8 a gate needs: the gate stage is left out and
`gate_checkpoints`, what it judges, is tested in its chapter.)"""

import json, os, subprocess, sys
from pathlib import Path

import pytest, yaml

from fairneg.core.store import read_jsonl

pytestmark = pytest.mark.xdist_group("pilot_design")  # one worker: the module's pilot runs once

PARAMS = dict(
    bank=dict(
        train=dict(n_games=2, seed_offset=40000, modes=["full", "private"], out="banks/train"),
        eval=dict(
            n=2, first_seed=41000, min_spread=0.2, modes=["full"], max_candidates=200, known_banks=[], out="banks/eval"
        ),
    ),
    geometry=dict(out="geometry.jsonl"),
    pilot=dict(
        run_dir="run",
        lams=[0.0, 1.0],
        seeds=[2, 2],
        placebo_seeds=1,
        placebo_lam=1.0,
        replicate_conditions=["primary"],
        condition_seeds=1,
        ladder_seeds=1,
        ladder_conditions=["primary"],
        dpo_types=["fairness_private", "rational_private"],
        pairs_games=1,
        pairs_seeds=1,
    ),
    soundness=dict(games=2, seeds=1, required=False),
    train=dict(
        model="tiny-test",
        steps=2,
        groups=1,
        k=2,
        max_new_tokens=48,
        max_turns=3,
        checkpoint_steps=[1, 2],
        g_floor=-17.5,
        zoo_fraction=0.5,
        share_prefix=64,
    ),
    dpo=dict(steps=2, batch_size=2, weighting="regret_g", g_floor=-17.5),
    eval=dict(cells=["primary", "ultimatum"], episodes=2),
    analysis=dict(B=200, min_games=2),
    gate=dict(prereg="prereg.yaml"),
    report=dict(out="report.html", title="design"),
)
PREREG = dict(
    name="design-test",
    checkpoint=None,
    analysis=dict(B=200, level=0.95, viability_drop=0.10, min_games=8, min_effective_pairs=1000),
    endpoints=dict(nnw=1),
    clauses=[dict(id="primary_nnw", condition="primary", endpoint="nnw", require="favourable", margin=0.02)],
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    "The reduced pilot, every stage, run by the console script."
    d = tmp_path_factory.mktemp("design")
    (d / "p.yaml").write_text(yaml.safe_dump(PARAMS))
    (d / "prereg.yaml").write_text(yaml.safe_dump(PREREG))
    script = os.path.join(os.path.dirname(sys.executable), "fairneg")
    stages = [
        "train-bank",
        "eval-bank",
        "llmdel-geometry",
        "model",
        "soundness",
        "train",
        "pairs",
        "validity",
        "dpo",
        "eval",
        "analyze",
        "report",
    ]
    r = subprocess.run(
        [script, "pilot", "--params", "p.yaml", "--no-progress", "--only", *stages],
        cwd=d,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    return d


def steps(run: Path, arm: str) -> list:
    return read_jsonl(run / "run" / "train" / arm / "training_steps.jsonl")


def test_arms_seeds_and_placebo(run):
    "One arm per (λ, seed) and the placebo, each under its seed, the floor and the zoo; the placebo permutes λ1_s0's data."
    arms = sorted(p.name for p in (run / "run" / "train").iterdir())
    assert arms == ["lam0_s0", "lam0_s1", "lam1_s0", "lam1_s1", "placebo_s0"]
    state = lambda a: json.loads((run / "run" / "train" / a / "checkpoint-2" / "trainer_state.json").read_text())
    cfgs = {a: state(a)["config"] for a in arms}
    assert [cfgs[a]["seed"] for a in arms] == [0, 1, 0, 1, 0]
    assert all(c["g_floor"] == -17.5 and c["zoo_fraction"] == 0.5 for c in cfgs.values())
    assert cfgs["placebo_s0"]["placebo"] and not cfgs["lam1_s0"]["placebo"] and cfgs["placebo_s0"]["lam"] == 1.0
    a, p = steps(run, "lam1_s0")[0], steps(run, "placebo_s0")[0]
    # step 1: the same episodes, rewards and advantages' spread, the same tokens trained; other updates
    for k in ("reward_mean", "reward_std", "deal_rate", "adv_std", "adv_abs_mean", "tokens_trained", "samples"):
        assert a[k] == p[k], k
    assert a["loss"] != p["loss"] or a["adv_std"] == 0


def test_eval_pools_and_compares(run):
    "eval.json: each seed's cells, the pooled arms and λ1 − λ0 and λ − placebo, seed by seed and pooled."
    ev = json.loads((run / "run" / "eval.json").read_text())
    assert {
        "lam0_s0_step2_primary",
        "lam0_s1_step2_primary",
        "lam1_s1_step2_primary",
        "lam0_s0_step2_ultimatum",
        "lam0_s0_step1_primary",
    } <= set(ev["cells"])
    assert "lam0_s1_step2_ultimatum" not in ev["cells"]  # conditions: the first seed only
    assert {
        "lam1-vs-lam0_s0_step2_primary",
        "lam1-vs-lam0_s1_step2_primary",
        "lam1-vs-placebo_s0_step2_primary",
        "lam0-vs-placebo_s0_step2_primary",
    } <= set(ev["versus"])
    assert {"lam0_step2_primary", "lam1_step2_primary", "lam1-vs-lam0_step2_primary"} <= set(ev["pooled"])
    pooled = ev["pooled"]["lam1_step2_primary"]
    assert pooled["members"] == ["lam1_s0_step2_primary", "lam1_s1_step2_primary"]
    rep = pooled["replication"]["deal"]
    assert rep["n_seeds"] == 2 and len(rep["seed_deltas"]) == 2
    assert rep["status"] in (
        "replicated",
        "0 of 2 seeds agree",
        "1 of 2 seeds agree",
        "2 of 2 seeds agree",
        "no direction (pooled Δ 0)",
    )


def test_validity_dpo_and_report(run):
    "The validity check is written and opens the report; each DPO arm reports its effective pairs against the minimum."
    v = json.loads((run / "run" / "validity.json").read_text())
    assert v["status"] in ("reads_payoff", "indistinguishable", "reversed", "insufficient")
    for arm in ("dpo_fairness_private", "dpo_rational_private"):
        o = json.loads((run / "run" / "dpo" / arm / "outcome.json").read_text())
        if o["trained"]:
            assert o["weighting"] == "regret_g" and o["min_effective_pairs"] == 1000
            assert o["too_few_pairs"] and "fewer than the preregistered minimum of 1000" in o["too_few_pairs"]
    html = (run / "report.html").read_text()
    assert html.index("Can the model read its sheet?") < html.index("λ against λ") < html.index("Training")
    assert "lam1-vs-lam0" in html and "too_few_pairs" in html
