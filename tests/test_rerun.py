"""Every subcommand that writes, run twice with the same arguments (issue #35): the second run finds its work done
(exit 0, it says so or writes the same result) and no table holds a key twice; run again with other work into the
same folder, it refuses in one line unless told to start over (`--force`), which replaces the old work whole."""

import json, os, signal, subprocess, sys, time
from pathlib import Path
import pytest
from typer.testing import CliRunner
from fairneg.cli import app
from fairneg.core.store import read_jsonl, duplicate_keys

ROOT = Path(__file__).resolve().parents[1]


def invoke(*argv):
    return CliRunner().invoke(app, [str(a) for a in argv], prog_name="fairneg")


def tree(d: Path) -> dict:
    "Every file under `d` with its bytes' size and modification time."
    return {
        str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(d.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("rerun")
    old = os.getcwd()
    os.chdir(d)
    prereg = (ROOT / "params" / "prereg-pilot.yaml").read_text()
    assert "  B: 10000\n" in prereg
    Path("prereg.yaml").write_text(prereg.replace("  B: 10000\n", "  B: 100\n"))  # the analysis below draws 100
    try:
        yield d
    finally:
        os.chdir(old)


RUNS = [  # (id, argv, what the second run says (None: the same output written again), files that must not change)
    (
        "bank-generate",
        ["bank", "generate", "--out", "b", "--n-games", "2", "--modes", "full", "--no-progress"],
        "already holds these 2 games",
        ["b"],
    ),
    ("bank-import", ["bank", "import", "@llm_deliberation", "--out", "ib"], "already holds these 6 games", ["ib"]),
    (
        "bank-eval",
        ["bank", "eval", "--out", "eb", "--n", "1", "--known-bank", "b", "--no-progress"],
        "already holds these 1 games",
        ["eb"],
    ),
    (
        "play-run",
        ["play", "--bank", "b", "--seats", "random-legal", "--seeds", "0", "1", "--out", "cellA", "--no-progress"],
        "already holds all 4 episodes of this cell; nothing played",
        ["cellA"],
    ),
    (
        "play-run-chunk",
        [
            "play",
            "--bank",
            "b",
            "--seats",
            "passive_gate",
            "--seeds",
            "0",
            "--out",
            "c0",
            "--experiment-name",
            "pg",
            "--no-progress",
        ],
        "already holds all 2 episodes",
        ["c0"],
    ),
    (
        "play-run-chunk2",
        [
            "play",
            "--bank",
            "b",
            "--seats",
            "passive_gate",
            "--seeds",
            "1",
            "--out",
            "c1",
            "--experiment-name",
            "pg",
            "--no-progress",
        ],
        "already holds all 2 episodes",
        ["c1"],
    ),
    (
        "play-merge",
        ["play", "merge", "--chunks", "c0", "c1", "--out", "m"],
        "already holds every episode of these chunks",
        ["m"],
    ),
    (
        "soundness",
        [
            "soundness",
            "--campaign",
            "a=cellA",
            "--campaign",
            "b=m",
            "--expect-above",
            "b>a",
            "--out",
            "s.json",
            "--b",
            "100",
        ],
        None,
        [],
    ),
    (
        "eval-launch",
        [
            "eval",
            "launch",
            "--checkpoint",
            "ga=agent:greedy_anchor",
            "--base",
            "agent:passive_gate",
            "--bank",
            "b",
            "--cells",
            "primary",
            "--episodes",
            "1",
            "--out-dir",
            "ev",
        ],
        "complete already",
        ["ev"],
    ),
    ("eval-analyze", ["eval", "analyze", "--run-dir", "ev", "--out", "ea/eval.json", "--b", "100"], None, []),
    ("eval-gate", ["eval", "gate", "prereg.yaml", "ea/eval.json", "--out", "gate.json"], None, []),
    (
        "pairs-annotate",
        ["pairs", "annotate", "--episodes", "cellA", "--out", "pa", "--types", "rational_private", "--workers", "1"],
        "already holds the rows of this annotation",
        ["pa"],
    ),
    (
        "pairs-package",
        ["pairs", "package", "--run", "A=pa", "--out", "pk"],
        "already holds every row of these runs",
        ["pk"],
    ),
    ("pairs-dpo", ["pairs", "dpo", "--pairs", "pa", "--out", "dp.jsonl", "--all-experiments"], None, []),
]


def test_every_command_twice(work):
    "The cases build on each other's folders, so one test runs them in order (pytest-xdist would split parametrized cases)."
    for case, argv, says, kept in RUNS:
        run_twice(case, work, argv, says, kept)


def run_twice(case, work, argv, says, kept):
    first = invoke(*argv)
    assert first.exit_code in (0, 1, 3), (
        case,
        first.exit_code,
        first.output,
    )  # 1, 3: a verdict (soundness FAIL, gate NEGATIVE or VOID)
    before = {k: tree(work / k) for k in kept}
    outs = [a for a in argv if str(a).endswith((".json", ".jsonl", ".html"))]
    texts = {o: Path(o).read_text() for o in outs if Path(o).is_file() and not o.endswith(".html")}
    again = invoke(*argv)
    assert again.exit_code == first.exit_code, (case, again.exit_code, again.output)
    if says:
        assert says in again.output, (case, again.output)
    for k in kept:
        assert tree(work / k) == before[k], f"{k} changed on the second run"
    for o, t in texts.items():
        if o.endswith("eval.json"):
            t, now = json.loads(t), json.loads(Path(o).read_text())
            t.pop("analyzed_at")
            now.pop("analyzed_at")
        else:
            now = Path(o).read_text()
        assert now == t, f"{o}: another result on the same input"
    for f in work.rglob("episodes.jsonl"):
        assert duplicate_keys(read_jsonl(f)) == {}, f


def test_other_work_refused_then_forced(work):
    "Other work into a folder that holds a run: refused in one line, nothing changed; with --force, replaced whole."
    if not Path("b").exists():
        invoke("bank", "generate", "--out", "b", "--n-games", "2", "--modes", "full", "--no-progress")
    before = tree(work / "b")
    r = invoke("bank", "generate", "--out", "b", "--n-games", "1", "--modes", "full", "--no-progress")
    assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1 and "holds another bank" in r.stderr, r.output
    assert tree(work / "b") == before
    r = invoke("bank", "generate", "--out", "b", "--n-games", "1", "--modes", "full", "--no-progress", "--force")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (work / "b").iterdir()) == ["gen-40000-full.json", "manifest.jsonl"]  # no stale game
    assert not list(work.glob("b.new-*")) and not list(work.glob("b.old-*"))


def fairneg_cmd() -> list:
    "The console script (else the module) of this venv."
    script = Path(sys.executable).parent / "fairneg"
    return [str(script)] if script.exists() else [sys.executable, "-m", "fairneg.cli"]


def keys(cell: Path) -> list:
    return [(r["instance_id"], r["episode_seed"]) for r in read_jsonl(cell / "episodes.jsonl")]


def test_interrupted_play_keeps_its_episodes_and_resumes(tmp_path):
    "Ctrl-C mid-cell (issue #50): exit 130, every finished episode kept and counted, and the same command plays the rest."
    b, cell = tmp_path / "b", tmp_path / "cell"
    assert invoke("bank", "generate", "--out", b, "--n-games", "1", "--modes", "full", "--no-progress").exit_code == 0
    n = 1000  # ~7 s of play at width 1: time to interrupt it
    argv = [
        "play",
        "--bank",
        b,
        "--seats",
        "random-legal",
        "--seeds",
        *range(n),
        "--width",
        "1",
        "--out",
        cell,
        "--no-progress",
    ]
    # Ctrl-C's default action, as in a shell: a pytest-xdist worker ignores SIGINT, and a child would inherit that
    p = subprocess.Popen(
        [*fairneg_cmd(), *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    rows = cell / "episodes.jsonl"
    for _ in range(30000):  # until an episode is written (at most 10 minutes)
        if p.poll() is not None or (rows.is_file() and rows.read_text().count("\n") >= 1):
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (p.returncode, out, err)
    kept = keys(cell)
    assert 1 <= len(kept) < n and duplicate_keys(read_jsonl(rows)) == {}
    assert json.loads((cell / "quality_report.json").read_text())["episodes_done"] == len(kept)
    r = invoke(*argv)  # the same command, again
    assert (
        r.exit_code == 0 and f"holds {len(kept)} of these {n} episodes; playing the other {n - len(kept)}" in r.output
    )
    assert sorted(keys(cell)) == sorted(("gen-40000-full", s) for s in range(n))


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device every write to fails: disk full)")
def test_a_full_disk_is_a_user_error_and_the_cell_resumes(tmp_path):
    "A disk that fills mid-play (issue #50): one line naming the file, exit 2; the folder readable; resumed once room is made."
    b, cell = tmp_path / "b", tmp_path / "cell"
    assert invoke("bank", "generate", "--out", b, "--n-games", "1", "--modes", "full", "--no-progress").exit_code == 0
    argv = ["play", "--bank", b, "--seats", "passive_gate", "--out", cell, "--no-progress", "--seeds"]
    assert invoke(*argv, 0).exit_code == 0
    t = cell / "rollout_transcripts.jsonl"
    saved = t.read_bytes()
    t.unlink()
    t.symlink_to("/dev/full")  # from here on, the disk is full
    r = invoke(*argv, 0, 1)
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {t}: cannot write: the disk is full"), r.output
    assert "Traceback" not in r.output and keys(cell) == [("gen-40000-full", 0)]  # readable: what was there
    t.unlink()
    t.write_bytes(saved)  # room again
    r = invoke(*argv, 0, 1)
    assert r.exit_code == 0 and "holds 1 of these 2 episodes; playing the other 1" in r.output, r.output
    assert sorted(keys(cell)) == [("gen-40000-full", 0), ("gen-40000-full", 1)]
    assert json.loads((cell / "quality_report.json").read_text())["episodes_done"] == 2
