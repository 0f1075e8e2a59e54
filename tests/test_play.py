"""End-to-end tests of `fairneg play` (the co-stepping tournament command of `fairneg.play.rollout`) with computable agents."""

import json, re

import pytest
from collections import Counter
from fairneg.engine.answers import parse_action
from typer.testing import CliRunner

from fairneg.play.agents import AGENT_NAMES
from fairneg.llm.policies import play_app
from fairneg.engine.bank import generate_bank
from fairneg.engine.game import generate_game, save_game
from fairneg.engine.metrics import METRIC_NAMES
from fairneg.engine.protocol import LENIENT_FIELDS

runner = CliRunner()


def flat(text):
    "Output text without the box typer may draw around errors."
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    d = tmp_path_factory.mktemp("bank")
    generate_bank(n_games=2, seed_offset=40700, modes=("full", "private"), out=d, progress=False)
    return d


def test_play_writes_and_appends_tables(bank, tmp_path):
    args = [
        "--bank",
        str(bank),
        "--seats",
        "bayes_rational",
        "--seeds",
        "0",
        "1",
        "--out",
        str(tmp_path),
        "--no-progress",
    ]
    r = runner.invoke(play_app, args)
    assert r.exit_code == 0, r.output
    assert "deal_rate" in r.output and "bayes_rational" in r.output
    eps, tr = rows(tmp_path / "episodes.jsonl"), rows(tmp_path / "rollout_transcripts.jsonl")
    assert len(eps) == 2 * 2 * 2  # 2 games × 2 modes × 2 seeds
    for e in eps:
        assert all(
            k in e
            for k in METRIC_NAMES
            + ("experiment_name", "instance_id", "episode_seed", "episode_id", "protocol_version", "seats")
        )
        assert e["seats"] == ["bayes_rational"] * 6 and e["experiment_name"] == "play__bayes_rational"
        assert e["illegal"] == e["fabrication"] == e["forced_passes"] == 0
        assert [e[f] for f in LENIENT_FIELDS] == [0] * len(LENIENT_FIELDS) and e["lenient_attempts_by_seat"] == [0] * 6
    assert len({(e["instance_id"], e["episode_seed"]) for e in eps}) == len(eps)
    assert len(tr) == sum(e["attempts"] for e in eps)
    assert all(t["legality"] == "ok" and t["raw"] and t["prompt_ref"].startswith(t["episode_id"]) for t in tr)
    assert [t["lenient"] for t in tr] == [{}] * len(tr)  # the agents answer in the exact format
    q = json.loads((tmp_path / "quality_report.json").read_text())
    assert (q["lenient_attempts"], q["strict_parse_ok_rate"], q["strict_legal_rate"]) == (0, 1, 1)
    assert "parse_ok 1.000 (0 read leniently)" in r.output
    r = runner.invoke(play_app, args[:5] + ["0", "1", "2"] + args[7:])  # more seeds: appended, only the new ones played
    assert r.exit_code == 0 and "holds 8 of these 12 episodes; playing the other 4" in r.output, r.output
    more = rows(tmp_path / "episodes.jsonl")
    assert len(more) == 12 and more[:8] == eps and len({(e["instance_id"], e["episode_seed"]) for e in more}) == 12
    assert json.loads((tmp_path / "quality_report.json").read_text())["episodes_done"] == 12
    r = runner.invoke(
        play_app, args + ["--experiment-name", "again"]
    )  # another cell into the folder: refused, nothing written
    assert r.exit_code == 2 and "holds another cell" in r.output
    assert rows(tmp_path / "episodes.jsonl") == more


def test_play_one_policy_per_seat_on_a_folder_of_games(tmp_path):
    games = tmp_path / "games"
    for s in (40710, 40711):
        save_game(generate_game(s, n_parties=5, info_mode="private"), games / f"g{s}.json")
    seats = ",".join(AGENT_NAMES[:5])
    r = runner.invoke(
        play_app, ["--bank", str(games), "--seats", seats, "--out", str(tmp_path / "out"), "--no-progress"]
    )
    assert r.exit_code == 0, r.output
    eps = rows(tmp_path / "out" / "episodes.jsonl")
    assert [e["seats"] for e in eps] == [list(AGENT_NAMES[:5])] * 2
    assert all(e["protocol_version"] == "five-seat-private-v1" for e in eps)


@pytest.mark.parametrize(
    "seats,message", [("nobody", "unknown seat policy nobody"), ("passive_gate,bayes_rational", "need one per party")]
)
def test_play_bad_seats(bank, tmp_path, seats, message):
    r = runner.invoke(play_app, ["--bank", str(bank), "--seats", seats, "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert message in flat(r.output)
    assert not (tmp_path / "episodes.jsonl").exists()


def test_play_small_model_with_and_without_the_constraint(bank, tmp_path):
    "`--model tiny-test` seats everybody; `--constrain legal` makes every answer legal, `none` leaves fabrications possible."
    pytest.importorskip("torch")
    quality = {}
    for c in ("legal", "none"):
        r = runner.invoke(
            play_app,
            [
                "--bank",
                str(bank),
                "--model",
                "tiny-test",
                "--constrain",
                c,
                "--seeds",
                "0",
                "--max-turns",
                "4",
                "--out",
                str(tmp_path / c),
                "--no-progress",
            ],
        )
        assert r.exit_code == 0, r.output
        quality[c] = json.loads((tmp_path / c / "quality_report.json").read_text())
    assert (
        quality["legal"]["illegal"] == quality["legal"]["fabrication"] == 0 and quality["legal"]["parse_ok_rate"] == 1
    )
    assert (
        quality["legal"]["lenient_attempts"] == 0 and quality["legal"]["strict_legal_rate"] == 1
    )  # the grammar is the exact format
    # unconstrained: the quality report must say what the transcripts show, and each transcript's verdict must agree with
    # an independent re-read of its raw text (parse_action), turn by turn
    tr = rows(tmp_path / "none" / "rollout_transcripts.jsonl")
    q, tally = quality["none"], Counter(t["legality"] for t in tr)
    assert q["attempts"] == len(tr) > 0 and set(tally) <= {"ok", "parse_error", "illegal", "fabrication"}, tally
    assert (q["illegal"], q["fabrication"]) == (tally["illegal"], tally["fabrication"])
    assert q["parse_ok_rate"] == pytest.approx(1 - tally["parse_error"] / len(tr))
    assert q["legal_rate"] == pytest.approx(tally["ok"] / len(tr))
    assert all((parse_action(t["raw"])["action"] is None) == (t["legality"] == "parse_error") for t in tr), [
        (t["legality"], t["raw"][:80])
        for t in tr
        if (parse_action(t["raw"])["action"] is None) != (t["legality"] == "parse_error")
    ]
    r = runner.invoke(
        play_app, ["--bank", str(bank), "--model", "tiny-test", "--constrain", "maybe", "--out", str(tmp_path / "x")]
    )
    assert r.exit_code == 2 and "legal or none" in flat(r.output)
