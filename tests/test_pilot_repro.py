"""The pilot's numbers are the same on any machine from the same commit (issue #48): a reduced pilot, run twice by the
console script under two CPU kernel levels and thread counts set in the user's shell, writes the same eval.json, the
same training rows and adapters, the same pairs and DPO adapter. Every `fairneg` command runs pinned
(`fairneg.core.numerics`), whatever the shell says."""

import hashlib, json, os, subprocess, sys
from pathlib import Path

import pytest, yaml

from fairneg.core.store import STEP_MEASURED, read_jsonl

# A pilot small enough for a test: one GRPO arm (2 steps), the DPO control, primary and ultimatum cells.
PARAMS = dict(
    bank=dict(
        train=dict(n_games=2, seed_offset=40000, modes=["full", "private"], out="banks/train"),
        eval=dict(
            n=2, first_seed=41000, min_spread=0.2, modes=["full"], max_candidates=200, known_banks=[], out="banks/eval"
        ),
    ),
    geometry=dict(out="geometry.jsonl"),
    pilot=dict(
        run_dir="run", lams=[0.0], dpo_types=["rational_private"], ladder_conditions=[], pairs_games=1, pairs_seeds=1
    ),
    soundness=dict(games=2, seeds=1, required=False),
    train=dict(model="tiny-test", steps=2, groups=1, k=2, max_new_tokens=48, max_turns=3, checkpoint_steps=[2]),
    dpo=dict(steps=2, batch_size=2),
    eval=dict(cells=["primary", "ultimatum"], episodes=2),
    analysis=dict(B=200, min_games=2),
)
STAGES = [
    "train-bank",
    "eval-bank",
    "llmdel-geometry",
    "model",
    "soundness",
    "train",
    "pairs",
    "dpo",
    "eval",
    "analyze",
]
SHELLS = {
    "default-1": dict(ATEN_CPU_CAPABILITY="default", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1"),
    "avx2-2": dict(ATEN_CPU_CAPABILITY="avx2", OMP_NUM_THREADS="2", MKL_NUM_THREADS="2"),
}


def pilot(folder: Path, **env):
    "The reduced pilot, run by the console script in `folder` under the user's environment plus `env`."
    folder.mkdir(parents=True)
    (folder / "p.yaml").write_text(yaml.safe_dump(PARAMS))
    script = os.path.join(os.path.dirname(sys.executable), "fairneg")
    r = subprocess.run(
        [script, "pilot", "--params", "p.yaml", "--no-progress", "--only", *STAGES],
        cwd=folder,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    return folder / "run"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def computed(run: Path) -> dict:
    "What the run computed, without what says when or how long: eval.json, step rows, adapters, pairs."
    ev = json.loads((run / "eval.json").read_text())
    ev.pop("analyzed_at")
    steps = [
        {k: v for k, v in r.items() if k not in STEP_MEASURED}
        for p in sorted(run.glob("*/*/training_steps.jsonl"))
        for r in read_jsonl(p)
    ]
    weights = {str(p.relative_to(run)): sha(p) for p in sorted(run.glob("**/adapter_model.safetensors"))}
    return dict(eval=ev, steps=steps, weights=weights, pairs=sha(run / "pairs" / "pairs.jsonl"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    "The reduced pilot under each shell's settings."
    d = tmp_path_factory.mktemp("repro")
    return {name: pilot(d / name, **env) for name, env in SHELLS.items()}


def test_same_numbers_under_two_kernel_levels(runs):
    "Both runs computed the same eval.json, step rows, adapters (GRPO and DPO) and pairs."
    a, b = (computed(r) for r in runs.values())
    assert a["weights"] and len(a["steps"]) >= 2 and a["eval"]["cells"]
    for k in a:
        assert a[k] == b[k], k


def test_every_session_ran_pinned(runs):
    "Each run recorded its session pinned (torch's baseline kernels, two threads) on the locked venv, and its model is the pinned build."
    for run in runs.values():
        rows = read_jsonl(run / "provenance.jsonl")
        nm, lk = rows[-1]["numerics"], rows[-1]["lock"]
        assert nm["pinned"] and lk["matches"], (nm, lk)
        model = json.loads((run / "model.json").read_text())
        assert model["pinned"] and model["pinned_differences"] == [], model
        cells = [json.loads(p.read_text()) for p in sorted((run / "eval").glob("*/cell.json"))]
        assert cells and all(
            c["settings"]["max_turns"] == PARAMS["train"]["max_turns"] for c in cells if c["condition"] == "primary"
        ), cells
