"""Cross-module: tournaments written to disk, and the `fairneg soundness` gate from the command line."""
import json
from typer.testing import CliRunner
from fairneg.cli import app
from fairneg.game import generate_game
from fairneg.rollout import ScriptedPolicy, nbs_then_accept, run_tournament, read_jsonl

def _lowball(req):
    if req.dp["phase"] == "open": return json.dumps({"action": {"atype": "propose", "deal": "A1 B1 C1 D1 E1"}})
    return "I am not sure what to do."   # a parse error, retried, then a counted forced pass

def _campaigns(tmp_path):
    bank = [generate_game(s) for s in range(40000, 40006)]
    good, poor = tmp_path / "good", tmp_path / "poor"
    run_tournament(bank, "nbs", [0, 1], out=good, experiment_name="rational", progress=False,
                   extra_policies={"nbs": ScriptedPolicy(nbs_then_accept, "nbs")})
    run_tournament(bank, "lowball", [0, 1], out=poor, experiment_name="llm", progress=False,
                   extra_policies={"lowball": ScriptedPolicy(_lowball, "lowball")})
    return good, poor

def test_tournament_tables(tmp_path):
    good, poor = _campaigns(tmp_path)
    rows = read_jsonl(good / "episodes.jsonl")
    assert len(rows) == 12 and all(r["deal"] for r in rows)
    assert {"experiment_name", "instance_id", "episode_seed", "episode_id", "protocol_version", "seats", "nnw", "z"} <= set(rows[0])
    q = json.loads((poor / "quality_report.json").read_text())
    assert q["episodes_done"] == 12 and q["parse_ok_rate"] < 1 and q["forced_passes"] > 0
    trans = read_jsonl(poor / "rollout_transcripts.jsonl")
    assert any(t["legality"] == "parse_error" and t["retry"] for t in trans)

def test_soundness_cli(tmp_path):
    good, poor = _campaigns(tmp_path)
    out = tmp_path / "soundness.json"
    r = CliRunner().invoke(app, ["soundness", "--campaign", f"rational control={good}", "--campaign", f"all-LLM={poor}",
                                 "--expect-above", "rational control>all-LLM", "--out", str(out), "--b", "2000"])
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert res["passed"] and res["campaigns"]["rational control"]["lo"] > res["campaigns"]["all-LLM"]["hi"]
    r = CliRunner().invoke(app, ["soundness", "--campaign", f"a={poor}", "--campaign", f"b={good}",
                                 "--expect-above", "a>b", "--out", str(out), "--b", "500"])
    assert r.exit_code == 1 and "FAIL" in r.output
    assert json.loads(out.read_text())["passed"] is False
