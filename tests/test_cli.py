"""End-to-end tests of the `fairneg` command line: the console script in subprocesses, and typer's CliRunner."""

import json, os, shutil, subprocess, sys
from pathlib import Path

import pytest, typer, yaml
from typer.testing import CliRunner

from fairneg.engine.bank import GUARD, MANIFEST, REJECTIONS, check_bank, read_manifest
from fairneg.cli import app
from fairneg.engine.game import generate_game, llmdel_games_dir, load_game, save_game
from fairneg.engine.geometry import solve
from fairneg.core.store import read_jsonl

runner = CliRunner()
BASE = llmdel_games_dir() / "base"
N = 3  # base games in the small banks


def fairneg(*args, cwd=None):
    "Run the installed `fairneg` console script (or `python -m fairneg.cli` when there is none)."
    script = Path(sys.executable).parent / "fairneg"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "fairneg.cli"]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def banks(tmp_path_factory):
    "A training bank made by the console script with `--modes full private`, and a held-out bank guarded against it."
    d = tmp_path_factory.mktemp("banks")
    r = fairneg(
        "bank",
        "generate",
        "--n-games",
        N,
        "--seed-offset",
        40000,
        "--modes",
        "full",
        "private",
        "--out",
        d / "train",
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    r = fairneg(
        "bank",
        "eval",
        "--out",
        d / "eval",
        "--n",
        N,
        "--first-seed",
        41000,
        "--known-bank",
        d / "train",
        "--known-bank",
        "@llm_deliberation",
        "--min-spread",
        0.3,
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    return d


VERBS = [
    [],
    ["bank"],
    ["bank", "generate"],
    ["bank", "import"],
    ["bank", "eval"],
    ["bank", "check"],
    ["geometry"],
    ["pilot"],
]


@pytest.mark.parametrize("verb", VERBS, ids=lambda v: " ".join(v) or "fairneg")
def test_help_every_verb(verb):
    r = runner.invoke(app, verb + ["--help"])
    assert r.exit_code == 0, r.output
    assert "Usage" in r.stdout


def test_help_console_script_lists_verbs():
    r = fairneg("--help")
    assert r.returncode == 0, r.stderr
    assert all(v in r.stdout for v in ["bank", "geometry", "pilot"])
    m = subprocess.run([sys.executable, "-m", "fairneg.cli", "bank", "--help"], capture_output=True, text=True)
    assert m.returncode == 0 and all(v in m.stdout for v in ["generate", "import", "eval", "check"])


def test_every_command_runs_pinned():
    "Every group of the command tree is a CliGroup, so every command it resolves takes the numerics pin when it runs."
    import typer
    from fairneg.core.commands import CliGroup

    root = typer.main.get_command(app)
    todo, groups = [root], []
    while todo:
        g = todo.pop()
        groups.append(g)
        ctx = g.make_context("fairneg", ["--help"], resilient_parsing=True)
        todo += [c for n in g.list_commands(ctx) if hasattr(c := g.get_command(ctx, n), "list_commands")]
    assert len(groups) >= 7 and not [g.name for g in groups if not isinstance(g, CliGroup)]


def _stop_here():
    raise typer.Exit(42)


@pytest.mark.parametrize(
    "argv",
    [
        ["play", "--bank", "nowhere"],  # the play group's default command
        ["play", "merge", "--chunks", "a", "--out", "b"],
        ["eval", "analyze", "--out", "x.json", "--run-dir", "y"],
        ["soundness", "--campaign", "a=b", "--expect-above", "a>b", "--out", "o.json"],  # a one-command verb
        ["dpo", "train", "--pairs", "p", "--out", "o"],
        ["geometry", "game.json"],
        ["pilot"],
    ],
)
def test_a_command_pins_before_it_computes(argv):
    "The console script's hook (the numerics pin) runs once a command's flags are read, before its body."
    from fairneg.core.commands import BEFORE_RUN

    assert CliRunner().invoke(app, argv, obj={BEFORE_RUN: _stop_here}).exit_code == 42
    assert CliRunner().invoke(app, [*argv, "--help"], obj={BEFORE_RUN: _stop_here}).exit_code == 0  # help: no pin


# imported where they are used, never on the way to a command's help (issue #52: the front door under a second)
HEAVY = (
    "torch",
    "transformers",
    "peft",
    "trl",
    "vllm",
    "xgrammar",
    "datasets",
    "accelerate",
    "altair",
    "vl_convert",
    "scipy",
    "pandas",
    "papermill",
    "submitit",
    "wandb",
    "IPython",
)


def test_every_command_module_loads_without_heavy_libraries():
    "Every module the CLI mounts (and the CLI itself) imports none of HEAVY: each costs from a tenth of a second to seconds."
    code = (
        "import json, sys; from fairneg.cli import SUBAPPS\n"
        "for load, _ in SUBAPPS.values(): load()\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [], f"imported on the way to a command: {r.stdout}"


def test_flag_help_reads_what_docments_reads():
    "`class_comments` (each class's own lines parsed) gives every config field of every command the comment fastcore's docments gives."
    import dataclasses
    from fastcore.docments import docments
    from fairneg.cli import SUBAPPS
    from fairneg.core.commands import class_comments

    for load, _ in SUBAPPS.values():
        load()
    mods = {m for n, m in sys.modules.items() if n.startswith("fairneg.") and m is not None}
    classes = {
        c
        for m in mods
        for c in vars(m).values()
        if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__.startswith("fairneg")
    }
    classes |= {b for c in classes for b in c.__mro__ if dataclasses.is_dataclass(b)}
    ws = lambda d: {k: v and " ".join(v.split()) for k, v in d.items() if k != "return"}
    fields = 0
    for c in sorted(classes, key=lambda c: (c.__module__, c.__qualname__)):
        mine = class_comments(c)
        assert set(mine) == set(vars(c).get("__annotations__", {})), c  # every field of its own body
        assert ws(mine) == {k: v for k, v in ws(docments(c)).items() if k in mine}, c
        fields += len(mine)
    assert len(classes) >= 10 and fields >= 100, (len(classes), fields)  # GRPOConfig, DPOTrainConfig, PlaySettings, ...


def test_generate_modes_after_one_flag(banks):
    rows = read_manifest(banks / "train")
    assert len(rows) == 2 * N
    assert [r["id"] for r in rows[:2]] == ["gen-40000-full", "gen-40000-private"]
    assert [r["info_mode"] for r in rows] == ["full", "private"] * N
    assert all((banks / "train" / r["file"]).is_file() for r in rows)
    assert rows[0]["solution_fp"] == rows[1]["solution_fp"] and rows[0]["sheet_fp"] != rows[1]["sheet_fp"]


def test_generate_repeated_flag_is_the_same_bank(banks, tmp_path):
    r = runner.invoke(
        app,
        [
            "bank",
            "generate",
            "--n-games",
            str(N),
            "--modes",
            "full",
            "--modes",
            "private",
            "--out",
            str(tmp_path / "again"),
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "again" / MANIFEST).read_bytes() == (banks / "train" / MANIFEST).read_bytes()


def test_eval_bank_is_disjoint_and_logs_rejections(banks):
    rows = read_manifest(banks / "eval")
    assert len(rows) == N and all(r["info_mode"] == "full" and r["nnw_spread"] >= 0.3 for r in rows)
    train = read_manifest(banks / "train")
    for fp in ("sheet_fp", "solution_fp"):
        assert not {r[fp] for r in rows} & {r[fp] for r in train}
    assert check_bank(banks / "eval", [banks / "train", "@llm_deliberation"]) == []
    rej = [json.loads(l) for l in (banks / "eval" / REJECTIONS).read_text().splitlines()]
    assert rej and all(r["reason"] and r["details"] for r in rej)
    seeds = sorted([r["seed"] for r in rows] + [r["seed"] for r in rej])
    assert seeds == list(range(41000, 41000 + len(seeds)))
    assert json.loads((banks / "eval" / GUARD).read_text())["n_accepted"] == N


def test_eval_rejects_a_planted_training_game(banks, tmp_path):
    "A held-out bank drawn from the training seeds collides with every candidate and gives up with a clear error."
    r = fairneg(
        "bank",
        "eval",
        "--out",
        tmp_path / "ev",
        "--n",
        1,
        "--first-seed",
        40000,
        "--known-bank",
        banks / "train",
        "--min-spread",
        0,
        "--max-candidates",
        N,
        "--no-progress",
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "max-candidates limit" in r.stderr
    rej = [json.loads(l) for l in (tmp_path / "ev" / REJECTIONS).read_text().splitlines()]
    assert [x["reason"] for x in rej] == ["collision_known"] * N


def test_check_json_against_itself_and_a_copy(banks, tmp_path):
    r = fairneg("bank", "check", banks / "train", "--known-bank", banks / "train", "--json")
    assert r.returncode == 1
    hits = [json.loads(l) for l in r.stdout.splitlines()]
    assert len(hits) == 2 * N * 2 + 2 * N  # each game with itself on both fingerprints, with its twin on solution_fp
    assert set(hits[0]) >= {"game", "known_bank", "known_game", "fingerprint", "value"}
    assert {h["fingerprint"] for h in hits} == {"sheet_fp", "solution_fp"}
    shutil.copytree(banks / "train", tmp_path / "copy")
    r = runner.invoke(app, ["bank", "check", str(tmp_path / "copy"), "--known-bank", str(banks / "train"), "--json"])
    assert r.exit_code == 1 and len(r.stdout.splitlines()) == len(hits)
    r = runner.invoke(app, ["bank", "check", str(tmp_path / "copy"), "--known-bank", str(banks / "train")])
    assert r.exit_code == 1 and "collision(s)" in r.stdout


def test_check_no_collisions_exit_0(banks):
    r = fairneg(
        "bank", "check", banks / "eval", "--known-bank", banks / "train", "--known-bank", "@llm_deliberation", "--json"
    )
    assert (r.returncode, r.stdout) == (0, "")
    r = runner.invoke(app, ["bank", "check", str(banks / "eval"), "--known-bank", str(banks / "train")])
    assert r.exit_code == 0 and "no collisions" in r.stdout


def test_import(tmp_path):
    save_game(generate_game(7), tmp_path / "g7.json")
    r = fairneg("bank", "import", llmdel_games_dir() / "game1", tmp_path / "g7.json", "--out", tmp_path / "imp")
    assert r.returncode == 0, r.stderr
    rows = read_manifest(tmp_path / "imp")
    assert [x["id"] for x in rows] == ["llmdel-game1", "gen-7"]
    assert [x["source"] for x in rows] == ["llm_deliberation", "generator"]


def test_geometry_json_llmdel_base():
    r = fairneg("geometry", BASE, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    geo = solve(load_game(BASE))
    assert s["n_deals"] == 720 and s["n_parties"] == 6
    assert s["nbs"] == geo.label(geo.nbs) and s["ks"] == geo.label(geo.ks)
    assert s["n_ir"] == int(geo.ir.sum()) and s["sheet_fp"] == geo.sheet_fp and s["solution_fp"] == geo.solution_fp
    r = runner.invoke(app, ["geometry", str(BASE)])
    assert r.exit_code == 0 and s["nbs"] in r.stdout


def test_geometry_broken_files(tmp_path):
    d = json.loads(save_game(generate_game(1), tmp_path / "ok.json").read_text())
    d["scores"][2] = d["scores"][2][:-1]
    (tmp_path / "ragged.json").write_text(json.dumps(d))
    r = fairneg("geometry", tmp_path / "ragged.json", "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert "ragged.json" in r.stderr and "field `scores[2]`" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "syntax.json").write_text('{"name": "x",')
    r = fairneg("geometry", tmp_path / "syntax.json")
    assert (
        r.returncode == 2 and "syntax.json: field `<json>`: not valid JSON" in r.stderr and "Traceback" not in r.stderr
    )


def test_pilot_resumes(tmp_path):
    p = dict(
        bank=dict(
            train=dict(n_games=2, seed_offset=40000, modes=["full", "private"], out="banks/train"),
            eval=dict(
                n=2,
                first_seed=41000,
                min_spread=0.2,
                modes=["full"],
                max_candidates=100,
                known_banks=["@llm_deliberation"],
                out="banks/eval",
            ),
        ),
        geometry=dict(out="geometry.jsonl"),
        pilot=dict(run_dir="run"),
    )
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(p))
    args = ("pilot", "--params", "p.yaml", "--only", "train-bank", "eval-bank", "llmdel-geometry", "--no-progress")
    r = fairneg(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("running") == 3 and "llmdel-game3" in (tmp_path / "geometry.jsonl").read_text()
    assert len(read_manifest(tmp_path / "banks/train")) == 4 and len(read_manifest(tmp_path / "banks/eval")) == 2
    r = fairneg(*args, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.count("skipped") == 3


# Files that cannot be read (issue #12): every file the CLI reads gives one `error: <file>: ...` line, exit code 2.
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00"  # a PNG header: byte 0x89 at offset 0 is not UTF-8


def assert_one_line_error(r, *names, code=2):
    "A clean user error: exit `code`, nothing on stdout, one `error: ...` line on stderr naming each of `names`, no traceback."
    assert "Traceback" not in r.stderr, r.stderr
    assert (r.returncode, r.stdout) == (code, ""), (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert all(str(n) in lines[0] for n in names), r.stderr


def test_binary_game_files(tmp_path):
    (tmp_path / "game.json").write_bytes(BINARY)
    assert_one_line_error(
        fairneg("geometry", tmp_path / "game.json", "--json"),
        tmp_path / "game.json",
        "field `<file>`: not UTF-8 text (byte 0x89 at offset 0)",
    )
    shutil.copytree(BASE, tmp_path / "llmdel")
    (tmp_path / "llmdel" / "scores_files" / "DoT.txt").write_bytes(b"10,20\n" + BINARY)
    assert_one_line_error(
        fairneg("geometry", tmp_path / "llmdel"), "llmdel/scores_files/DoT.txt", "(byte 0x89 at offset 6)"
    )
    assert_one_line_error(
        fairneg("bank", "import", tmp_path / "llmdel", "--out", tmp_path / "imp"), "DoT.txt", "not UTF-8 text"
    )
    assert not (tmp_path / "imp").exists()


def test_binary_manifest(banks, tmp_path):
    shutil.copytree(banks / "train", tmp_path / "bank")
    (tmp_path / "bank" / MANIFEST).write_bytes(BINARY)
    assert_one_line_error(
        fairneg("bank", "check", tmp_path / "bank", "--json"), tmp_path / "bank" / MANIFEST, "not UTF-8 text"
    )
    assert_one_line_error(
        fairneg("bank", "eval", "--out", tmp_path / "ev", "--n", 1, "--known-bank", tmp_path / "bank", "--no-progress"),
        tmp_path / "bank" / MANIFEST,
        "not UTF-8 text (byte 0x89 at offset 0)",
    )


def test_binary_params_and_prereg(tmp_path):
    (tmp_path / "p.yaml").write_bytes(b"bank:\n  out: \xff\xfe\n")
    assert_one_line_error(
        fairneg("pilot", "--params", "p.yaml", "--no-progress", cwd=tmp_path),
        "p.yaml: not UTF-8 text (byte 0xff at offset 13)",
    )
    (tmp_path / "p.yaml").write_text("bank: [1, 2\n")  # PyYAML's message spans lines; the error is still one line
    assert_one_line_error(
        fairneg("pilot", "--params", tmp_path / "p.yaml", "--no-progress"),
        tmp_path / "p.yaml",
        "not valid YAML",
        "(line 2, column 1)",
    )
    (tmp_path / "prereg.yaml").write_bytes(BINARY)
    assert_one_line_error(
        fairneg("eval", "gate", tmp_path / "prereg.yaml", tmp_path / "eval.json"),
        tmp_path / "prereg.yaml",
        "not UTF-8 text (byte 0x89 at offset 0)",
    )


def test_binary_episodes_jsonl(tmp_path):
    "store.episode_rows(f, EvalError) / eval.load_episodes -> json_lines(f, EvalError)"
    for side in ("base", "trained"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "episodes.jsonl").write_bytes(BINARY)
    assert_one_line_error(
        fairneg(
            "eval",
            "analyze",
            "--out",
            tmp_path / "eval.json",
            "--baseline",
            tmp_path / "base",
            "--trained",
            f"x_full={tmp_path / 'trained'}",
        ),
        tmp_path / "base" / "episodes.jsonl",
        "not UTF-8 text (byte 0x89 at offset 0)",
    )


def test_binary_adapter_config(tmp_path):
    "policies.parse_policy -> bank.adapter_config(p, PolicyError)"
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "adapter_config.json").write_bytes(BINARY)
    assert_one_line_error(
        fairneg(
            "eval",
            "launch",
            "--checkpoint",
            f"x={tmp_path / 'ckpt'}",
            "--out-dir",
            tmp_path / "L",
            "--bank",
            "@llm_deliberation",
            "--no-progress",
        ),
        tmp_path / "ckpt" / "adapter_config.json",
        "not UTF-8 text (byte 0x89 at offset 0)",
    )
    (tmp_path / "ckpt" / "adapter_config.json").write_text('{"r": 8,')
    assert_one_line_error(
        fairneg(
            "eval",
            "launch",
            "--checkpoint",
            f"x={tmp_path / 'ckpt'}",
            "--out-dir",
            tmp_path / "L",
            "--bank",
            "@llm_deliberation",
            "--no-progress",
        ),
        tmp_path / "ckpt" / "adapter_config.json",
        "not valid JSON",
    )


def test_binary_eval_json_and_cell_json(tmp_path):
    "eval gate's eval.json and analyze --run-dir's cell.json, binary: one line naming the file"
    pre = Path(__file__).resolve().parents[1] / "params" / "prereg-pilot.yaml"
    (tmp_path / "eval.json").write_bytes(BINARY)
    assert_one_line_error(
        fairneg("eval", "gate", pre, tmp_path / "eval.json"),
        tmp_path / "eval.json",
        "not UTF-8 text (byte 0x89 at offset 0)",
    )
    (tmp_path / "run" / "c_primary").mkdir(parents=True)
    (tmp_path / "run" / "c_primary" / "cell.json").write_bytes(BINARY)
    assert_one_line_error(
        fairneg("eval", "analyze", "--run-dir", tmp_path / "run", "--out", tmp_path / "e.json"),
        tmp_path / "run" / "c_primary" / "cell.json",
        "not UTF-8 text (byte 0x89 at offset 0)",
    )


def test_binary_train_params(tmp_path):
    "grpo.make_config: store.load_config -> read_yaml(path, <an error in USER_ERRORS>), and train() not re-wrapping it as typer.BadParameter"
    (tmp_path / "t.yaml").write_bytes(BINARY)
    assert_one_line_error(
        fairneg("train", "--params", tmp_path / "t.yaml", "--steps", 1),
        tmp_path / "t.yaml",
        "not UTF-8 text (byte 0x89 at offset 0)",
    )
    (tmp_path / "t.yaml").write_text("train:\n  stepz: 3\n")
    assert_one_line_error(
        fairneg("train", "--params", tmp_path / "t.yaml", "--steps", 1),
        tmp_path / "t.yaml",
        "unknown training parameter `stepz` (did you mean `steps`?)",
    )


def test_pilot_force_retrains(tmp_path):
    "`--force` trains a finished GRPO arm again from step 1 (it used to resume from the last checkpoint: nothing to do)."
    p = dict(
        bank=dict(
            train=dict(n_games=1, seed_offset=40000, modes=["full"], out="banks/train"),
            eval=dict(
                n=1,
                first_seed=41000,
                min_spread=0.2,
                modes=["full"],
                max_candidates=100,
                known_banks=[],
                out="banks/eval",
            ),
        ),
        geometry=dict(out="geometry.jsonl"),
        train=dict(model="tiny-test", steps=1, groups=1, k=2, max_new_tokens=48, max_turns=3, checkpoint_steps=[1]),
        pilot=dict(run_dir="run", lams=[0.0]),
    )
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(p))
    args = ("pilot", "--params", "p.yaml", "--only", "train-bank", "train", "--no-progress")
    r = fairneg(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    arm = tmp_path / "run" / "train" / "lam0"
    assert (arm / "checkpoint-1" / "trainer_state.json").exists() and len(read_jsonl(arm / "training_steps.jsonl")) == 1
    (arm / "left-behind").write_text("from the first run")
    r = fairneg(*args, cwd=tmp_path)  # done: skipped, nothing touched
    assert r.returncode == 0 and "[train-lam0] skipped" in r.stdout and (arm / "left-behind").exists()
    r = fairneg("pilot", "--params", "p.yaml", "--only", "train", "--force", "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "[train-lam0] running" in r.stdout and not (arm / "left-behind").exists()  # the arm's folder started over
    rows = read_jsonl(arm / "training_steps.jsonl")
    assert [x["step"] for x in rows] == [1]  # trained again from step 1: one row, not a resumed run's appended ones


def test_output_into_a_closed_pipe_stops_quietly(tmp_path):
    # `fairneg bank eval --help | head -40` once wrote a crash log ("a bug in fairneg", exit code 4): the reader had gone
    # while the help was still being written. A command whose output meets a closed pipe now stops with 141 (the shell's
    # code for SIGPIPE), saying nothing. (A pipe closed before the first write is click's own case: it exits 1.)
    code = (
        "import typer; from fairneg.core.commands import CliGroup\n"
        "app = typer.Typer(cls=CliGroup)\n"
        "@app.command()\n"
        "def talk(): raise BrokenPipeError(32, 'Broken pipe')\n"
        "@app.command()\n"
        "def other(): pass\n"
        "app(['talk'])\n"
    )
    env = dict(os.environ, FAIRNEG_CRASH_DIR=str(tmp_path / "crashes"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert (p.returncode, p.stderr, (tmp_path / "crashes").exists()) == (141, "", False)
