"""Counterfactual pairs end to end: campaign cells (`fairneg play` with LLM seats, `play merge`), the annotator,
the pooling guard, the packaged dataset and its card, and the DPO export."""

import json, re, shutil

import pytest
from typer.testing import CliRunner

from fairneg.play.agents import COUNTERFACTUAL_TYPES, get_agent
from fairneg.cli import app as root
from fairneg.engine.game import generate_game, save_game
from fairneg.play.prompts import render_prompt
from fairneg.play.rollout import ScriptedPolicy, RandomLegalPolicy, run_cell, view_ref
from fairneg.core.store import read_jsonl
from fairneg.llm.policies import play_app
from fairneg.train.pairs import (
    PoolingError,
    ReplayError,
    annotate,
    check_poolable,
    read_states,
    replay,
    row_decision_point,
    ROW_FIELDS,
)

runner = CliRunner()


def flat(text):
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    d = tmp_path_factory.mktemp("games")
    for s in (41200, 41201):
        save_game(generate_game(s, n_parties=5, info_mode="private"), d / f"g{s}.json")
    return d


def _answer_then_stumble(req):
    "A scripted 'LLM': random legal moves, but its first answer in round 3 does not parse (a non-action row, then a retry)."
    if req.dp.round == 3 and req.dp.retry_error is None and req.dp.phase == "turn":
        return "let me think"
    return RandomLegalPolicy().answer(req)


# ---------------------------------------------------------------- campaign cells


def test_play_cell_options_log_states(games, tmp_path):
    out = tmp_path / "cell"
    r = runner.invoke(
        play_app,
        [
            "--instances",
            str(games),
            "--model",
            "random-legal",
            "--seats",
            "llm,bayes_rational,model,passive_gate,fairness_private",
            "--seeds",
            "0",
            "1",
            "--run-name",
            "cell_a",
            "--instance-batch",
            "3",
            "--out",
            str(out),
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    eps, states = read_jsonl(out / "episodes.jsonl"), read_jsonl(out / "states.jsonl")
    assert len(eps) == len(states) == 4
    assert all(e["experiment_name"] == "cell_a" and e["seats"][0] == "random-legal" for e in eps)
    assert all(s["llm_seats"] == [0, 2] and s["state"]["turns"] for s in states)
    assert all(x["view_ref"] for s in states for x in s["turn_extras"])
    cell = read_jsonl(out / "cell.jsonl")[0]
    assert cell["model"] == "random-legal" and cell["model_thinking"] == "off" and cell["max_new_tokens"] == 2560
    # the explicit subcommand and the uncapped protocol
    r = runner.invoke(
        play_app,
        [
            "run",
            "--bank",
            str(games),
            "--model",
            "random-legal",
            "--turn-max-tokens",
            "4096",
            "--out",
            str(tmp_path / "unc"),
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    assert {e["protocol_version"] for e in read_jsonl(tmp_path / "unc" / "episodes.jsonl")} == {
        "five-seat-uncapped-turn4096-v1"
    }
    assert "merge" in runner.invoke(play_app, ["--help"]).output


def test_play_seat_errors(games, tmp_path):
    r = runner.invoke(play_app, ["--bank", str(games), "--seats", "llm", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "no --model" in flat(r.output)
    r = runner.invoke(play_app, ["--bank", str(games), "--out", str(tmp_path)])
    assert r.exit_code == 2 and "give --seats" in flat(r.output)
    r = runner.invoke(
        play_app, ["--bank", str(games), "--model", "random-legal", "--constrain", "maybe", "--out", str(tmp_path)]
    )
    assert r.exit_code == 2 and "constrain must be legal or none, got 'maybe'" in flat(r.output)
    r = runner.invoke(play_app, ["--bank", str(games), "--model", "random-legal", "--model-thinking", "on"])
    assert r.exit_code == 2 and "--thinking" in flat(r.output)  # thinking is one bool flag: --thinking/--no-thinking
    assert not (tmp_path / "episodes.jsonl").exists()


def test_merge_refuses_duplicates_and_mixed_protocols(games, tmp_path):
    def play(out, seeds, *extra):
        r = runner.invoke(
            root,
            [
                "play",
                "--bank",
                str(games),
                "--model",
                "random-legal",
                "--run-name",
                "cell",
                "--seeds",
                *map(str, seeds),
                "--out",
                str(out),
                "--no-progress",
                *extra,
            ],
        )
        assert r.exit_code == 0, r.output

    play(tmp_path / "b0s0", [0])
    play(tmp_path / "b0s1", [1])
    play(tmp_path / "dup", [1])
    play(tmp_path / "unc", [2], "--turn-max-tokens", "32768")
    merged = tmp_path / "merged"
    r = runner.invoke(
        root, ["play", "merge", "--chunks", str(tmp_path / "b0s0"), str(tmp_path / "b0s1"), "--out", str(merged)]
    )
    assert r.exit_code == 0, r.output
    q = json.loads((merged / "quality_report.json").read_text())
    assert q["episodes_done"] == 4 and q["unique_keys"] == 4 and q["duplicate_keys"] == 0 and q["states_logged"]
    assert len(read_jsonl(merged / "states.jsonl")) == 4
    r = runner.invoke(
        root,
        ["play", "merge", "--chunks", str(tmp_path / "b0s1"), str(tmp_path / "dup"), "--out", str(tmp_path / "m2")],
    )
    assert r.exit_code == 2 and "duplicate (instance_id, episode_seed) keys" in flat(r.output)
    assert not (tmp_path / "m2").exists()
    r = runner.invoke(
        root,
        ["play", "merge", "--chunks", str(tmp_path / "b0s0"), str(tmp_path / "unc"), "--out", str(tmp_path / "m3")],
    )
    assert (
        r.exit_code == 2
        and "mixed protocol versions" in flat(r.output)
        and "five-seat-uncapped-turn32768-v1" in flat(r.output)
    )
    r = runner.invoke(
        root, ["play", "merge", "--chunks", str(tmp_path / "b0s0"), "--out", str(merged)]
    )  # already merged there
    assert r.exit_code == 0 and "already holds every episode of these chunks; nothing merged" in flat(r.output), (
        r.output
    )
    assert len(read_jsonl(merged / "episodes.jsonl")) == 4


# ---------------------------------------------------------------- the pooling guard


def test_pooling_guard_refusal_message():
    rows = (
        [dict(protocol_version="five-seat-private-v1", phase="turn", turn_token_budget=2048)] * 2
        + [dict(protocol_version="five-seat-private-v1", phase="vote", turn_token_budget=2560)]
        + [dict(protocol_version="five-seat-uncapped-turn32768-v1", phase="turn", turn_token_budget=32768)]
    )
    with pytest.raises(PoolingError) as e:
        check_poolable(rows)
    msg = str(e.value)
    assert "five-seat-private-v1 (3 rows)" in msg and "five-seat-uncapped-turn32768-v1 (1 rows)" in msg
    assert "action-turn turn_token_budget 2,048 (2 rows), 32,768 (1 rows)" in msg and "override" in msg
    assert check_poolable(rows[:3])["poolable"]  # one protocol: action and vote caps pool
    same_version = rows[:3] + [dict(protocol_version="five-seat-private-v1", phase="turn", turn_token_budget=16384)]
    with pytest.raises(PoolingError, match="16,384"):
        check_poolable(same_version)  # the version alone is not enough
    s = check_poolable(rows, override=True)
    assert s["override"] and not s["poolable"]


# ---------------------------------------------------------------- the annotator


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    "A cell where a scripted 'LLM' (seats 0 and 3) plays against agents; it records every prompt it is shown."
    out = tmp_path_factory.mktemp("cell")
    shown = {}

    def llm(req):
        shown[(req.dp.episode_id, req.dp.seat, sum(k[:2] == (req.dp.episode_id, req.dp.seat) for k in shown))] = (
            render_prompt(req.dp, req.framing, req.game)
        )
        return _answer_then_stumble(req)

    gs = [generate_game(s, n_parties=5, info_mode="private") for s in (41210, 41211)]
    seats = ["scripted-llm", "bayes_rational", "oracle_omniscient", "scripted-llm", "fairness_private"]
    res = run_cell(
        gs,
        seats,
        [0, 1, 2],
        out=out,
        experiment_name="scripted_vs_agents",
        extra_policies={"scripted-llm": ScriptedPolicy(llm, "scripted-llm")},
        progress=False,
    )
    return out, res, shown


def test_annotate_scripted_llm_against_agents(cell, tmp_path):
    out, res, shown = cell
    r = runner.invoke(
        root, ["pairs", "annotate", "--episodes", str(out), "--out", str(tmp_path / "ann"), "--workers", "2"]
    )
    assert r.exit_code == 0, r.output
    rows = read_jsonl(tmp_path / "ann" / "pairs.jsonl")
    llm_turns = [
        (ep.state.episode_id, t["turn_idx"]) for ep in res["episodes"] for t in ep.state.turns if t["seat"] in (0, 3)
    ]
    assert len(rows) == 4 * len(llm_turns)
    assert sorted({(r["episode_id"], r["turn_idx"]) for r in rows}) == sorted(
        llm_turns
    )  # LLM turns only, every attempt
    assert {r["seat"] for r in rows} == {0, 3} and {r["policy"] for r in rows} == {"scripted-llm"}
    assert all(set(ROW_FIELDS) <= set(r) for r in rows)
    assert {r["counterfactual_type"] for r in rows} == set(COUNTERFACTUAL_TYPES)
    assert all(r["information_leaky"] == get_agent(r["counterfactual_type"]).information_leaky for r in rows)
    non_action = [r for r in rows if r["rejected_action"] is None]
    assert non_action and all(r["diverges"] is None and r["rejected_legality"] == "parse_error" for r in non_action)
    assert any(r["diverges"] is False for r in rows) and any(
        r["diverges"] is True for r in rows
    )  # agreeing rows are kept
    for r in rows:
        assert r["protocol_version"] == "five-seat-private-v1" and r["turn_token_budget"] in (2048, 2560)
        assert r["experiment_name"] == "scripted_vs_agents"
        assert r["chosen_action"]["atype"] in r["legal"]
        assert r["counterfactual_value"] is None or 0 <= r["counterfactual_value"] <= r["table_optimum"] + 1e-12
        assert "scratchpad" not in json.dumps(r["chosen_action"]) and "rationale" not in r
    # the rows of one decision point agree with the agents themselves
    r0 = next(r for r in rows if r["counterfactual_type"] == "fairness_private" and r["phase"] == "turn")
    assert r0["chosen_action"] == get_agent("fairness_private").act(row_decision_point(r0), None)
    rep = json.loads((tmp_path / "ann" / "annotation_report.json").read_text())
    assert rep["view_mismatch"] == 0 and rep["decision_points"] == len(llm_turns)
    # the same annotation again finds its rows there; another annotation of the same episodes into that folder is refused
    n = len(read_jsonl(tmp_path / "ann" / "pairs.jsonl"))
    r = runner.invoke(root, ["pairs", "annotate", "--episodes", str(out), "--out", str(tmp_path / "ann")])
    assert r.exit_code == 0 and "already holds the rows of this annotation" in flat(r.output), r.output
    r = runner.invoke(
        root,
        ["pairs", "annotate", "--episodes", str(out), "--out", str(tmp_path / "ann"), "--types", "rational_private"],
    )
    assert r.exit_code == 2 and "already holds" in flat(r.output)
    assert len(read_jsonl(tmp_path / "ann" / "pairs.jsonl")) == n
    grown = tmp_path / "grown"
    shutil.copytree(out, grown)  # the cell played further since: not the same annotation
    args = ["pairs", "annotate", "--episodes", str(grown), "--out", str(tmp_path / "ann2"), "--workers", "1"]
    assert runner.invoke(root, args).exit_code == 0
    line = json.loads((grown / "states.jsonl").read_text().splitlines()[0])
    with (grown / "states.jsonl").open("a") as fh:
        fh.write(json.dumps({**line, "episode_id": line["episode_id"] + "-more"}) + "\n")
    r = runner.invoke(root, args)
    assert r.exit_code == 2 and "already holds" in flat(r.output), r.output


def test_round_trip_rerendered_prompt_equals_logged(cell):
    "episodes -> rows -> the prompt re-rendered from the row's state-complete fields is the prompt the model was shown."
    out, res, shown = cell
    rows = [r for r in annotate(read_states(out), ["rational_private"], include_views=True)["rows"]]
    assert len(rows) == len(shown)
    for r in rows:
        k = sum(
            1
            for x in rows
            if (x["episode_id"], x["seat"]) == (r["episode_id"], r["seat"]) and x["turn_idx"] < r["turn_idx"]
        )
        logged = shown[(r["episode_id"], r["seat"], k)]
        again = render_prompt(row_decision_point(json.loads(json.dumps(r))), "table")
        assert again == logged == r["view"]
        assert view_ref(again, "table") == r["view_ref"]


def test_replay_refuses_a_tampered_log(cell):
    out, _, _ = cell
    line = json.loads(json.dumps(read_states(out)[0]))
    t = next(t for t in line["state"]["turns"] if t["phase"] == "turn" and t["legality"] == "ok")
    t["action"] = {"atype": "walk", "offer_id": None, "deal": None, "vote": None}
    with pytest.raises(ReplayError, match="replay differs"):
        replay(line)


# ---------------------------------------------------------------- packaging and DPO


def test_package_parquet_and_card_with_hazards(cell, games, tmp_path):
    out, _, _ = cell
    assert (
        runner.invoke(root, ["pairs", "annotate", "--episodes", str(out), "--out", str(tmp_path / "a1")]).exit_code == 0
    )
    r = runner.invoke(
        play_app,
        [
            "--bank",
            str(games),
            "--model",
            "random-legal",
            "--turn-max-tokens",
            "32768",
            "--run-name",
            "unc",
            "--out",
            str(tmp_path / "unc"),
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    assert (
        runner.invoke(
            root,
            [
                "pairs",
                "annotate",
                "--episodes",
                str(tmp_path / "unc"),
                "--out",
                str(tmp_path / "a2"),
                "--types",
                "rational_private",
                "fairness_private",
            ],
        ).exit_code
        == 0
    )
    ds = tmp_path / "ds"
    args = [
        "pairs",
        "package",
        "--run",
        f"frozen_scripted={tmp_path / 'a1'}",
        f"uncapped_random={tmp_path / 'a2'}",
        "--out",
        str(ds),
    ]
    r = runner.invoke(root, args)
    assert r.exit_code == 2 and "refusing to pool" in flat(r.output)
    r = runner.invoke(root, args + ["--allow-mixed-protocols"])
    assert r.exit_code == 0, r.output
    card = (ds / "README.md").read_text()
    for warning in (
        "⚠ **Off-policy rows.**",
        "⚠ **Information-leaky types.**",
        "⚠ **Mixed protocols.**",
        "⚠ **Non-action rows.**",
    ):
        assert warning in card
    assert "five-seat-uncapped-turn32768-v1" in card and "divergence_pairs" in card and "decision_points" in card
    import datasets

    datasets.disable_progress_bars()
    d = datasets.load_dataset(str(ds), split="train", cache_dir=str(tmp_path / "cache"))
    rows = read_jsonl(ds / "pairs.jsonl")
    assert d.num_rows == len(rows) and {"frozen_scripted", "uncapped_random"} == set(d["experiment_name"])
    assert {"chosen_action", "rejected_action", "issues", "own_sheet", "offers", "view_ref"} <= set(d.column_names)
    stats = json.loads((ds / "card_stats.json").read_text())
    assert sum(x["rows"] for x in stats["experiments"]) == len(rows)
    # a card of one protocol and one policy has none of those two warnings
    r = runner.invoke(root, ["pairs", "package", "--run", f"only={tmp_path / 'a1'}", "--out", str(tmp_path / "ds1")])
    card1 = (tmp_path / "ds1" / "README.md").read_text()
    assert r.exit_code == 0 and "Mixed protocols" not in card1 and "Off-policy rows" not in card1


def test_dpo_output_loads_with_datasets(cell, tmp_path):
    out, _, _ = cell
    assert (
        runner.invoke(root, ["pairs", "annotate", "--episodes", str(out), "--out", str(tmp_path / "ann")]).exit_code
        == 0
    )
    f = tmp_path / "dpo.jsonl"
    r = runner.invoke(
        root,
        [
            "pairs",
            "dpo",
            "--pairs",
            str(tmp_path / "ann"),
            "--type",
            "rational_private",
            "--policy-experiment",
            "scripted_vs_agents",
            "--out",
            str(f),
        ],
    )
    assert r.exit_code == 0, r.output
    import datasets

    datasets.disable_progress_bars()
    d = datasets.load_dataset("json", data_files=str(f), split="train", cache_dir=str(tmp_path / "cache"))
    assert {"prompt", "chosen", "rejected", "weight", "regret"} <= set(d.column_names) and d.num_rows > 0
    ex = d[0]
    assert [m["role"] for m in ex["prompt"]] == ["system", "user"]
    assert ex["chosen"][0]["role"] == ex["rejected"][0]["role"] == "assistant"
    assert json.loads(ex["chosen"][0]["content"])["action"] != json.loads(ex["rejected"][0]["content"])["action"]
    assert all(w >= 0 for w in d["weight"])
    rows = read_jsonl(tmp_path / "ann" / "pairs.jsonl")
    br = [
        r
        for r in rows
        if r["counterfactual_type"] == "rational_private" and r["rejected_legality"] == "ok" and r["diverges"]
    ]
    assert d.num_rows == len(br)  # one pair per best-response divergence turn
    # the prompt is re-rendered from the state: it is the prompt of that decision point
    assert ex["prompt"] == render_prompt(
        row_decision_point(
            next(r for r in br if (r["episode_id"], r["turn_idx"]) == (ex["episode_id"], ex["turn_idx"]))
        ),
        "table",
    )
    # defaults: no information-leaky type, on-policy rows only
    r = runner.invoke(
        root,
        [
            "pairs",
            "dpo",
            "--pairs",
            str(tmp_path / "ann"),
            "--type",
            "oracle_omniscient",
            "--policy-experiment",
            "scripted_vs_agents",
            "--out",
            str(tmp_path / "x.jsonl"),
        ],
    )
    assert r.exit_code == 2 and "information-leaky" in flat(r.output)
    r = runner.invoke(
        root,
        [
            "pairs",
            "dpo",
            "--pairs",
            str(tmp_path / "ann"),
            "--policy-experiment",
            "someone_else",
            "--out",
            str(tmp_path / "y.jsonl"),
        ],
    )
    assert r.exit_code == 2 and "no rational_private rows of experiment someone_else" in flat(r.output)


def test_play_model_seats_go_through_the_policy_registry(games, tmp_path, monkeypatch):
    "`--model` seats are built by `fairneg.llm.policies.make_policy` with the thinking mode and the protocol's largest cap."
    import fairneg.llm.policies

    made = []

    def fake_make_policy(spec, **kw):
        made.append((spec, kw))
        return RandomLegalPolicy(kw.get("name", spec))

    monkeypatch.setattr(fairneg.llm.policies, "make_policy", fake_make_policy)
    r = runner.invoke(
        play_app,
        [
            "--bank",
            str(games),
            "--model",
            "hf:/models/qwen",
            "--thinking",
            "--seats",
            "llm,bayes_rational,llm,passive_gate,llm",
            "--turn-max-tokens",
            "8192",
            "--out",
            str(tmp_path),
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    assert made == [("hf:/models/qwen", dict(name="hf:/models/qwen", thinking=True, max_new_tokens=8192))]
    states = read_jsonl(tmp_path / "states.jsonl")
    assert all(s["llm_seats"] == [0, 2, 4] and s["seats"][0] == "hf:/models/qwen" for s in states)
    assert all(s["cell"]["model_thinking"] == "on" and s["cell"]["max_new_tokens"] == 8192 for s in states)
    rows = annotate(read_states(tmp_path), ["rational_private"])["rows"]
    assert {r["policy"] for r in rows} == {"hf:/models/qwen"} and {r["model_thinking"] for r in rows} == {"on"}
    assert {r["turn_token_budget"] for r in rows} <= {8192} and {r["protocol_version"] for r in rows} == {
        "five-seat-uncapped-turn8192-v1"
    }
