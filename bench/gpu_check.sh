#!/usr/bin/env bash
# The project's prepared GPU check: one command for a session that is lent a device machine (an NVIDIA H200 whose image
# has Python 3.12, torch 2.11+cu130, transformers 5.17.0, peft 0.21.0, accelerate 1.15.0 ... and nothing fetched there;
# /work/.library/device/README.md: 15 minutes of device time, one command at most 10 minutes). Usage:
#
#   bash bench/gpu_check.sh wheels            # here, once: the wheels the image lacks (WHEELS) for Python 3.12 -> .whl (~11 MB)
#   run(command="bash bench/gpu_check.sh", carry=[".whl"], timeout_s=600)          # on the device: about 8 minutes
#   bash bench/gpu_check.sh dry-run           # here, on the CPU: the same stages, tiny shapes, in the image's package set
#   bash bench/gpu_check.sh image-env [DIR]   # build (or rebuild) the dry run's stand-in of the image (default .gpu-env/venv)
#   bash bench/gpu_check.sh check-env [DIR]   # only check that DIR's distributions are all in bench/gpu_image_packages.txt
#   PYVER=3.11 bash bench/gpu_check.sh wheels # the same WHEELS for this machine's Python 3.11 -> .whl-3.11 (dry-run does it)
#
# The dry run proves the script against the image's package set (issue #33: the first real run died at `import fastcore`).
# `image-env` makes a venv with python3.11, which stands in for the image's 3.12: no CPU torch for 3.12 is to be had
# here without a multi-GB download, while `pip install torch==2.13.0` takes this machine's local CPU build for 3.11. It
# installs torch==2.13.0 first, then IMAGE_PKGS under a torch==2.13.0 constraint (so pip never pulls a CUDA torch), and
# fails unless every distribution in it is one the image has (bench/gpu_image_packages.txt, copied from KINDS.md; pip,
# setuptools, wheel aside) and torch is the CPU build. `dry-run` builds that venv (.gpu-env/, reused while IMAGE_PKGS
# and the list are unchanged) and the 3.11 wheels (.whl-3.11/, reused while WHEELS is unchanged) when missing, installs
# the wheels with `pip install --no-index --no-deps --target` exactly as on the device, and runs every stage with that
# venv's python and PYTHONPATH=<repo>:<target>: nothing of the project's .venv is used.
#
# Stages, in this order, each under its own `timeout` (what it printed goes to $OUT/log.txt as it comes; a line
# "NAME EXIT SECONDS LIMIT" to $OUT/summary.txt as it ends; figures to $OUT/NAME.json, so a stage stopped by its limit
# keeps what it wrote). The device run fits in 8 minutes (BUDGET=470 s: no stage's limit runs past it; a stage with
# under 10 s left is skipped): setup (wheels installed, versions printed) ~25 s, then, expected on the H200 (limit):
#   imports  60 s  (~15 s) every fairneg module the GPU path can reach (all but report, pilot: altair and
#                  vl-convert, not carried), xgrammar, trl.trainer.utils, pynvml: a missing package fails here at once.
#   decode  150 s  (not yet measured: the stand-in ~21 s, the dynamic path ~10 s, the graphed path's compile and graph
#                  captures unknown) bench/bench_decode.py: writes the Qwen3-8B-shaped stand-in (random bf16 weights,
#                  8.19 B parameters, built on the GPU) to /tmp/fairneg-qwen3-8b-standin, then ms per decode step of
#                  fairneg.llm.sample_batch (no grammar, rows to their cap) at batch 32 (the target's, first), 1, 8, 128, 256-token prompts, 24 new
#                  tokens, dynamic (eager) and graphed (static cache, CUDA graphs) side by side, beside the bound bytes of
#                  the weights / 4.8e12 B/s (the H200's spec); a path that fails is reported and dropped.
#                  -> decode.json (rewritten after every row). The GRPO stage's rollouts decode graphed only if it ran.
#   llm      60 s  (~45 s) bench_llm --section costep on the stand-in: 3 episodes co-stepped (one act_batch per turn
#                  across episodes) against one at a time, 1 table turn, 16 new tokens unconstrained (random weights run
#                  every answer to its cap: ~300 decode steps at the 70-100 ms/step measured for HF decoding there on
#                  2026-12-04). -> llm.json
#   grpo    320 s  (what is left of the budget, ~250 s) bench_grpo_step --backend hf --context window on the
#                  stand-in, 4 groups x 8 episodes, --steps 3, 1 table turn, 64 new tokens, 16-character fields, answers
#                  under the legal-action grammar. A step there took 107 s rollout + 10 s reference + ~40 s update at a
#                  4-turn deadline (2026-12-04), so the third step may not finish in time: each finished step's row is
#                  in $OUT/grpo_steps.jsonl (copied from the run's training_steps.jsonl when the stage ends, even when
#                  stopped); grpo.json (medians, verdict) only when all steps finish. Last, so its overrun costs no other
#                  stage. -> grpo.json, grpo_steps.jsonl
#   vllm         only when vLLM imports: tests/test_vllm.py, then bench_grpo_step --backend vllm, in what is left of the 8
#                  minutes. The image has no vLLM and its wheel (336 MB for 0.33.0) is over the 64 MiB a call may carry,
#                  so here it reports "skipped".
# The dry run runs the same stages with the small stand-in (2 layers, float32): decode at prompts of 64 tokens, 8 new;
# grpo at 2 groups x 4 episodes, 3 steps; llm as on the device: about 1.5 minutes on 2 cores once .gpu-env/ and
# .whl-3.11/ are built (the first build: about 2.5 minutes more).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# What fairneg and the bench scripts need that the image lacks, pinned, found by the dry run (each ImportError there):
# fastcore (fairneg's modules import it at the top); trl (fairneg.llm's selective_log_softmax: trl.trainer.utils imports
# datasets, which imports dill, multiprocess and xxhash, xxhash being the image's); xgrammar (the legal-action grammar)
# with apache-tvm-ffi and pydantic (pydantic-core, annotated-types, typing-inspection); pettingzoo and gymnasium
# (fairneg.env; farama-notifications is gymnasium's declared need). Keep one version of each.
WHEELS="fastcore==2.2.41 trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xgrammar==0.2.9 apache-tvm-ffi==0.1.15.post2
pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 pettingzoo==1.27.0 gymnasium==1.4.0
farama-notifications==0.0.6"
WHEELS=$(echo $WHEELS)
# The image's packages that the dry run's venv installs (all of them in bench/gpu_image_packages.txt, with what pip
# pulls in for them): the versions the image has where KINDS.md gives them; typer and python-dateutil at the newest
# releases whose own needs lie in the image (typer 0.29 needs pydantic, python-dateutil 3 needs tzdata: the image has
# neither); xxhash for datasets; nvidia-ml-py for fairneg.telemetry's pynvml.
TORCH_PIN=torch==2.13.0
IMAGE_PKGS="transformers==5.17.0 peft==0.21.0 accelerate==1.15.0 huggingface-hub==1.33.0 safetensors==0.8.0 tokenizers==0.23.2
numpy scipy pandas pyarrow pyyaml tqdm typer==0.28.0 python-dateutil==2.9.0.post0 rich jinja2 psutil threadpoolctl xxhash
nvidia-ml-py filelock fsspec packaging"
IMAGE_PKGS=$(echo $IMAGE_PKGS)
LIST=${GPU_IMAGE_LIST:-bench/gpu_image_packages.txt}   # the image's packages (another list: tests/test_gpu_check.py)
GPU_ENV=${GPU_ENV:-.gpu-env}                       # the dry run's cache: $GPU_ENV/venv (git-ignored)
case $GPU_ENV in /*) ;; *) GPU_ENV=$ROOT/$GPU_ENV ;; esac
BUDGET=${BUDGET:-470}                              # seconds the device run may take in all (8 minutes, less a margin)

quiet() { "$@" 2>&1 | grep -v "is ignored: it is neither"; return "${PIPESTATUS[0]}"; }   # pip, less this machine's index noise
exclude() { local d; for d in "$@"; do grep -qx "/$d/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo "/$d/" >> .git/info/exclude; }; done; }

# wheels [PYVER]: WHEELS for CPython $PYVER on x86-64 Linux into .whl (3.12, the device's) or .whl-$PYVER (any other).
wheels() {
    local pyver=${PYVER:-3.12} dir=.whl tmp
    [ "$pyver" = 3.12 ] || dir=.whl-$pyver
    exclude "$dir"
    tmp=$(mktemp -d /tmp/gpu_check_whl.XXXX)
    quiet python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
        -d "$tmp" $WHEELS || { echo "wheels: pip could not fetch them all for Python $pyver"; rm -rf "$tmp"; return 1; }
    if [ "$(ls "$tmp"/*.whl 2>/dev/null | wc -l)" != "$(echo $WHEELS | wc -w)" ]; then
        echo "wheels: expected $(echo $WHEELS | wc -w) wheels for Python $pyver, got: $(ls "$tmp")"; rm -rf "$tmp"; return 1; fi
    check_wheel_needs "$tmp" "$pyver" || { rm -rf "$tmp"; return 1; }
    rm -rf "$dir"; mkdir -p "$dir"; mv "$tmp"/*.whl "$dir"/; rm -rf "$tmp"; echo "$WHEELS" > "$dir/WHEELS"
    ls "$dir"
    echo "wheels for Python $pyver in $dir: $(du -cb "$dir"/*.whl | tail -1 | cut -f1) bytes in all ($(du -sh "$dir" | cut -f1)); a device call carries at most 64 MiB"
}

# Each carried wheel's needs (Requires-Dist, markers read for Linux x86-64 and the wheel's Python, extras aside) must be
# in the image's list or among WHEELS: a need neither has would fail on the device alone.
check_wheel_needs() {
    python3 - "$1" "$2" "$LIST" "$WHEELS" <<'PY'
import re, sys, zipfile
from pathlib import Path
try: from packaging.requirements import Requirement
except ImportError: from pip._vendor.packaging.requirements import Requirement
d, pyver, lst, wheels = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split()
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
image = {norm(l.strip()) for l in open(lst) if l.strip() and not l.startswith("#")}
carried = {norm(re.split(r"[=<>!~ ]", w)[0]) for w in wheels}
env = dict(python_version=pyver, python_full_version=pyver + ".0", sys_platform="linux", platform_system="Linux",
           platform_machine="x86_64", os_name="posix", implementation_name="cpython", platform_python_implementation="CPython", extra="")
bad, shadow = [], sorted(carried & image)
for w in sorted(d.glob("*.whl")):
    with zipfile.ZipFile(w) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist:"): continue
        r = Requirement(line.split(":", 1)[1].strip())
        if r.marker and not r.marker.evaluate(env): continue
        if norm(r.name) not in image | carried: bad.append(f"{w.name.split('-')[0]} needs {r}")
if shadow: print("wheels: these are in the image already (carry one only for another version):", ", ".join(shadow))
if bad: print("wheels: needs neither the image nor WHEELS has:\n  " + "\n  ".join(bad)); sys.exit(1)
print(f"wheels: every need of the {len(list(d.glob('*.whl')))} wheels is in the image's list or among WHEELS")
PY
}

# check-env DIR: every distribution in the venv DIR (pip list) is one the image has; torch is the pinned CPU build.
check_env() {
    local dir=$1
    "$dir/bin/python" - "$LIST" "$TORCH_PIN" <<'PY'
import json, re, subprocess, sys
lst, pin = sys.argv[1], sys.argv[2].split("==")[1]
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
image = {norm(l.strip()) for l in open(lst) if l.strip() and not l.startswith("#")}
have = {norm(d["name"]): d["version"] for d in json.loads(subprocess.run([sys.executable, "-m", "pip", "list", "--format=json"],
        capture_output=True, text=True, check=True).stdout)}
off = sorted(set(have) - image - {"pip", "setuptools", "wheel"})
import torch
bad = [] if torch.__version__.split("+")[0] == pin and torch.version.cuda is None else [f"torch {torch.__version__} (cuda {torch.version.cuda}), not the CPU build of {pin}"]
if off: print(f"image-env check: FAIL: {len(off)} of {len(have)} distributions are not in {lst}: " + ", ".join(f"{n} {have[n]}" for n in off))
if bad: print("image-env check: FAIL: " + "; ".join(bad))
if off or bad: sys.exit(1)
print(f"image-env check: pass ({len(have)} distributions, all in {lst}; torch {torch.__version__})")
PY
}

env_key() { printf '%s\n' "python3.11" "$TORCH_PIN" "$IMAGE_PKGS" "$(grep -v '^#' "$LIST")" | sha256sum | cut -c1-16; }

# image-env DIR: the dry run's stand-in of the image's Python environment.
image_env() {
    local dir=${1:-$GPU_ENV/venv} t0=$SECONDS
    command -v python3.11 >/dev/null || { echo "image-env: python3.11 not found"; return 1; }
    rm -rf "$dir"; mkdir -p "$(dirname "$dir")"
    python3.11 -m venv "$dir" || return 1
    quiet "$dir/bin/python" -m pip install -q "$TORCH_PIN" || { echo "image-env: $TORCH_PIN did not install"; return 1; }
    quiet "$dir/bin/python" -m pip install -q -c <(echo "$TORCH_PIN") $IMAGE_PKGS || { echo "image-env: IMAGE_PKGS did not install"; return 1; }
    check_env "$dir" || return 1
    env_key > "$dir/.image-env"
    echo "image-env: built $dir in $((SECONDS - t0)) s"
}

case "${1:-}" in
    wheels) wheels; exit $? ;;
    image-env) image_env "${2:-}"; exit $? ;;
    check-env) check_env "${2:-$GPU_ENV/venv}"; exit $? ;;
    dry-run) DRY=1 ;;
    "") DRY=0 ;;
    *) echo "usage: bash bench/gpu_check.sh [wheels | dry-run | image-env [DIR] | check-env [DIR]]"; exit 2 ;;
esac

OUT=${OUT:-$(mktemp -d /tmp/gpu_check.XXXX)}; mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/gpu_check_work.XXXX); trap 'rm -rf "$WORK"' EXIT
: > "$OUT/summary.txt"; : > "$OUT/log.txt"
if [ $DRY = 1 ]; then
    # build what the dry run needs when missing (one build at a time: a lock beside the folder)
    mkdir -p "$GPU_ENV"; exec 9> "$GPU_ENV/.lock"; flock 9
    if [ "$(cat "$GPU_ENV/venv/.image-env" 2>/dev/null)" != "$(env_key)" ]; then
        image_env "$GPU_ENV/venv" 2>&1 | tee -a "$OUT/log.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "image-env: build failed" | tee -a "$OUT/summary.txt"; exit 1; }
    fi
    if [ "$(cat .whl-3.11/WHEELS 2>/dev/null)" != "$WHEELS" ]; then
        PYVER=3.11 wheels 2>&1 | tee -a "$OUT/log.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || { echo "wheels: 3.11 download failed" | tee -a "$OUT/summary.txt"; exit 1; }
    fi
    flock -u 9
    check_env "$GPU_ENV/venv" 2>&1 | tee -a "$OUT/log.txt" "$OUT/summary.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || exit 1
    PY=$GPU_ENV/venv/bin/python; WHL=.whl-3.11; SITE=$WORK/site
    export PYTHONNOUSERSITE=1 OMP_WAIT_POLICY=PASSIVE
    SECONDS=0                                      # the budget counts from here, as on the device (no build there)
else
    PY=python3; WHL=.whl; SITE=/tmp/site
fi
# the wheels, installed as the device README says (no index, no deps, into a folder on PYTHONPATH)
if ls $WHL/*.whl >/dev/null 2>&1; then
    quiet "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" $WHL/*.whl \
        >> "$OUT/log.txt" || { echo "wheels: install from $WHL failed (see log.txt)" | tee -a "$OUT/summary.txt"; exit 1; }
else echo "no wheels in $WHL: run 'bash bench/gpu_check.sh wheels' here first (and carry .whl)" | tee -a "$OUT/summary.txt"; fi
export PYTHONPATH=$ROOT:$SITE PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       HF_HUB_DISABLE_PROGRESS_BARS=1
{ date -u; ! command -v nvidia-smi >/dev/null || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; echo "cores $(nproc)"
  "$PY" -c "import sys, torch, importlib.metadata as m; print('python', sys.version.split()[0], '| torch', torch.__version__, 'cuda', torch.cuda.is_available(), *[f'| {p} {m.version(p)}' for p in ('transformers', 'peft', 'accelerate', 'trl', 'xgrammar', 'fastcore', 'pettingzoo')])"
  if [ $DRY = 0 ]; then   # the image against the list the dry run trusts: names there that the list lacks, and the reverse
      "$PY" -m pip list --format=freeze 2>/dev/null | cut -d= -f1 | tr 'A-Z_.' 'a-z--' | sort -u > "$WORK/have"
      grep -v '^#' $LIST | sort -u > "$WORK/listed"
      echo "image against $LIST: not listed: $(comm -23 "$WORK/have" "$WORK/listed" | tr '\n' ' ')| listed, absent: $(comm -13 "$WORK/have" "$WORK/listed" | tr '\n' ' ')"
  fi
} 2>&1 | tee -a "$OUT/log.txt"

step() { local name=$1 limit=$2; shift 2; local t0=$SECONDS start
    if [ "$limit" -lt 10 ]; then echo "$name: skipped, no time left of the $BUDGET s budget" | tee -a "$OUT/log.txt" "$OUT/summary.txt"; return; fi
    start=$(wc -l < "$OUT/log.txt")
    echo "== $name (limit $limit s): ${*/#$ROOT\//}" | tee -a "$OUT/log.txt"
    timeout -k 10 "$limit" "$@" >> "$OUT/log.txt" 2>&1; local rc=$?
    tail -n +$((start + 2)) "$OUT/log.txt" | grep -v -i "warn\|Loading weights\|it/s\]\|s/it\]" | tail -n 14
    [ $rc = 124 ] || [ $rc = 137 ] && echo "== $name: stopped by its $limit s limit" | tee -a "$OUT/log.txt"
    echo "== $name: exit $rc in $((SECONDS - t0)) s" | tee -a "$OUT/log.txt"
    echo "$name $rc $((SECONDS - t0)) $limit" >> "$OUT/summary.txt"; }
left() { local l=$((BUDGET - SECONDS)); [ $l -lt $1 ] && echo $l || echo $1; }    # a limit, less what would pass the budget

# the stand-in: written by the decode stage; on the device the grpo stage names it as bench_grpo_step's own
# `qwen3-8b-standin` (which writes it, should the decode stage have been stopped before it did)
if [ $DRY = 1 ]; then SD=$WORK/standin; DEC="--model standin --standin-dir $SD --batches 32 1 8 128 --prompt-len 64 --new 8 --threads 2"
    COSTEP="--model $SD --threads 2"; GMODEL="--model $SD"; GSIZE="--groups 2 --k 4"
else SD=/tmp/fairneg-qwen3-8b-standin; DEC="--model qwen3-8b-standin --standin-dir $SD --batches 32 1 8 128 --prompt-len 256 --new 24"
    COSTEP="--model $SD --threads 16"; GMODEL="--model qwen3-8b-standin --standin-dir $SD"; GSIZE="--groups 4 --k 8"; fi

cat > "$WORK/imports.py" <<'PY'
import importlib, pathlib, sys
skip = {"__init__", "_modidx", "report", "pilot"}      # the last two need altair and vl-convert (not carried)
mods = ["fairneg"] + [f"fairneg.{p.stem}" for p in sorted(pathlib.Path("fairneg").glob("*.py")) if p.stem not in skip]
bad = []
for m in mods + ["xgrammar", "trl.trainer.utils", "pynvml"]:
    try: importlib.import_module(m)
    except Exception as e: bad.append(f"{m}: {type(e).__name__}: {e}")
print("\n".join(bad) or f"imports: all {len(mods)} fairneg modules (report, pilot aside), xgrammar, trl.trainer.utils, pynvml")
sys.exit(1 if bad else 0)
PY
step imports $(left 60) "$PY" "$WORK/imports.py"
step decode $(left 150) "$PY" bench/bench_decode.py $DEC --decode dynamic graphed --json "$OUT/decode.json"
# the rollouts decode graphed only where the decode stage's graphed path ran (a failure there costs no GRPO figures)
GDEC=$("$PY" -c "import json, sys; r = json.load(open(sys.argv[1]))['rows']; print('graphed' if any(x['decode'] == 'graphed' and 'error' not in x for x in r) else 'dynamic')" "$OUT/decode.json" 2>/dev/null || echo dynamic)
echo "rollouts decode: $GDEC" | tee -a "$OUT/log.txt" "$OUT/summary.txt"
step llm $(left 60) "$PY" bench/bench_llm.py --section costep $COSTEP --episodes 3 --max-turns 1 --constrain none \
    --max-new-tokens 16 --json "$OUT/llm.json"
step grpo $(left 320) "$PY" bench/bench_grpo_step.py $GMODEL $GSIZE --params '' --backend hf --context window --steps 3 --max-turns 1 \
    --max-new-tokens 64 --chars 16 --constrain legal --decode $GDEC --out "$WORK/grpo" --json "$OUT/grpo.json"
cp "$WORK/grpo/run/training_steps.jsonl" "$OUT/grpo_steps.jsonl" 2>/dev/null || echo "grpo: no step finished" | tee -a "$OUT/log.txt"
if "$PY" -c "import vllm" 2>/dev/null; then
    if [ $(left 600) -gt 60 ]; then
        step test_vllm $(left 300) "$PY" -m pytest tests/test_vllm.py -q -x -p no:cacheprovider
        VSTEPS="--steps 2 --groups 4 --k 8"; [ $DRY = 1 ] && VSTEPS="--steps 2 --groups 2 --k 4"
        step grpo_vllm $(left 600) "$PY" bench/bench_grpo_step.py $GMODEL --params '' --backend vllm $VSTEPS --json "$OUT/grpo_vllm.json"
    else echo "vllm: importable, but no time is left of the $BUDGET s budget: skipped" | tee -a "$OUT/summary.txt"; fi
else
    echo "vllm: not importable here: test_vllm and the vllm step-time target skipped" | tee -a "$OUT/summary.txt"
fi
echo "results in $OUT ($((SECONDS)) s in all)"; cat "$OUT/summary.txt"
