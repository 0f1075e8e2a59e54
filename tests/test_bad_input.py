"""Every subcommand given bad input (issue #35): one line `error: <where>: <what>` on stderr naming the file, flag or
field, exit code 2, no traceback, no crash log, and nothing written or changed in the working folder."""

import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest
from typer.testing import CliRunner
from fairneg.cli import app
from fairneg.engine.bank import generate_bank
from fairneg.engine.game import game_to_dict, generate_game

ROOT = Path(__file__).resolve().parents[1]
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def invoke(argv):
    return CliRunner().invoke(app, [str(a) for a in argv], prog_name="fairneg")


def snapshot(d: Path) -> dict:
    "Every file and folder under `d`, with its size and modification time: what a failed command must leave as it was."
    return {
        str(p.relative_to(d)): (p.is_dir(), p.stat().st_size if p.is_file() else 0, p.stat().st_mtime_ns)
        for p in sorted(d.rglob("*"))
    }


def _game_file(path, **change):
    d = game_to_dict(generate_game(40000))
    d.update(change)
    Path(path).write_text(json.dumps(d))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    "A working folder with a bank, two campaign cells, an eval cell and its analysis, and broken files of every kind."
    d = tmp_path_factory.mktemp("badinput")
    old = os.getcwd()
    os.chdir(d)
    try:
        generate_bank(1, 40000, ("full",), "b", progress=False)
        for cell, seats in (("cellA", "greedy_anchor"), ("cellB", "passive_gate")):
            r = invoke(["play", "--bank", "b", "--seats", seats, "--seeds", "0", "1", "--out", cell, "--no-progress"])
            assert r.exit_code == 0, r.output
        shutil.copytree("cellA", "cellDup")
        Path("cellDup/episodes.jsonl").write_text(Path("cellA/episodes.jsonl").read_text() * 2)  # every episode twice
        r = invoke(
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
            ]
        )
        assert r.exit_code == 0, r.output
        r = invoke(["eval", "analyze", "--run-dir", "ev", "--out", "evout/eval.json", "--b", "200", "--min-games", "2"])
        assert r.exit_code == 0, r.output
        Path("run").mkdir()
        shutil.copy("evout/eval.json", "run/eval.json")  # a run folder (its eval results only)
        Path("notes").mkdir()
        Path("notes/mine.txt").write_text("a folder of other files\n")
        Path("afile").write_text("a file, not a folder\n")
        Path("bin").write_bytes(BINARY)
        Path("emptydir").mkdir()
        Path("emptybank").mkdir()
        Path("emptybank/manifest.jsonl").write_text("")
        _game_file("typo.json")
        t = json.loads(Path("typo.json").read_text())
        t["threshholds"] = t.pop("thresholds")
        Path("typo.json").write_text(json.dumps(t))
        _game_file("quorum.json", quorum="five")
        prereg = (ROOT / "params" / "prereg-pilot.yaml").read_text()
        Path("prereg.yaml").write_text(prereg)
        Path("prereg-typo.yaml").write_text(prereg + "threshholds: 1\n")
        assert "  level: 0.95\n" in prereg
        Path("prereg-B.yaml").write_text(prereg.replace("  level: 0.95\n", "  level: high\n"))
        Path("train-typo.yaml").write_text("train:\n  stepz: 3\n")
        Path("train-type.yaml").write_text("train:\n  steps: five\n")
        Path("eval-typo.yaml").write_text("eval:\n  episodez: 1\n")
        Path("pilot-typo.yaml").write_text("threshholds: 1\n")
        generate_bank(2, 40000, ("full",), "b2", progress=False)  # another bank: b's game and one more
        Path("bx").mkdir()  # b's game under its name, other numbers
        g = json.loads(next(Path("b").glob("*.json")).read_text())
        g["thresholds"] = [t + 1 for t in g["thresholds"]]
        Path("bx", f"{g['name']}.json").write_text(json.dumps(g))
        for run, row in (("trun", {"step": 1, "arm": "lam0"}), ("drun", {"step": 1})):  # runs, a user's file in each
            Path(run).mkdir()
            Path(run, "training_steps.jsonl").write_text(json.dumps(row) + "\n")
            Path(run, "mine.txt").write_text("a user's own file\n")
        yield d
    finally:
        os.chdir(old)


L = ["eval", "launch", "--base", "agent:passive_gate", "--bank", "b", "--cells", "primary", "--episodes", "1"]
S = ["soundness", "--campaign", "a=cellA", "--campaign", "b=cellB", "--out", "s.json", "--b", "50"]
P = ["play", "--bank", "b", "--seats", "greedy_anchor", "--no-progress"]

CASES = [  # (id, argv, what the one line must name)
    ("geometry-missing", ["geometry", "missing.json"], ["missing.json", "no such file or folder"]),
    ("provenance-option", ["provenance", "--yaml"], ["fairneg provenance", "--yaml"]),
    ("geometry-binary", ["geometry", "bin"], ["bin", "not UTF-8 text"]),
    ("geometry-misspelt-key", ["geometry", "typo.json"], ["typo.json", "`threshholds`", "did you mean `thresholds`?"]),
    (
        "geometry-type",
        ["geometry", "quorum.json"],
        ["quorum.json", "`quorum`", 'must be an integer or null, got a string ("five")'],
    ),
    ("geometry-no-such-game", ["geometry", "b", "--game", "nope"], ["--game", "no game `nope`"]),
    ("geometry-no-argument", ["geometry"], ["fairneg geometry", "Missing argument"]),
    (
        "bank-generate-out-file",
        ["bank", "generate", "--out", "afile", "--n-games", "1", "--no-progress"],
        ["afile", "is a file, not a folder"],
    ),
    (
        "bank-generate-other-bank",
        ["bank", "generate", "--out", "b", "--n-games", "2", "--modes", "full", "--no-progress"],
        ["b: holds another bank", "--force"],
    ),
    (
        "bank-generate-force-not-a-bank",
        ["bank", "generate", "--out", "notes", "--n-games", "1", "--force", "--no-progress"],
        ["notes: holds other files, not a bank"],
    ),
    (
        "bank-generate-zero",
        ["bank", "generate", "--out", "nb", "--n-games", "0"],
        ["n_games must be at least 1, got 0"],
    ),
    (
        "bank-generate-negative-seed",
        ["bank", "generate", "--out", "nb", "--n-games", "1", "--seed-offset", "-5"],
        ["seed_offset", "-5"],
    ),
    ("bank-generate-mode", ["bank", "generate", "--out", "nb", "--modes", "secret"], ["secret", "full, private"]),
    (
        "bank-generate-not-a-number",
        ["bank", "generate", "--out", "nb", "--n-games", "two"],
        ["fairneg bank generate", "--n-games"],
    ),
    ("bank-import-missing", ["bank", "import", "missing.json", "--out", "ib"], ["missing.json"]),
    ("bank-import-bad-game", ["bank", "import", "typo.json", "--out", "ib"], ["typo.json", "threshholds"]),
    ("bank-eval-out-file", ["bank", "eval", "--out", "afile", "--n", "1"], ["afile", "is a file"]),
    ("bank-eval-zero", ["bank", "eval", "--out", "ne", "--n", "0"], ["n must be at least 1"]),
    (
        "bank-eval-known-missing",
        ["bank", "eval", "--out", "ne", "--n", "1", "--known-bank", "missingbank", "--no-progress"],
        ["missingbank"],
    ),
    ("bank-check-missing", ["bank", "check", "missingbank"], ["missingbank"]),
    ("bank-check-empty-manifest", ["bank", "check", "emptybank"], ["emptybank", "holds no games"]),
    ("bank-check-unknown-flag", ["bank", "check", "b", "--bogus"], ["fairneg bank check", "No such option: --bogus"]),
    ("play-out-file", [*P, "--out", "afile"], ["afile", "is a file, not a folder"]),
    (
        "play-other-cell",
        ["play", "--bank", "b", "--seats", "bayes_rational", "--seeds", "0", "--out", "cellA", "--no-progress"],
        ["cellA: holds another cell", "seats ['greedy_anchor'] there, ['bayes_rational'] now", "--force"],
    ),
    (
        "play-force-not-a-cell",
        [*P, "--seeds", "0", "--out", "notes", "--force"],
        ["notes: holds other files, not a campaign cell"],
    ),
    (
        "play-unknown-seat",
        ["play", "--bank", "b", "--seats", "nobody", "--out", "p1"],
        ["--seats", "unknown seat policy nobody"],
    ),
    (
        "play-missing-bank",
        ["play", "--bank", "missingbank", "--seats", "greedy_anchor", "--out", "p1"],
        ["missingbank"],
    ),
    ("play-empty-bank", [*P[:2], "emptybank", *P[3:], "--out", "p1"], ["emptybank", "holds no games"]),
    ("play-seed-twice", [*P, "--seeds", "0", "0", "--out", "p1"], ["seeds 0 given more than once"]),
    ("play-width-zero", [*P, "--width", "0", "--out", "p1"], ["width must be at least 1"]),
    ("play-max-turns", [*P, "--max-turns", "-1", "--out", "p1"], ["max_turns", "-1"]),
    ("play-framing", [*P, "--framing", "bogus", "--out", "p1"], ["framing", "bogus"]),
    ("play-seeds-not-numbers", [*P, "--seeds", "x", "--out", "p1"], ["fairneg play run", "--seeds"]),
    ("play-merge-missing", ["play", "merge", "--chunks", "missing", "--out", "m"], ["missing", "not a cell folder"]),
    ("play-merge-twice", ["play", "merge", "--chunks", "cellA", "cellA", "--out", "m"], ["cellA", "more than once"]),
    (
        "play-merge-chunk-is-out",
        ["play", "merge", "--chunks", "cellA", "--out", "cellA"],
        ["cellA is both a chunk and the output"],
    ),
    ("play-merge-out-file", ["play", "merge", "--chunks", "cellA", "--out", "afile"], ["afile", "is a file"]),
    (
        "soundness-unknown-campaign",
        [*S, "--expect-above", "a>c"],
        ["--expect-above `a>c`", "names `c`", "campaigns: a, b"],
    ),
    ("soundness-not-an-order", [*S, "--expect-above", "a<b"], ["--expect-above `a<b`", "expected `A>B`"]),
    ("soundness-itself", [*S, "--expect-above", "a>a"], ["a>a", "with itself"]),
    ("soundness-no-resamples", [*S, "--expect-above", "a>b", "--b", "0"], ["--b", "at least 1 resample"]),
    (
        "play-another-bank",
        [*P[:2], "b2", *P[3:], "--seeds", "0", "1", "--out", "cellA"],
        ["cellA: holds the games of another bank (1 games there, 2 now; only now: gen-40001-full)", "--force"],
    ),
    (
        "play-other-numbers",
        [*P[:2], "bx", *P[3:], "--seeds", "0", "1", "--out", "cellA"],
        ["cellA: holds games of these names with other content (gen-40000-full: game_sha", "--force"],
    ),
    (
        "soundness-name-twice",
        ["soundness", "--campaign", "a=cellA", "--campaign", "a=cellB", "--expect-above", "a>b", "--out", "s.json"],
        ["--campaign", "a given more than once"],
    ),
    (
        "soundness-episode-twice",
        ["soundness", "--campaign", "a=cellDup", "--campaign", "b=cellB", "--expect-above", "a>b", "--out", "s.json"],
        ["cellDup/episodes.jsonl", "appear more than once"],
    ),
    (
        "soundness-out-folder",
        [*S[:5], "--out", "emptydir", "--expect-above", "a>b", "--b", "50"],
        ["emptydir", "is a folder"],
    ),
    (
        "eval-launch-other-cell",
        [*L, "--checkpoint", "ga=agent:bayes_rational", "--out-dir", "ev"],
        ["ga_primary: holds another cell", "--force"],
    ),
    (
        "eval-launch-other-numbers",
        [*L[:5], "bx", *L[6:], "--checkpoint", "ga=agent:greedy_anchor", "--out-dir", "ev"],
        ["ga_primary: holds another cell (game_shas of gen-40000-full differ", "--force"],
    ),
    (
        "eval-launch-out-file",
        [*L, "--checkpoint", "ga=agent:greedy_anchor", "--out-dir", "afile"],
        ["afile", "is a file"],
    ),
    (
        "eval-launch-condition",
        [*L[:6], "bogus", *L[7:], "--checkpoint", "ga=agent:greedy_anchor", "--out-dir", "ev2"],
        ["bogus"],
    ),
    (
        "eval-launch-params-key",
        [*L, "--params", "eval-typo.yaml", "--checkpoint", "ga=agent:greedy_anchor", "--out-dir", "ev2"],
        ["eval-typo.yaml", "`episodez`", "did you mean `episodes`?"],
    ),
    ("eval-analyze-missing", ["eval", "analyze", "--run-dir", "missingdir", "--out", "a.json"], ["missingdir"]),
    (
        "eval-analyze-level",
        ["eval", "analyze", "--run-dir", "ev", "--out", "a.json", "--level", "2", "--min-games", "2"],
        ["level", "between 0 and 1"],
    ),
    (
        "eval-analyze-out-folder",
        ["eval", "analyze", "--run-dir", "ev", "--out", "emptydir", "--b", "50", "--min-games", "2"],
        ["emptydir", "is a folder"],
    ),
    (
        "eval-gate-prereg-key",
        ["eval", "gate", "prereg-typo.yaml", "evout/eval.json"],
        ["prereg-typo.yaml", "`threshholds`"],
    ),
    (
        "eval-gate-prereg-type",
        ["eval", "gate", "prereg-B.yaml", "evout/eval.json"],
        ["prereg-B.yaml", "`level`", 'must be a number, got a string ("high")'],
    ),
    ("eval-gate-not-eval-json", ["eval", "gate", "prereg.yaml", "afile"], ["afile"]),
    ("eval-gate-missing-argument", ["eval", "gate", "prereg.yaml"], ["fairneg eval gate", "Missing argument"]),
    (
        "train-params-key",
        ["train", "--params", "train-typo.yaml", "--bank", "b", "--out", "t1"],
        ["train-typo.yaml", "`stepz`", "did you mean `steps`?"],
    ),
    (
        "train-params-type",
        ["train", "--params", "train-type.yaml", "--bank", "b", "--out", "t1"],
        ["train-type.yaml", "`steps`", "must be an integer"],
    ),
    ("train-out-file", ["train", "--bank", "b", "--out", "afile"], ["afile", "is a file"]),
    (
        "train-force-not-a-run",
        ["train", "--bank", "b", "--out", "notes", "--force"],
        ["notes: holds other files, not a run of arm"],
    ),
    ("train-missing-bank", ["train", "--bank", "NOPE", "--out", "t1"], ["NOPE", "no such file or folder"]),
    (
        "train-missing-model",
        ["train", "--bank", "b", "--model", "./nomodel", "--out", "t1"],
        ["./nomodel", "no such model folder"],
    ),
    # --force checks every input before it removes the run (and the user's file beside it)
    (
        "train-force-missing-bank",
        ["train", "--bank", "NOPE", "--out", "trun", "--force"],
        ["NOPE", "no such file or folder"],
    ),
    (
        "train-force-missing-model",
        ["train", "--bank", "b", "--model", "./nomodel", "--out", "trun", "--force"],
        ["./nomodel", "no such model folder"],
    ),
    ("train-lam", ["train", "--bank", "b", "--out", "t1", "--lam", "2"], ["lam", "2"]),
    (
        "pilot-params-key",
        ["pilot", "--params", "pilot-typo.yaml"],
        ["pilot-typo.yaml", "unknown section `threshholds`"],
    ),
    ("pilot-params-missing", ["pilot", "--params", "missing.yaml"], ["missing.yaml"]),
    (
        "pairs-annotate-missing",
        ["pairs", "annotate", "--episodes", "missing", "--out", "pa"],
        ["missing", "no states.jsonl"],
    ),
    ("pairs-package-missing", ["pairs", "package", "--run", "a=missing", "--out", "pk"], ["missing"]),
    (
        "pairs-package-name-twice",
        ["pairs", "package", "--run", "a=x", "--run", "a=y", "--out", "pk"],
        ["--run", "`a` given more than once"],
    ),
    ("pairs-dpo-missing", ["pairs", "dpo", "--pairs", "missing", "--out", "d.jsonl"], ["missing", "no pairs.jsonl"]),
    (
        "dpo-train-missing-pairs",
        ["dpo", "train", "--pairs", "missing", "--model", "tiny-test", "--out", "dt"],
        ["missing", "no pairs.jsonl"],
    ),
    (
        "dpo-train-force-not-a-run",
        ["dpo", "train", "--pairs", "missing", "--out", "notes", "--force"],
        ["notes: holds other files, not a DPO run"],
    ),
    (
        "dpo-train-force-missing-pairs",
        ["dpo", "train", "--pairs", "missing", "--model", "tiny-test", "--out", "drun", "--force"],
        ["missing", "no pairs.jsonl"],
    ),
    (
        "dpo-train-steps",
        ["dpo", "train", "--pairs", "missing", "--steps", "0", "--out", "dt"],
        ["steps must be at least 1"],
    ),
    ("model-build-tiny-out-file", ["model", "build-tiny", "--out", "afile", "--size", "test"], ["afile", "is a file"]),
    ("model-build-tiny-size", ["model", "build-tiny", "--size", "huge"], ["--size", "unknown size `huge`"]),
    ("model-eval-missing-bank", ["model", "eval", "--model", "tiny-test", "--bank", "missingbank"], ["missingbank"]),
    (
        "model-eval-width",
        ["model", "eval", "--model", "tiny-test", "--bank", "b", "--width", "0"],
        ["--width", "at least 1"],
    ),
    ("report-not-a-run", ["report", "emptydir"], ["emptydir", "not a run folder"]),
    ("report-missing", ["report", "missingdir"], ["missingdir", "no such run directory"]),
    ("report-out-not-html", ["report", "run", "--out", "r.txt"], ["r.txt", ".html"]),
    ("export-missing", ["export", "missingdir", "--out", "hub"], ["missingdir", "no such folder"]),
    (
        "export-no-checkpoint",
        ["export", "emptydir", "--out", "hub"],
        ["emptydir", "no checkpoint here or in its subfolders"],
    ),
]


def test_cases_cover_every_subcommand():
    "Every leaf command of `fairneg` has at least one bad-input case."
    import typer

    def leaves(cmd, path):
        sub = getattr(cmd, "commands", None)
        if sub is None:
            return [" ".join(path)]
        return [x for n in cmd.list_commands(None) for x in leaves(cmd.get_command(None, n), path + [n])]

    every = set(leaves(typer.main.get_command(app), []))
    named = lambda argv: (
        " ".join(argv[:2]) if " ".join(argv[:2]) in every else ("play run" if argv[0] == "play" else argv[0])
    )
    assert every - {named(a) for _, a, _ in CASES} == set()


@pytest.mark.parametrize("argv,names", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input(work, argv, names, monkeypatch, tmp_path):
    monkeypatch.chdir(work)
    monkeypatch.setenv("FAIRNEG_CRASH_DIR", str(tmp_path / "crashes"))
    before = snapshot(work)
    r = invoke(argv)
    lines = r.stderr.splitlines()
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.output and not (tmp_path / "crashes").exists(), r.output
    for n in names:
        assert n in lines[0], (n, lines[0])
    assert snapshot(work) == before, "the failed command wrote or changed files"


@pytest.mark.parametrize(
    "argv,bad",
    [
        (["train", "--bank", "NOPE", "--out", "trun", "--force"], "NOPE"),
        (["dpo", "train", "--pairs", "missing", "--out", "drun", "--force"], "missing"),
    ],
    ids=["train", "dpo-train"],
)
def test_force_with_a_bad_input_removes_nothing(work, argv, bad, monkeypatch):
    "`--force` with a bad input (issue #50): exit 2 naming it, and the run and a user's file in --out are still there."
    monkeypatch.chdir(work)
    out = Path(argv[argv.index("--out") + 1])
    before = snapshot(out)
    r = invoke(argv)
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {bad}"), (r.exit_code, r.output)
    assert (
        "removed" not in r.output
        and (out / "mine.txt").read_text() == "a user's own file\n"
        and snapshot(out) == before
    )


def test_readme_lists_the_exit_codes():
    "The README's table of exit codes is `EXIT_CODES`, row for row."
    from fairneg.core.commands import EXIT_CODES

    readme = (ROOT / "README.md").read_text()
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} | {meaning} |" in readme, code


def test_geometry_refuses_a_game_over_the_size_limit(tmp_path, monkeypatch):
    "A game over the size limit (issue #50): refused before enumerating, one line naming its size, the limit and the setting."
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAIRNEG_CRASH_DIR", str(tmp_path / "crashes"))
    monkeypatch.delenv("FAIRNEG_MAX_GAME_CELLS", raising=False)

    def game(n, m, o, tau):
        return dict(
            name=f"g{n}x{m}x{o}",
            parties=[f"p{i}" for i in range(n)],
            roles=["p1", "p2"] + ["player"] * (n - 2),
            issues=[f"I{k}" for k in range(m)],
            options=[[f"o{j}" for j in range(o)]] * m,
            scores=[[list(range(o))] * m] * n,
            thresholds=[tau] * n,
        )

    Path("big.json").write_text(json.dumps(game(8, 8, 6, 30)))  # 1,679,616 deals: 75 s, then it asked for 55 GiB
    before = snapshot(tmp_path)
    r = invoke(["geometry", "big.json"])
    lines = r.stderr.splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: big.json: "), (r.exit_code, r.output)
    for s in (
        "1,679,616 deals × 8 parties = 13,436,928 deal-party cells",
        "over the limit of 250,000",
        "MiB",
        "set the environment variable FAIRNEG_MAX_GAME_CELLS",
    ):
        assert s in lines[0], (s, lines[0])
    assert not (tmp_path / "crashes").exists() and snapshot(tmp_path) == before
    Path("mid.json").write_text(json.dumps(game(6, 6, 6, 28)))  # 279,936 cells, a few IR deals: over the limit
    assert invoke(["geometry", "mid.json"]).exit_code == 2
    monkeypatch.setenv("FAIRNEG_MAX_GAME_CELLS", "300000")  # the setting raises it
    r = invoke(["geometry", "mid.json"])
    assert r.exit_code == 0 and "46656 deals" in r.stdout, r.output


BUSY = [  # (folder another command holds, commands that write it)
    ("cellA", [[*P, "--seeds", "0", "1", "2", "--out", "cellA"], [*P, "--seeds", "0", "--out", "cellA", "--force"]]),
    ("b", [["bank", "generate", "--out", "b", "--n-games", "1", "--modes", "full", "--no-progress"]]),
    ("ev/ga_primary", [[*L, "--checkpoint", "ga=agent:greedy_anchor", "--out-dir", "ev"]]),
    ("runs/pilot", [["pilot", "--params", str(ROOT / "params" / "pilot-cpu.yaml"), "--only", "train-bank"]]),
    ("hub", [["export", "emptydir", "--out", "hub"]]),
    (
        "trun",
        [["train", "--bank", "b", "--out", "trun", "--resume"], ["train", "--bank", "b", "--out", "trun", "--force"]],
    ),
    ("drun", [["dpo", "train", "--pairs", "missing", "--out", "drun", "--force"]]),
]


@pytest.mark.parametrize("folder,commands", BUSY, ids=[b[0] for b in BUSY])
def test_a_second_writer_is_refused_at_once(work, folder, commands, monkeypatch, tmp_path):
    "A folder another command is writing (issue #50): refused before any work, one line naming the holder; nothing changes."
    monkeypatch.chdir(work)
    monkeypatch.setenv("FAIRNEG_CRASH_DIR", str(tmp_path / "crashes"))
    hold = (
        f"import time\nfrom fairneg.core.store import folder_lock\nwith folder_lock({folder!r}, 'the first writer'):\n"
        "    print('held', flush=True); time.sleep(120)"
    )
    holder = subprocess.Popen([sys.executable, "-c", hold], cwd=work, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = snapshot(work)
        for argv in commands:
            r = invoke(argv)
            assert r.exit_code == 2 and len(r.stderr.splitlines()) == 1, (argv, r.exit_code, r.output)
            assert r.stderr.startswith(
                f"error: {folder}: another command is writing it (`the first writer`, process {holder.pid} on "
            ), r.stderr
        assert snapshot(work) == before, "the refused command wrote or changed files"
    finally:
        holder.kill()
        holder.wait()
