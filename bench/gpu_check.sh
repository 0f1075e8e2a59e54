#!/usr/bin/env bash
# The project's prepared GPU check: one command for a session that is lent a device machine
# (/work/.library/device/README.md: 15 minutes of device time, one command at most 10 minutes, nothing fetched there).
#
#   bash bench/gpu_check.sh wheels       # here, once: the wheels the device image lacks -> .whl (about 10 MB)
#   run(command="bash bench/gpu_check.sh", carry=[".whl"], timeout_s=590)      # on the device
#   bash bench/gpu_check.sh dry-run      # here, on a CPU: the same steps on tiny-test, to check the script itself
#
# Steps (each one's output in $OUT/NAME.log, figures in $OUT/NAME.json; a failed step does not stop the next):
#   1. bench_grpo_step: GRPO steps on the Qwen3-8B-architecture stand-in (random bf16 weights, built on the GPU),
#      transformers rollouts (--backend hf), 4 groups x 8 episodes, a short deadline, in the window context (whole
#      sequences, then shared first stretches run once) and in the conversation context side by side (--context both;
#      issue #15): rollout / reference / update split, the tokens each training pass computes and shares, tokens per
#      second, sampler/trainer log-prob gap, peak GPU memory. On a GPU the update runs under activation checkpointing,
#      which drops a passed cache, so there only the reference pass shares first stretches.
#   2. bench_llm --section costep: co-stepped against one-episode-at-a-time generation on the same stand-in (HFPolicy).
#   3. only when vLLM imports there: tests/test_vllm.py, then bench_grpo_step --backend vllm at 4 x 8 with prefix
#      caching on (VLLMPolicy's default; each step's prompt tokens read and computed are printed beside its split; the
#      3-minute target is judged only on a real Qwen3-8B at the target's full setting; on a stand-in: 'not judged'). The device image has no vLLM and its wheel (336 MB for 0.33.0) is over the 64 MiB a call may carry,
#      so in this workplace step 3 reports "skipped" unless the image changes.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS="trl==1.16.0 datasets dill multiprocess xgrammar==0.2.9 apache-tvm-ffi pydantic==2.14.4 pydantic-core annotated-types typing-inspection pettingzoo==1.27.0 gymnasium==1.4.0 farama-notifications"

if [ "${1:-}" = wheels ]; then
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
    mkdir -p .whl
    # pinned where our venv pins them; the rest take the version our venv has
    for w in $WHEELS; do
        case $w in *==*) spec=$w ;; *) spec="$w==$(.venv/bin/pip show "$w" 2>/dev/null | awk '/^Version/{print $2}')" ;; esac
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 --platform any -d .whl "$spec" || { echo "could not fetch $spec"; exit 1; }
    done
    du -sh .whl; ls .whl; exit 0
fi

DRY=0; [ "${1:-}" = dry-run ] && DRY=1
OUT=${OUT:-$(mktemp -d /tmp/gpu_check.XXXX)}; mkdir -p "$OUT"
PY=python3; [ $DRY = 1 ] && PY=.venv/bin/python
if [ $DRY = 0 ] && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if [ $DRY = 1 ]; then MODEL=tiny-test; STEPS="--steps 2 --groups 2 --k 2"; LLM="--section costep --model tiny-test --episodes 4 --max-turns 2"
else MODEL=qwen3-8b-standin; STEPS="--steps 2 --groups 4 --k 8 --max-turns 6 --max-new-tokens 256"
     LLM="--section costep --model /tmp/fairneg-qwen3-8b-standin --episodes 8 --max-turns 2 --threads 16"; fi
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
  $PY -c "import torch, importlib.metadata as m; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), *[f'| {p} {m.version(p)}' for p in ('transformers', 'peft', 'xgrammar', 'pettingzoo')])"
} 2>&1 | tee "$OUT/env.log"

step() { local name=$1; shift; local t0=$SECONDS
    echo "== $name: $*"; "$@" > "$OUT/$name.log" 2>&1; local rc=$?
    grep -v -i "warn\|Loading weights\|it/s\]" "$OUT/$name.log" | tail -n 14
    echo "== $name: exit $rc in $((SECONDS - t0)) s"; echo "$name $rc $((SECONDS - t0))" >> "$OUT/summary.txt"; }

step grpo_hf $PY bench/bench_grpo_step.py --model $MODEL --backend hf --context both $STEPS --json "$OUT/grpo_hf.json"
step llm $PY bench/bench_llm.py $LLM --json "$OUT/llm.json"
if $PY -c "import vllm" 2>/dev/null; then
    step test_vllm $PY -m pytest tests/test_vllm.py -q -x -p no:cacheprovider
    VSTEPS="--steps 2 --groups 4 --k 8"; [ $DRY = 1 ] && VSTEPS="$STEPS"      # the target's own setting on a GPU
    step grpo_vllm $PY bench/bench_grpo_step.py --model $MODEL --backend vllm $VSTEPS --json "$OUT/grpo_vllm.json"
else
    echo "vllm: not importable here: test_vllm and the vllm step-time target skipped" | tee -a "$OUT/summary.txt"
fi
echo "results in $OUT"; cat "$OUT/summary.txt"
