"""bench/gpu_check.sh, the prepared check for a lent GPU machine, run end to end as `dry-run` on this CPU (issue #33): in a
venv that holds only packages of the device image (bench/gpu_image_packages.txt) plus the carried wheels, installed
as on the device, every stage must pass on tiny shapes. The first build of that venv (.gpu-env/, git-ignored) and of
the Python 3.11 wheels (.whl-3.11/) takes about 2.5 minutes; later runs reuse them (about 1.5 minutes)."""
import json, os, re, shutil, subprocess
from pathlib import Path
import pytest
from conftest import ROOT, need

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("gpu_check")]   # one worker: the second test reads the first's venv
SCRIPT = ROOT / "bench" / "gpu_check.sh"
STAGES = ("imports", "decode", "llm", "grpo")

def _numbers(d:dict, *keys:str):
    for k in keys: assert isinstance(d.get(k), (int, float)) and d[k] == d[k], (k, d.get(k))   # a number, not NaN

def test_dry_run(tmp_path):
    "The dry run exits 0, the image env check passes, every stage exits 0 and writes its figures."
    need("python3.11 (the dry run's stand-in for the image's Python 3.12)", shutil.which("python3.11") is not None)
    out = tmp_path / "out"
    p = subprocess.run(["bash", str(SCRIPT), "dry-run"], cwd=ROOT, env=dict(os.environ, OUT=str(out)),
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    summary = (out / "summary.txt").read_text()
    assert re.search(r"^image-env check: pass \(\d+ distributions, all in bench/gpu_image_packages.txt", summary, re.M), summary
    rows = {m[1]: (int(m[2]), int(m[3]), int(m[4])) for m in re.finditer(r"^(\w+) (\d+) (\d+) (\d+)$", summary, re.M)}
    assert set(STAGES) <= set(rows), summary
    for name in STAGES:
        rc, secs, limit = rows[name]
        assert rc == 0 and secs <= limit, (name, rows[name], summary)
    dec = json.loads((out / "decode.json").read_text())
    assert [(r["batch"], r["decode"]) for r in dec["rows"]] == [(b, d) for b in (32, 1, 8, 128) for d in ("dynamic", "graphed")]
    for r in dec["rows"]: _numbers(r, "ms_per_step", "forward_ms_per_step", "tok_per_s", "prefill_s", "warmup_s")
    assert dec["target"] == "not judged"                 # on a CPU: no bandwidth bound
    assert "rollouts decode: graphed" in summary          # the GRPO stage decodes as the decode stage showed it can
    llm = json.loads((out / "llm.json").read_text())
    _numbers(llm, "speedup"); assert llm["identical"] is True
    for r in llm["runs"].values(): _numbers(r, "wall_s", "tok_per_s", "tokens", "steps")
    grpo = json.loads((out / "grpo.json").read_text())
    _numbers(grpo, "median_step_s", "median_rollout_s", "median_ref_s", "median_update_s", "wall_s")
    assert len(grpo["rows"]) == 3
    steps = [json.loads(l) for l in (out / "grpo_steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3]
    for s in steps: _numbers(s, "rollout_s", "ref_s", "train_s", "total_s", "grad_norm"); assert s["nonfinite"] is None
    log = (out / "log.txt").read_text()
    assert "imports: all" in log and "Traceback" not in log, log[-3000:]
    assert len(list(out.iterdir())) <= 8          # a device call brings back at most 8 files from $OUT

def test_env_check_names_offenders(tmp_path):
    "The image env check fails, naming them, when the venv holds distributions the image's list lacks."
    venv = ROOT / ".gpu-env" / "venv"
    need("the dry run's venv (test_dry_run builds it)", (venv / "bin" / "python").exists())
    lock = ["flock", str(ROOT / ".gpu-env" / ".lock")]                 # never while a dry run is building the venv
    have = json.loads(subprocess.run(lock + [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
                                     capture_output=True, text=True, check=True).stdout)
    listed = (ROOT / "bench" / "gpu_image_packages.txt").read_text().splitlines()
    norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
    drop = sorted({norm(d["name"]) for d in have} & set(listed) - {"torch"})[:2]     # two the venv holds
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(l for l in listed if l not in drop) + "\n")
    p = subprocess.run(lock + ["bash", str(SCRIPT), "check-env", str(venv)], cwd=ROOT, env=dict(os.environ, GPU_IMAGE_LIST=str(lst)),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL: 2 of" in p.stdout and all(re.search(rf"{n} \d", p.stdout) for n in drop), (drop, p.stdout)
    ok = subprocess.run(lock + ["bash", str(SCRIPT), "check-env", str(venv)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and "image-env check: pass" in ok.stdout, ok.stdout + ok.stderr
