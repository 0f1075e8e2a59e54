#!/usr/bin/env bash
# The project's prepared GPU check: one command for a session that is lent a device machine (an NVIDIA H200 whose image
# has Python 3.12, torch 2.11+cu130, transformers 5.17.0, peft 0.21.0, accelerate 1.15.0 ... and nothing fetched there;
# /work/.library/device/README.md: 15 minutes of device time, one command at most 10 minutes). Usage:
#
#   bash bench/gpu_check.sh wheels            # here, once: the wheels the image lacks (WHEELS) for Python 3.12 -> .whl (~11 MB)
#   run(command="bash bench/gpu_check.sh", carry=[".whl"], timeout_s=480)          # on the device: 7 minutes at most
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
# Stages (issue #51), in the order of what they settle, run by bench/gpu_stages.py: each in its own process under its
# own limit inside one budget (BUDGET=410 s from the script's start, set-up included: 7 minutes of an H100 less a margin;
# a stage's limit is cut to what the budget leaves less the `reserve` kept for the stages after it; a stage with too
# little left is skipped, said in summary.txt). What a stage prints goes to $OUT/log.txt as it comes, a line
# "NAME EXIT SECONDS LIMIT" to $OUT/summary.txt as it ends, and its figures to its JSON, rewritten after every
# measurement, so a stage stopped by its limit keeps what it measured. One compile cache (TORCHINDUCTOR_CACHE_DIR) for
# all. At most 8 files come back: summary.txt, log.txt, pass.json, grpo.json, decode.json, torch_logs.txt, llm.json
# (and grpo_vllm.json). Device limits (the dry run: times SCALE=0.5):
#   probe    75 s  bench_policy_pass --section padding --imports: every module the GPU path reaches imported first (a
#                  missing package shows at once), the Qwen3-8B-shaped stand-in written (random bf16, built on the GPU),
#                  then on one micro-batch of the H200 run's shape (~410-token sequences, 53 scored, cut by the trainer's
#                  own sizing) the policy pass with backward right-padded (the trainer's) and left-padded (before), with
#                  checkpointing off and on: loss, non-finite log-probs, LoRA gradients finite or not (which), the aten
#                  attention ops that ran, seconds, peak memory. -> pass.json {imports, padding}
#   grpo    400 s  (less 90 s kept for decode and update) bench_grpo_step, the stand-in at the H200 run's shape: 4 groups
#                  x 8, 4-turn deadline, 256 new tokens, fields of 16 characters (the H200's were 64), the legal grammar,
#                  --decode dynamic (so the NaN question is answered before anything is compiled), 2 steps: per step the
#                  row (grad norm, nonfinite and nonfinite_tokens, checkpointing and why, peak memory, TFLOP/s and MFU).
#                  -> grpo.json, written at start (the checkpointing decision) and after every step. At the H200's pace
#                  (179 s a step, 2026-12-04) step 2 does not finish inside 7 minutes: rows of finished steps are kept.
#   decode  120 s  (less 30 s kept) bench_decode --lora, batch 32: dynamic then graphed (first call = compile), replay
#                  ms/step against dynamic (x_dynamic) and the bandwidth bound, then graphed calls at 32 (a second call),
#                  8, 16 (a third width) and 32 again, each with its graphs compiled, recompiles and re-records counted
#                  from TORCH_LOGS=recompiles,cudagraphs (-> torch_logs.txt); peak memory; ids drawn at or past
#                  len(tokenizer) (must be 0: exit 1 otherwise). -> decode.json
#   update   45 s  bench_policy_pass --section update: grpo.update on the real micro-batch (the GRPO rows' sequence and
#                  answer lengths), checkpointing on, forced off, each twice: seconds, peak memory. -> pass.json {update}
#   llm      60 s  (only with time left) bench_llm --section costep: co-stepping against one episode at a time. -> llm.json
#   vllm    120 s  (only when vLLM imports; the image has none and its wheel is over a call's 64 MiB) -> grpo_vllm.json
# The image's package list: the device run compares the image's `pip list` with bench/gpu_image_packages.txt and
# exits 1 on any drift (the stages still run: the GPU time is not wasted); the dry run compares the list with KINDS.md
# (when readable) and the venv with the list, and fails before any stage on either drift.
# The dry run: the small stand-in (2 layers, float32), a micro-batch of 6 ~48-token sequences, GRPO at 2 x 2, 1 turn,
# 24 tokens, the graphed path traced by dynamo with the eager backend (Inductor's C++ build on a CPU proves nothing
# about CUDA graphs; tests/test_llm compiles it), stages forked from a runner that imported the libraries once: about
# 30 s on 2 cores once .gpu-env/ and .whl-3.11/ are built (the first build: minutes more).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# What fairneg and the bench scripts need that the image lacks, pinned, found by the dry run (each ImportError there):
# fastcore (fairneg's modules import it at the top); trl (fairneg.llm's selective_log_softmax: trl.trainer.utils imports
# datasets, which imports dill, multiprocess and xxhash, xxhash being the image's); xgrammar (the legal-action grammar)
# with apache-tvm-ffi and pydantic (pydantic-core, annotated-types, typing-inspection); pettingzoo and gymnasium
# (fairneg.play.env; farama-notifications is gymnasium's declared need). Keep one version of each.
WHEELS="fastcore==2.2.41 trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xgrammar==0.2.9 apache-tvm-ffi==0.1.15.post2
pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 pettingzoo==1.27.0 gymnasium==1.4.0
farama-notifications==0.0.6"
WHEELS=$(echo $WHEELS)
# The image's packages that the dry run's venv installs (all of them in bench/gpu_image_packages.txt, with what pip
# pulls in for them): the versions the image has where KINDS.md gives them; typer and python-dateutil at the newest
# releases whose own needs lie in the image (typer 0.29 needs pydantic, python-dateutil 3 needs tzdata: the image has
# neither); xxhash for datasets; nvidia-ml-py for fairneg.core.telemetry's pynvml.
TORCH_PIN=torch==2.13.0
IMAGE_PKGS="transformers==5.17.0 peft==0.21.0 accelerate==1.15.0 huggingface-hub==1.33.0 safetensors==0.8.0 tokenizers==0.23.2
numpy scipy pandas pyarrow pyyaml tqdm typer==0.28.0 python-dateutil==2.9.0.post0 rich jinja2 psutil threadpoolctl xxhash
nvidia-ml-py filelock fsspec packaging"
IMAGE_PKGS=$(echo $IMAGE_PKGS)
LIST=${GPU_IMAGE_LIST:-bench/gpu_image_packages.txt}   # the image's packages (another list: tests/test_gpu_check.py)
GPU_ENV=${GPU_ENV:-.gpu-env}                       # the dry run's cache: $GPU_ENV/venv (git-ignored)
case $GPU_ENV in /*) ;; *) GPU_ENV=$ROOT/$GPU_ENV ;; esac
BUDGET=${BUDGET:-410}                              # seconds the device run may take in all, set-up included (7 minutes, less a margin)

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
import importlib.util, pathlib                             # torch/version.py read, not torch imported (seconds saved)
tv = {}
exec(pathlib.Path(importlib.util.find_spec("torch").origin).with_name("version.py").read_text(), tv)
ver, cuda = tv["__version__"], tv.get("cuda")
bad = [] if ver.split("+")[0] == pin and cuda is None else [f"torch {ver} (cuda {cuda}), not the CPU build of {pin}"]
if off: print(f"image-env check: FAIL: {len(off)} of {len(have)} distributions are not in {lst}: " + ", ".join(f"{n} {have[n]}" for n in off))
if bad: print("image-env check: FAIL: " + "; ".join(bad))
if off or bad: sys.exit(1)
print(f"image-env check: pass ({len(have)} distributions, all in {lst}; torch {ver})")
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
cat > "$WORK/list_check.py" <<'PY'
import re, sys
lst, what, have = sys.argv[1], sys.argv[2], sys.argv[3]
norm = lambda n: re.sub(r"[-_.]+", "-", n.strip()).lower()
listed = {norm(l) for l in open(lst) if l.strip() and not l.startswith("#")}
if what == "kinds":       # the list against KINDS.md's own: the line "... Packages: a, b, c." of "Python packages already there"
    text = open(have).read().split("## Python packages already there", 1)[-1]
    m = re.search(r"Packages: (.*?)\.\s*$", text, re.M)
    names = {norm(n) for n in m.group(1).split(",")} if m else set()
else: names = {norm(l.split("==")[0]) for l in open(have) if l.strip() and not l.startswith("#")}   # pip freeze of the image
extra, gone = sorted(names - listed), sorted(listed - names)
src = "KINDS.md" if what == "kinds" else "the image"
if not names: print(f"image-list check: FAIL: no package list found in {have}"); sys.exit(1)
if extra or gone:
    print(f"image-list check: FAIL: {lst} drifted from {src}: in {src}, not listed: {', '.join(extra) or '-'}; "
          f"listed, not in {src}: {', '.join(gone) or '-'} (copy the list again)"); sys.exit(1)
print(f"image-list check: pass ({len(listed)} names, as {src} has them)")
PY
: > "$OUT/summary.txt"; : > "$OUT/log.txt"
FAIL=0
if [ $DRY = 1 ]; then
    # the list the dry run trusts against the image's as KINDS.md gives it (here, where the workplace's notes are)
    KINDS=${KINDS_MD:-/work/.library/device/KINDS.md}
    if [ -r "$KINDS" ]; then
        python3 "$WORK/list_check.py" "$LIST" kinds "$KINDS" 2>&1 | tee -a "$OUT/log.txt" "$OUT/summary.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || exit 1
    else echo "image-list check: $KINDS not readable here: the list is not compared with it" | tee -a "$OUT/log.txt" "$OUT/summary.txt"; fi
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
# one compile cache for every stage (Inductor's FX graph and Triton kernels: a graph compiled once is not compiled again)
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$WORK/inductor-cache}
{ date -u; ! command -v nvidia-smi >/dev/null || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; echo "cores $(nproc)"
  "$PY" -c "import sys, importlib.metadata as m; print('python', sys.version.split()[0], *[f'| {p} {m.version(p)}' for p in ('torch', 'transformers', 'peft', 'accelerate', 'trl', 'xgrammar', 'fastcore', 'pettingzoo')])"
} 2>&1 | tee -a "$OUT/log.txt"
if [ $DRY = 0 ]; then   # the image against the list the dry run trusts: a drift fails the check (the stages still run)
    "$PY" -m pip list --format=freeze 2>/dev/null > "$WORK/have"
    python3 "$WORK/list_check.py" "$LIST" image "$WORK/have" 2>&1 | tee -a "$OUT/log.txt" "$OUT/summary.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || FAIL=1
fi

# Stages, in the order of what they settle (see the header). Shapes and limits: the device's, and the dry run's small
# shapes under the same limits times SCALE (the budget too), so the budget's arithmetic runs as on the device.
if [ $DRY = 1 ]; then
    SCALE=${SCALE:-0.5}; SD=$WORK/standin; M="--model standin --standin-dir $SD"; GM="--model $SD"; T="--threads 2"
    PROBE="--seqs 8 --len 48 --answer 8"
    GRPO="--groups 2 --k 2 --max-turns 1 --max-new-tokens 24 --chars 8 --games 2"
    DEC="--prompt-len 16 --new 4 --compile-backend eager"     # Inductor's C++ build on a CPU proves nothing about CUDA
    COSTEP="--episodes 2 --max-turns 1 --max-new-tokens 8"; RUNNER="--fork"
else
    SCALE=1; SD=/tmp/fairneg-qwen3-8b-standin; M="--model qwen3-8b-standin --standin-dir $SD"; GM=$M; T=""
    PROBE=""                                                   # the H200 run's sequences: ~410 tokens, 53 scored
    GRPO="--groups 4 --k 8 --max-turns 4 --max-new-tokens 256 --chars 16"   # the H200 run's shape (its fields were 64)
    DEC="--prompt-len 256 --new 24"; COSTEP="--episodes 3 --max-turns 1 --max-new-tokens 16"; RUNNER=""
fi
s() { python3 -c "import sys; print(max(1, round(float(sys.argv[1]) * float(sys.argv[2]))))" "$1" "$SCALE"; }   # a device figure, scaled
cat > "$WORK/plan.json" <<JSON
[
 {"name": "probe", "limit": $(s 75), "min": $(s 10),
  "argv": ["bench/bench_policy_pass.py", "--section", "padding", "--imports", $(printf '"%s", ' $M $T $PROBE) "--json", "$OUT/pass.json"]},
 {"name": "grpo", "limit": $(s 400), "reserve": $(s 90), "min": $(s 30),
  "argv": ["bench/bench_grpo_step.py", $(printf '"%s", ' $GM $GRPO) "--params", "", "--backend", "hf", "--context", "window",
           "--constrain", "legal", "--decode", "dynamic", "--steps", "2", "--out", "$WORK/grpo", "--json", "$OUT/grpo.json"]},
 {"name": "decode", "limit": $(s 120), "reserve": $(s 30), "min": $(s 20),
  "env": {"TORCH_LOGS": "recompiles,cudagraphs", "TORCH_LOGS_OUT": "$OUT/torch_logs.txt"},
  "argv": ["bench/bench_decode.py", $(printf '"%s", ' $M $T $DEC) "--lora", "--batches", "32", "--decode", "dynamic", "graphed",
           "--calls", "32", "8", "16", "32", "--json", "$OUT/decode.json"]},
 {"name": "update", "limit": $(s 45), "min": $(s 10),
  "argv": ["bench/bench_policy_pass.py", "--section", "update", $(printf '"%s", ' $M $T $PROBE) "--steps-json", "$OUT/grpo.json",
           "--json", "$OUT/pass.json"]},
 {"name": "llm", "limit": $(s 60), "min": $(s 20),
  "argv": ["bench/bench_llm.py", "--section", "costep", "--model", "$SD", $(printf '"%s", ' $T $COSTEP) "--constrain", "none",
           "--json", "$OUT/llm.json"]},
 {"name": "vllm", "limit": $(s 120), "min": $(s 60), "when": "vllm",
  "argv": ["bench/bench_grpo_step.py", "--model", "$SD", "--params", "", "--backend", "vllm", "--steps", "2", "--groups", "2",
           "--k", "4", "--json", "$OUT/grpo_vllm.json"]}
]
JSON
BUDGET=$(s $BUDGET)
"$PY" bench/gpu_stages.py --plan "$WORK/plan.json" --out "$OUT" --budget $((BUDGET - SECONDS)) $RUNNER || FAIL=1
echo "results in $OUT ($SECONDS s in all, $BUDGET s budget)"; cat "$OUT/summary.txt"
exit $FAIL
