"""DPO end to end on the small test model: its own episodes (`fairneg play run`) → counterfactual pairs (`fairneg pairs
annotate`) → `fairneg dpo train` (a `--params` file's `dpo:` section, flags over it) → `fairneg eval launch --checkpoint`
on the PEFT checkpoint it wrote, paired with the untrained base → `fairneg eval analyze`."""

import json
import pytest
from typer.testing import CliRunner
from fairneg.engine.bank import write_bank
from fairneg.cli import app
from fairneg.engine.game import generate_game
from fairneg.core.store import STEP_FIELDS, read_jsonl

runner = CliRunner()


def cli(*args):
    r = runner.invoke(app, [*map(str, args)])
    return r


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    "Annotated pairs of tiny-test's own episodes on two private-information training games."
    d = tmp_path_factory.mktemp("dpo")
    write_bank([generate_game(s, info_mode="private") for s in (40000, 40001)], d / "train")
    r = cli(
        "play",
        "run",
        "--bank",
        d / "train",
        "--seats",
        "llm",
        "--model",
        "tiny-test",
        "--max-turns",
        4,
        "--seeds",
        0,
        1,
        2,
        "--experiment-name",
        "tiny_test_base",
        "--out",
        d / "episodes",
        "--no-progress",
    )
    assert r.exit_code == 0, r.output
    r = cli(
        "pairs",
        "annotate",
        "--episodes",
        d / "episodes",
        "--out",
        d / "ann",
        "--types",
        "rational_private",
        "fairness_private",
    )
    assert r.exit_code == 0, r.output
    return d


def test_dpo_train_then_eval_the_checkpoint(pairs, tmp_path):
    params = tmp_path / "dpo.yaml"
    params.write_text(
        f"dpo:\n  pairs: {pairs / 'ann'}\n  type: rational_private\n  model: tiny-test\n  steps: 8\n"
        f"  batch_size: 2\n  checkpoint_steps: [1]\n  out: {tmp_path / 'arm'}\n"
    )
    r = cli("dpo", "train", "--params", params, "--steps", 2, "--no-progress")  # the flag overrides the file
    assert r.exit_code == 0, r.output
    rows = read_jsonl(tmp_path / "arm" / "training_steps.jsonl")
    assert [x["step"] for x in rows] == [1, 2] and all(list(x) == list(STEP_FIELDS) for x in rows)
    assert {x["method"] for x in rows} == {"dpo"} and {x["arm"] for x in rows} == {"dpo_rational_private"}
    assert all(x["config_hash"] and x["code_version"] and x["pairs"] == 2 and x["pairs_available"] > 0 for x in rows)
    ck = tmp_path / "arm" / "checkpoint-2"
    state = json.loads((ck / "trainer_state.json").read_text())
    assert state["step"] == 2 and state["method"] == "dpo" and (ck / "adapter_config.json").is_file()
    assert state["trained_settings"] is None  # no settings.json beside these pairs: its eval plays the launch's
    assert (tmp_path / "arm" / "checkpoint-1" / "adapter_config.json").is_file()
    # the same command again: the run is there, finished; nothing is trained or appended
    r = cli("dpo", "train", "--params", params, "--steps", 2, "--no-progress")
    assert r.exit_code == 0 and len(read_jsonl(tmp_path / "arm" / "training_steps.jsonl")) == 2
    # a different run into the same folder is refused, named
    r = cli("dpo", "train", "--params", params, "--steps", 2, "--beta", 0.5)
    assert r.exit_code == 2 and "holds another or an unfinished run" in r.output
    # the PEFT checkpoint goes through eval like a GRPO one: trained and untrained sides on identical (game, seed) pairs
    ev = tmp_path / "eval"
    r = cli(
        "eval",
        "launch",
        "--checkpoint",
        f"dpo_step2={ck}",
        "--cells",
        "primary",
        "--bank",
        pairs / "train",
        "--episodes",
        2,
        "--out-dir",
        ev,
        "--llm",
        "max_new_tokens=80",
        "--llm",
        "scratchpad_chars=16",
        "--llm",
        "message_chars=16",
    )
    assert r.exit_code == 0, r.output
    tr, bs = (read_jsonl(ev / "dpo_step2_primary" / s / "episodes.jsonl") for s in ("trained", "base"))
    assert len(tr) == len(bs) == 4 and [(x["instance_id"], x["episode_seed"]) for x in tr] == [
        (x["instance_id"], x["episode_seed"]) for x in bs
    ]
    assert tr[0]["seats"][0] == "dpo_step2"
    r = cli("eval", "analyze", "--run-dir", ev, "--out", tmp_path / "eval.json", "--b", 200)
    assert r.exit_code == 0, r.output
    assert "dpo_step2_primary" in json.loads((tmp_path / "eval.json").read_text())["cells"]


def test_dpo_refusals(pairs, tmp_path):
    ann = pairs / "ann"
    r = cli(
        "dpo", "train", "--pairs", ann, "--type", "oracle_omniscient", "--model", "tiny-test", "--out", tmp_path / "x"
    )
    assert r.exit_code == 2 and "information-leaky" in r.output
    r = cli(
        "dpo",
        "train",
        "--pairs",
        ann,
        "--policy-experiment",
        "someone_else",
        "--model",
        "tiny-test",
        "--out",
        tmp_path / "x",
    )
    assert r.exit_code == 2 and "no fairness_private rows of experiment someone_else" in r.output
    r = cli(
        "dpo",
        "train",
        "--pairs",
        ann,
        "--type",
        "rational_private",
        "--model",
        "tiny-test",
        "--max-length",
        20,
        "--out",
        tmp_path / "x",
        "--no-progress",
    )
    assert r.exit_code == 2 and "> max_length 20" in r.output
    r = cli("dpo", "train", "--model", "tiny-test", "--out", tmp_path / "x")
    assert r.exit_code == 2 and "no pairs" in r.output
    assert not (tmp_path / "x" / "training_steps.jsonl").exists()


def test_dpo_learns_a_hand_made_preference(pairs, tmp_path):
    """Hand-made pairs with a known preferred action: at every ballot of tiny-test's own episodes, `vote no` is chosen and
    `vote yes` rejected. The base model prefers yes at every one of them (log π(no) − log π(yes) < 0, about −2.4 nats);
    DPO through TRL must reverse that on every pair: the adapter comes to prefer no (the log-ratio crosses 0, so it moves
    by more than the base's whole preference)."""
    import numpy as np, torch
    from fairneg.train.dpo import DPOTrainConfig, train_dpo, training_pairs, pair_ids
    from fairneg.llm import load_model, sequence_logprobs
    from fairneg.train.pairs import load_pairs
    from fairneg.llm.policies import resolve_model
    from fairneg.core.store import append_jsonl

    ballots = [
        r for r in load_pairs(pairs / "ann") if r["counterfactual_type"] == "rational_private" and r["phase"] == "vote"
    ]
    assert len(ballots) >= 8, len(ballots)
    hand = [
        {
            **r,
            "chosen_action": {**r["rejected_action"], "vote": "no"},
            "rejected_action": {**r["rejected_action"], "vote": "yes"},
            "rejected_legality": "ok",
            "diverges": True,
        }
        for r in ballots
    ]
    (tmp_path / "hand").mkdir()
    append_jsonl(hand, tmp_path / "hand" / "pairs.jsonl")
    cfg = DPOTrainConfig(
        pairs=str(tmp_path / "hand"),
        type="rational_private",
        model="tiny-test",
        steps=16,
        batch_size=4,
        weighting="uniform",
        lr=1e-3,
        out=str(tmp_path / "arm"),
    )
    rows = train_dpo(cfg, progress=False)
    assert len(rows) == 16 and rows[-1]["reward_accuracy"] == 1.0 and rows[-1]["reward_margin"] > 0, rows[-1]
    base, tok = load_model(resolve_model("tiny-test"))
    tuned, _ = load_model(resolve_model("tiny-test"), adapter=tmp_path / "arm" / "checkpoint-16")
    ids = [pair_ids(tok, x) for x in training_pairs(cfg)]

    def margins(m):
        P = [x["prompt_ids"] for x in ids]
        with torch.no_grad():
            c = sequence_logprobs(m, P, [x["chosen_ids"] for x in ids])
            r = sequence_logprobs(m, P, [x["rejected_ids"] for x in ids])
        return np.array([float(a.sum() - b.sum()) for a, b in zip(c, r)])

    before, after = margins(base), margins(tuned)
    print(
        f"log π(no) − log π(yes) on {len(ids)} ballots: base {before.min():+.2f}..{before.max():+.2f}, "
        f"after DPO {after.min():+.2f}..{after.max():+.2f}"
    )
    assert (before < 0).all(), before  # the preference DPO must reverse is there to begin with
    assert (after > 0).all(), after  # and it is reversed on every pair
