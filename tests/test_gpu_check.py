"""bench/gpu_check.sh, the prepared check for a lent GPU machine, run end to end as `dry-run` on this CPU (issues #33, #51):
in a venv that holds only packages of the device image (bench/gpu_image_packages.txt, itself checked against KINDS.md)
plus the carried wheels, installed as on the device, every stage runs in order at a small shape under the device's limits
scaled by one factor. The first build of that venv (.gpu-env/) and of the 3.11 wheels (.whl-3.11/) takes minutes;
later runs reuse them (about 30 s on 2 cores, stages forked from a runner that imported the libraries once)."""

import json, os, re, shutil, subprocess
from pathlib import Path
import pytest
from conftest import ROOT, need

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("gpu_check"),
]  # one worker: the second test reads the first's venv
SCRIPT = ROOT / "bench" / "gpu_check.sh"
STAGES = ("probe", "grpo", "decode", "update", "llm")  # in the order of what they settle (issue #51)


def _numbers(d: dict, *keys: str):
    for k in keys:
        assert isinstance(d.get(k), (int, float)) and d[k] == d[k], (k, d.get(k))  # a number, not NaN


def test_dry_run(tmp_path):
    "The dry run exits 0, both list checks pass, every stage runs in order within its scaled limit and writes its figures."
    need("python3.11 (the dry run's stand-in for the image's Python 3.12)", shutil.which("python3.11") is not None)
    out = tmp_path / "out"
    p = subprocess.run(
        ["bash", str(SCRIPT), "dry-run"],
        cwd=ROOT,
        env=dict(os.environ, OUT=str(out)),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    summary = (out / "summary.txt").read_text()
    assert re.search(
        r"^image-env check: pass \(\d+ distributions, all in bench/gpu_image_packages.txt", summary, re.M
    ), summary
    if Path("/work/.library/device/KINDS.md").exists():
        assert re.search(r"^image-list check: pass \(\d+ names, as KINDS.md has them\)", summary, re.M), summary
    rows = [(m[1], int(m[2]), int(m[3]), int(m[4])) for m in re.finditer(r"^(\w+) (\d+) (\d+) (\d+)$", summary, re.M)]
    assert [r[0] for r in rows] == list(STAGES), summary  # every stage ran, in this order
    for name, rc, secs, limit in rows:
        assert rc == 0 and secs <= limit, (name, rc, secs, limit, summary)
    budget = int(re.search(r"stages: \d+ s of the (\d+) s budget", (out / "log.txt").read_text())[1])
    assert budget <= 205 and sum(r[2] for r in rows) <= budget, (
        summary
    )  # the device's 410 s at the dry run's scale (0.5)
    pa = json.loads((out / "pass.json").read_text())
    assert pa["imports"]["failed"] == {} and pa["imports"]["modules"] > 30
    pad = pa["padding"]
    assert pad["done"] and [(r["padding"], r["checkpointing"]) for r in pad["passes"]] == [
        ("right", False),
        ("left", False),
        ("right", True),
        ("left", True),
    ]
    for r in pad["passes"]:
        _numbers(r, "loss", "grad_norm", "seconds")
        assert (
            r["all_lora_grads_finite"]
            and r["lora_grads_nonfinite"] == 0
            and r["lora_grads_with_grad"] == r["lora_grads"] > 0
        )
        assert r["nonfinite_logprobs"] == 0 and any("scaled_dot_product" in o for o in r["attention_ops"]), r
    assert min(pad["micro_batch"]["lengths"]) < max(pad["micro_batch"]["lengths"])  # rows of different lengths: padded
    grpo = json.loads((out / "grpo.json").read_text())
    assert (
        grpo["partial"] is False
        and grpo["decode"]["used"] == grpo["decode"]["requested"] == "dynamic"
        and grpo["checkpointing_why"].startswith("off")
    )
    assert [s["step"] for s in grpo["rows"]] == [1, 2]
    for s in grpo["rows"]:
        _numbers(s, "rollout_s", "ref_s", "train_s", "total_s", "grad_norm", "nonfinite_tokens", "rss_mb")
        assert s["nonfinite"] is None and "mfu" in s and "gradient_checkpointing" in s
    dec = json.loads((out / "decode.json").read_text())
    assert dec["lora"] and [(r["batch"], r["decode"]) for r in dec["rows"]] == [(32, "dynamic"), (32, "graphed")]
    for r in dec["rows"]:
        _numbers(r, "ms_per_step", "forward_ms_per_step", "tok_per_s", "prefill_s", "warmup_s", "first_call_s")
    _numbers(dec["rows"][1], "x_dynamic")
    assert [c["batch"] for c in dec["calls"]] == [32, 8, 16, 32] and all("error" not in c for c in dec["calls"])
    assert dec["calls"][0]["recompiles"] == 0 and dec["calls"][1]["recompiles"] >= 1  # a second call: none; a new width
    assert dec["ids_drawn"] > 0 and dec["ids_past_vocab"] == 0
    assert dec["target"] == "not judged"  # on a CPU: no bandwidth bound
    assert "Recompiling function" in (out / "torch_logs.txt").read_text()  # TORCH_LOGS captured to its file
    up = pa["update"]
    assert up["done"] and [r["checkpointing"] for r in up["runs"]] == [True, False, True, False]
    for r in up["runs"]:
        _numbers(r, "seconds", "grad_norm")
        assert "error" not in r and r["nonfinite"] is None
    _numbers(up, "on_s", "off_s", "speedup_off")
    L, A = up["micro_batch"]["len"], up["micro_batch"]["answer"]  # the shape the GRPO stage's rows gave
    rows_ = grpo["rows"]
    assert L == round(sum(s["train_tokens"] for s in rows_) / sum(s["train_sequences"] for s in rows_))
    assert A == round(sum(s["tokens_trained"] for s in rows_) / sum(s["samples"] for s in rows_))
    llm = json.loads((out / "llm.json").read_text())
    _numbers(llm, "speedup")
    assert llm["identical"] is True
    for r in llm["runs"].values():
        _numbers(r, "wall_s", "tok_per_s", "tokens", "steps")
    assert "vllm: skipped" in summary
    log = (out / "log.txt").read_text()
    assert "imports: all" in log and "Traceback" not in log, log[-3000:]
    assert len(list(out.iterdir())) <= 8  # a device call brings back at most 8 files from $OUT


def test_list_drift_fails(tmp_path):
    "The dry run fails, before any stage, when the image's list drifts from KINDS.md's."
    kinds = Path("/work/.library/device/KINDS.md")
    need("the workplace's KINDS.md", kinds.exists())
    listed = [
        l for l in (ROOT / "bench" / "gpu_image_packages.txt").read_text().splitlines() if l and not l.startswith("#")
    ]
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(l for l in listed if l != "einops") + "\nnot-on-the-image\n")
    out = tmp_path / "out"
    p = subprocess.run(
        ["bash", str(SCRIPT), "dry-run"],
        cwd=ROOT,
        env=dict(os.environ, OUT=str(out), GPU_IMAGE_LIST=str(lst)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    summary = (out / "summary.txt").read_text()
    assert "image-list check: FAIL" in summary and "einops" in summary and "not-on-the-image" in summary, summary
    assert not re.search(r"^probe ", summary, re.M)  # no stage ran


def test_env_check_names_offenders(tmp_path):
    "The image env check fails, naming them, when the venv holds distributions the image's list lacks."
    venv = ROOT / ".gpu-env" / "venv"
    need("the dry run's venv (test_dry_run builds it)", (venv / "bin" / "python").exists())
    lock = ["flock", str(ROOT / ".gpu-env" / ".lock")]  # never while a dry run is building the venv
    have = json.loads(
        subprocess.run(
            lock + [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    listed = (ROOT / "bench" / "gpu_image_packages.txt").read_text().splitlines()
    norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
    drop = sorted({norm(d["name"]) for d in have} & set(listed) - {"torch"})[:2]  # two the venv holds
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(l for l in listed if l not in drop) + "\n")
    p = subprocess.run(
        lock + ["bash", str(SCRIPT), "check-env", str(venv)],
        cwd=ROOT,
        env=dict(os.environ, GPU_IMAGE_LIST=str(lst)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL: 2 of" in p.stdout and all(re.search(rf"{n} \d", p.stdout) for n in drop), (drop, p.stdout)
    ok = subprocess.run(
        lock + ["bash", str(SCRIPT), "check-env", str(venv)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert ok.returncode == 0 and "image-env check: pass" in ok.stdout, ok.stdout + ok.stderr
