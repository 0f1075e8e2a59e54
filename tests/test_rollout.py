"""Cross-module: tournaments written to disk, and the `fairneg soundness` gate from the command line."""

import json
from collections import Counter, defaultdict
from typer.testing import CliRunner
from fairneg.cli import app
from fairneg.engine.game import generate_game
from fairneg.engine.protocol import LENIENT, LENIENT_FIELDS
from fairneg.play.rollout import ScriptedPolicy, nbs_then_accept, run_tournament
from fairneg.engine.settings import PlaySettings
from fairneg.core.store import read_jsonl


def _lowball(req):
    if req.dp.phase == "open":
        return json.dumps({"action": {"atype": "propose", "deal": "A1 B1 C1 D1 E1"}})
    return "I am not sure what to do."  # a parse error, retried, then a counted forced pass


def _campaigns(tmp_path):
    bank = [generate_game(s) for s in range(40000, 40006)]
    good, poor = tmp_path / "good", tmp_path / "poor"
    run_tournament(
        bank,
        "nbs",
        [0, 1],
        out=good,
        experiment_name="rational",
        progress=False,
        extra_policies={"nbs": ScriptedPolicy(nbs_then_accept, "nbs")},
    )
    run_tournament(
        bank,
        "lowball",
        [0, 1],
        out=poor,
        experiment_name="llm",
        progress=False,
        extra_policies={"lowball": ScriptedPolicy(_lowball, "lowball")},
    )
    return good, poor


def test_tournament_tables(tmp_path):
    good, poor = _campaigns(tmp_path)
    rows = read_jsonl(good / "episodes.jsonl")
    assert len(rows) == 12 and all(r["deal"] for r in rows)
    assert {
        "experiment_name",
        "instance_id",
        "episode_seed",
        "episode_id",
        "protocol_version",
        "seats",
        "nnw",
        "z",
    } <= set(rows[0])
    q = json.loads((poor / "quality_report.json").read_text())
    assert q["episodes_done"] == 12 and q["parse_ok_rate"] < 1 and q["forced_passes"] > 0
    trans = read_jsonl(poor / "rollout_transcripts.jsonl")
    assert any(t["legality"] == "parse_error" and t["retry"] for t in trans)


def test_soundness_cli(tmp_path):
    good, poor = _campaigns(tmp_path)
    out = tmp_path / "soundness.json"
    r = CliRunner().invoke(
        app,
        [
            "soundness",
            "--campaign",
            f"rational control={good}",
            "--campaign",
            f"all-LLM={poor}",
            "--expect-above",
            "rational control>all-LLM",
            "--out",
            str(out),
            "--b",
            "2000",
        ],
    )
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert res["passed"] and res["campaigns"]["rational control"]["lo"] > res["campaigns"]["all-LLM"]["hi"]
    r = CliRunner().invoke(
        app,
        [
            "soundness",
            "--campaign",
            f"a={poor}",
            "--campaign",
            f"b={good}",
            "--expect-above",
            "a>b",
            "--out",
            str(out),
            "--b",
            "500",
        ],
    )
    assert r.exit_code == 1 and "FAIL" in r.output
    assert json.loads(out.read_text())["passed"] is False


class Sloppy:
    "`nbs_then_accept`, answered loosely; logs per (episode, seat) each lenient reading it put in, without the parser."

    name = "sloppy"

    def __init__(self):
        self.log, self.calls = defaultdict(Counter), 0

    def answer(self, req):
        a = json.loads(nbs_then_accept(req))["action"]
        c = self.log[(req.dp.episode_id, req.dp.seat)]
        if a["atype"] == "propose":  # a flat action with a lower-case, comma-separated deal
            c.update(flat_action=1, deal_normalised=1, answers=1)
            return json.dumps({**a, "deal": a["deal"].lower().replace(" ", ",")})
        if a["atype"] == "accept":  # "Accept", offer id as "#3", two actions (the first set aside)
            c.update(atype_normalised=1, offer_id_normalised=1, multiple_actions=1, text_around_json=1, answers=1)
            return (
                json.dumps({"action": {"atype": "pass"}})
                + "\n"
                + json.dumps({"action": {**a, "atype": "Accept", "offer_id": "#" + a["offer_id"][1:]}})
            )
        if a["atype"] == "vote":  # `type`, no offer id, `for`, single quotes
            c.update(type_for_atype=1, vote_ballot_implied=1, vote_synonym=1, json_repaired=1, answers=1)
            return "{'action': {'type': 'vote', 'vote': 'for'}}"
        return json.dumps({"scratchpad": "", "message": None, "action": a})  # a pass, in the exact format

    def act_batch(self, requests):
        self.calls += 1
        return [{"text": self.answer(r)} for r in requests]


def test_lenient_totals_are_the_sum_of_turn_records(tmp_path):
    "Row totals = the sum over transcript rows = what the policy put in its answers; the strict seat and the passes count 0."
    bank = [generate_game(s) for s in range(40000, 40004)]
    pol = Sloppy()
    run_tournament(
        bank,
        ["nbs"] + ["sloppy"] * 5,
        [0, 1],
        out=tmp_path,
        experiment_name="sloppy",
        progress=False,
        play=PlaySettings(max_turns=2),
        extra_policies={"nbs": ScriptedPolicy(nbs_then_accept, "nbs"), "sloppy": pol},
    )
    rows, trans = read_jsonl(tmp_path / "episodes.jsonl"), read_jsonl(tmp_path / "rollout_transcripts.jsonl")
    assert len(rows) == 8 and {r["end_reason"] for r in rows} == {"vote_passed"}
    for r in rows:
        mine = [t for t in trans if t["episode_id"] == r["episode_id"]]
        logged = sum((pol.log[(r["episode_id"], i)] for i in range(6)), Counter())
        for k in LENIENT:
            assert r[f"lenient_{k}"] == sum(t["lenient"].get(k, 0) for t in mine) == logged[k], k
        assert r["lenient_attempts"] == r["lenient_ok"] == sum(1 for t in mine if t["lenient"]) == logged["answers"]
        assert r["lenient_attempts_by_seat"] == [pol.log[(r["episode_id"], i)]["answers"] for i in range(6)]
        assert r["lenient_attempts_by_seat"][0] == 0 and all(t["lenient"] == {} for t in mine if t["seat"] == 0)
        assert all(t["lenient"] == {} for t in mine if t["action"]["atype"] == "pass")
        assert set(LENIENT_FIELDS) <= set(r)
    q = json.loads((tmp_path / "quality_report.json").read_text())
    n = sum(c["answers"] for c in pol.log.values())
    assert n > 0 and q["parse_ok_rate"] == 1 and q["lenient_attempts"] == q["lenient_ok"] == n
    assert q["strict_parse_ok_rate"] == q["strict_legal_rate"] == (q["attempts"] - n) / q["attempts"]
    assert q["lenient"] == {k: sum(c[k] for c in pol.log.values()) for k in LENIENT}
    assert q["lenient_unrecorded_episodes"] == 0


def test_strict_answers_count_no_leniency(tmp_path):
    good, _ = _campaigns(tmp_path)
    rows, trans = read_jsonl(good / "episodes.jsonl"), read_jsonl(good / "rollout_transcripts.jsonl")
    assert all(r[f] == 0 for r in rows for f in LENIENT_FIELDS) and all(
        r["lenient_attempts_by_seat"] == [0] * 6 for r in rows
    )
    assert [t["lenient"] for t in trans] == [{}] * sum(r["attempts"] for r in rows)
    q = json.loads((good / "quality_report.json").read_text())
    assert q["lenient_attempts"] == 0 and q["strict_parse_ok_rate"] == q["parse_ok_rate"] == 1
