"""GRPO step time (a benchmark, not a test): rollout, reference pass and update, per step, on a given model and backend.

    .venv/bin/python bench/bench_grpo_step.py                                    # CPU: the pilot's step, hf and vllm side by side
    .venv/bin/python bench/bench_grpo_step.py --backend hf --model tiny-test --params ''   # one backend, a small shape
    python bench/bench_grpo_step.py --model Qwen/Qwen3-8B --backend vllm         # GPU: the issue's target setting
    python bench/bench_grpo_step.py --model qwen3-8b-standin --backend vllm      # GPU, random Qwen3-8B-shaped weights
    python bench/bench_grpo_step.py --model qwen3-8b-standin --backend hf        # GPU, transformers rollouts
    .venv/bin/python bench/bench_grpo_step.py --backend hf --context both        # window against conversation context (#15)

On a CPU the step is by default the CPU pilot's (`--params params/pilot-cpu.yaml`: its `train:` section gives the model,
groups × k, deadline, new tokens, field lengths and LoRA rank; the flags below override it), and `--backend both` (the
default where vLLM is installed) runs it on transformers and on vLLM, each in its own process one after the other, then
prints the two side by side: per-step medians of rollout, reference pass and update, prompt tokens read and computed
(vLLM's prefix cache), the whole run's wall time (model load and engine start included), and the CPU target of project
issue #13: the vLLM rollout of a pilot step at least 2.5x shorter than the transformers one measured in the same run
(PASS/FAIL, exit 1 when missed), and which backend is faster end to end (the one the pilot should use).

`--context both` runs each backend (`--backend`, or both) in the `window` context (a fresh prompt per turn) twice, with
every training sequence run whole (`--share-prefix 0`, the trainer's default) and with shared first stretches (a first
stretch that a micro-batch's sequences share, such as a seat's system message, run once: `GRPOConfig.share_prefix`,
`--share-prefix N`, 64 unless given), and once in the `conversation` context (each seat's chat grows; its turns are packed into
one training sequence; transformers keeps each seat's keys and values between its turns, vLLM's prefix cache serves
them), then prints per backend the tokens each training pass computes, those it shared, the answer tokens trained, the
rollout / reference / update / step medians and the prompt tokens read and computed, against project issue #15's
targets: at least 4x fewer training tokens per answer token trained (the contexts play different episodes, so tokens
are compared per answer token), and the whole step at least 2x faster. Both comparisons are printed; the verdict
(PASS/FAIL, exit 1 when missed) is against the window context under the same trainer.

Setup. A bank of `--games` generated six-party games (private information); `fairneg.train.grpo.train` runs `--steps` steps
of `--groups` games × `--k` episodes (the issue's GPU setting is 4 × 8), every seat the policy, the full protocol
deadline unless `--max-turns`, `--max-new-tokens` per turn (384 as in the seed's runs), constrained to legal actions
when the model is a stand-in or `--constrain legal`. `--model qwen3-8b-standin` writes (once, to `--standin-dir`) a
randomly initialized model with Qwen3-8B's architecture (`fairneg.llm.standin_model(shape="qwen3-8b")`, bf16, built on
the GPU): the compute per token of the real model without hub access; its answers are random legal JSON under the
grammar, so its episodes and answer lengths are not those of a real negotiator (the printed token counts say what was
actually generated).

Printed per step: rollout, reference pass and update seconds, total, generated and trained tokens, tokens per second of
rollout and training, the sampler/trainer log-prob gap, peak memory. The first step carries one-off costs (engine
warm-up, grammar compilation, CUDA graphs), so the figure compared is the median of the later steps (of all steps
when there is one). Target (project issue #5): under 180 s per step on one H100-class GPU with `--backend vllm`,
Qwen3-8B, 4 groups × 8, the protocol's own deadline, 384 new tokens per turn and no grammar — against 17 minutes per
step in the seed. It is judged (PASS/FAIL, exit 1 when missed) only in exactly that setting, with the real Qwen3-8B
(its architecture and its 151k-token tokenizer); anything else (a CPU, the hf backend, another shape or deadline, a
constrained run, the stand-in, whose random answers under the grammar are not the target's workload) prints the
figures and "not judged", with the reasons.
"""

from __future__ import annotations
import argparse, json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

TARGET_S, SEED_S = 180.0, 17 * 60.0


def _decode_counts(r: dict) -> str:
    "A row's decode mode and its static-cache reuses, allocations and skipped CUDA graphs (`-` where not kept)."
    counts = [r.get(k) for k in ("decode_cache_hits", "decode_cache_misses", "cudagraph_skips")]
    return f"{r.get('decode') or '-'} " + "/".join("-" if c is None else str(c) for c in counts)


def model_spec(a) -> str:
    "The model to train: `qwen3-8b-standin` is built once (bf16, on the GPU when there is one)."
    if a.model != "qwen3-8b-standin":
        return a.model
    import torch
    from fairneg.llm import standin_model

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.perf_counter()
    p = standin_model(Path(a.standin_dir), shape="qwen3-8b", dtype="bfloat16", device=dev)
    print(f"qwen3-8b stand-in at {p} ({time.perf_counter() - t0:.0f} s)")
    return str(p)


def target_model_reasons(spec: str) -> list:
    "Why the model is not the target's Qwen3-8B (empty when it is): not the stand-in, Qwen3-8B's shape and tokenizer."
    if spec == "qwen3-8b-standin":
        return [
            "the model is the random-weight stand-in (random legal answers under the grammar, not Qwen3-8B's episodes)"
        ]
    from fairneg.llm import QWEN3_8B
    from fairneg.llm.policies import resolve_model
    from fairneg.llm.tiny import EMBEDDED

    if str(spec) in EMBEDDED:
        return [f"the model is the embedded `{spec}`, not Qwen3-8B"]
    try:
        from transformers import AutoConfig, AutoTokenizer

        path = resolve_model(spec)
        cfg = AutoConfig.from_pretrained(path)
        off = [
            f"{k} {getattr(cfg, k, None)}"
            for k in (
                "hidden_size",
                "intermediate_size",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
                "head_dim",
                "vocab_size",
            )
            if getattr(cfg, k, None) != QWEN3_8B[k]
        ]
        if getattr(cfg, "model_type", None) != "qwen3" or off:
            return [
                f"the model is not Qwen3-8B's architecture ({getattr(cfg, 'model_type', None)}; {', '.join(off) or 'shape as Qwen3-8B'})"
            ]
        n_tok = len(AutoTokenizer.from_pretrained(path))
        if n_tok < 150_000:
            return [
                f"the model has Qwen3-8B's shape but a {n_tok:,}-token tokenizer (Qwen3's has over 151,000): a stand-in"
            ]
    except Exception as e:
        return [f"the model could not be checked as Qwen3-8B ({type(e).__name__}: {str(e)[:120]})".replace("\n", " ")]
    return []


def setting_reasons(cfg, gpu: bool, name: str) -> list:
    "Why this run (its GRPOConfig; `name` the model as asked for) is not the target's setting (empty when it is exactly that)."
    from fairneg.llm.policies import default_constrain

    why = [] if gpu else ["no GPU"]
    if cfg.backend != "vllm":
        why.append(f"backend {cfg.backend}, not vllm")
    if (cfg.groups, cfg.k) != (4, 8):
        why.append(f"{cfg.groups} groups × {cfg.k} episodes, not 4 × 8")
    if cfg.max_turns is not None:
        why.append(f"a {cfg.max_turns}-turn deadline, not the protocol's")
    if cfg.max_new_tokens != 384:
        why.append(f"{cfg.max_new_tokens} new tokens per turn, not 384")
    if default_constrain(name, cfg.constrain) != "none":
        why.append("answers constrained to legal actions (the target's run has no grammar)")
    return why + target_model_reasons(name)


def live_trainer(path: Path, backend: str):
    "A `GRPOTrainer` that writes `path` (partial: its checkpointing decision, then the rows so far) as it goes."
    from fairneg.train.grpo import GRPOTrainer

    def write(t, rows: list, partial: bool = True):
        d = dict(
            backend=backend,
            partial=partial,
            gradient_checkpointing=t.checkpointing,
            checkpointing_why=t.checkpointing_why,
            decode=getattr(t.policy, "decoding", t.cfg.decode),
            rows=rows,
        )  # requested, chosen, used, fallback
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(d, default=str, indent=1))
        tmp.replace(path)

    class Live(GRPOTrainer):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self._live = []
            write(self, self._live)  # the checkpointing decision, before the first step

        def log_step(self, step, row, eps):
            self._live.append(row)
            write(self, self._live)  # before its checkpoint is saved
            return super().log_step(step, row, eps)

    return Live


CPU_TARGET_X = 2.5  # the vLLM rollout of a CPU pilot step at least this many times shorter than transformers'


def one_backend(a, gpu: bool) -> dict:
    "Train `--steps` steps on `a.backend`; print the per-step table and the GPU target's verdict; return the figures."
    import torch
    from fairneg.engine.bank import generate_bank
    from fairneg.train.grpo import make_config, train, NonFiniteStepsError
    from fairneg.core.store import read_jsonl
    from fairneg.llm.policies import default_constrain

    out = Path(a.out or tempfile.mkdtemp(prefix="bench_grpo_step_"))
    generate_bank(n_games=a.games, seed_offset=40000, modes=("private",), out=out / "bank", progress=False)
    fallback = (
        {}
        if a.params
        else dict(
            model="tiny-test",
            groups=4 if gpu else 2,
            k=8 if gpu else 4,
            max_turns=None if gpu else 4,
            max_new_tokens=384,
            scratchpad_chars=64,
            message_chars=64,
        )
    )
    given = dict(
        model=model_spec(a) if a.model else None,
        groups=a.groups,
        k=a.k,
        max_turns=a.max_turns,
        max_new_tokens=a.max_new_tokens,
        scratchpad_chars=a.chars,
        message_chars=a.chars,
        constrain=a.constrain
        or ("legal" if a.model == "qwen3-8b-standin" else None),  # None: the model's default (legal for tiny)
        context=a.context if a.context in ("window", "conversation") else None,
        share_prefix=a.share_prefix,
        decode=getattr(a, "decode", None),
    )
    cfg = make_config(
        a.params or None,
        **{**fallback, **{k: v for k, v in given.items() if v is not None}},
        backend=a.backend,
        steps=a.steps,
        bank=str(out / "bank"),
        out=str(out / "run"),
        checkpoint_steps=[a.steps],
        transcript_every=0,
        lam=0.5,
    )
    spec, name = cfg.model, a.model or cfg.model
    dev = torch.cuda.get_device_name() if gpu else f"CPU ({torch.get_num_threads()} threads)"
    print(
        f"GRPO step time: {spec} on {a.backend}, {cfg.groups} groups × {cfg.k} episodes, max {cfg.max_new_tokens} new tokens/turn, "
        f"deadline {cfg.max_turns or 'protocol'}, constrain {default_constrain(spec, cfg.constrain)}, LoRA rank {cfg.lora_r}, "
        f"context {cfg.context}, decode {cfg.decode}, shared first stretches >= {cfg.share_prefix} tokens run once"
        f"{', from ' + a.params if a.params else ''}; device {dev}"
    )
    t0 = time.perf_counter()
    trainer = live_trainer(a.json, a.backend)(cfg, progress=True) if a.json else None
    try:
        rows = trainer.run() if trainer is not None else train(cfg, progress=True)
    except NonFiniteStepsError as e:  # the rows it wrote are the measurement: print them, then say why it stopped
        print(f"stopped: {e}")
        rows = read_jsonl(Path(cfg.out) / "training_steps.jsonl")
    wall = time.perf_counter() - t0
    hdr = f"{'step':>4} {'rollout s':>9} {'ref s':>7} {'update s':>8} {'total s':>8} {'turns':>6} {'gen tok':>8} {'trained':>8} {'train seq':>9} {'train tok':>9} {'prompt read':>11} {'computed':>9} {'gap':>8} {'peak MB':>8} {'grad norm':>9} {'nonfinite':>10} {'TFLOP/s':>8} {'MFU':>6} {'decode hit/miss/skip':>20}"
    print(hdr)
    for r in rows:
        mem = r.get("gpu_max_allocated_mb") or r.get("rss_mb")
        gap = "-" if r.get("sampler_gap") is None else f"{r['sampler_gap']:.1e}"
        print(
            f"{r['step']:>4} {r['rollout_s']:>9.1f} {r['ref_s']:>7.1f} {r['train_s']:>8.1f} {r['total_s']:>8.1f} {r['policy_turns']:>6} "
            f"{r['tokens_generated']:>8} {r['tokens_trained']:>8} {r.get('train_sequences', 0):>9} {r.get('train_tokens', 0):>9} {r.get('prompt_tokens_read', 0):>11} {r.get('prompt_tokens_computed', 0):>9} "
            f"{gap:>8} {mem:>8} {'-' if r.get('grad_norm') is None else format(r['grad_norm'], '.3g'):>9} {r.get('nonfinite') or '-':>10} "
            f"{r.get('train_tflops') or '-':>8} {r.get('mfu') or '-':>6} {_decode_counts(r):>20}"
        )
    if rows:
        print(
            f"activation checkpointing: {rows[0].get('checkpointing_why')}; non-finite steps (update skipped): "
            f"{sum(bool(r.get('nonfinite')) for r in rows)} of {len(rows)}"
        )
    later = rows[1:] or rows
    med = lambda key: statistics.median(r[key] for r in later)
    print(
        f"median step time{' after the first' if len(rows) > 1 else ''}: {med('total_s'):.1f} s (all {len(rows)} steps: {wall:.0f} s wall, model load included)"
    )
    why = setting_reasons(cfg, gpu, name)
    verdict = ("PASS" if med("total_s") < TARGET_S else "FAIL") if not why else "not judged"
    print(
        f"GPU target: < {TARGET_S:.0f} s per step with vllm, Qwen3-8B, 4 × 8, the protocol deadline, 384 tokens per turn, no "
        f"grammar, on one H100-class GPU (seed: {SEED_S:.0f} s) -> {verdict}"
        + (f" ({'; '.join(why)}; figures only)" if why else f" (median {med('total_s'):.1f} s on {dev})")
    )
    return dict(
        backend=a.backend,
        context=cfg.context,
        partial=False,
        decode=getattr(getattr(trainer, "policy", None), "decoding", cfg.decode),  # requested, used, fallback
        gradient_checkpointing=rows[0].get("gradient_checkpointing") if rows else None,
        checkpointing_why=rows[0].get("checkpointing_why") if rows else None,
        rows=rows,
        wall_s=wall,
        median_step_s=med("total_s"),
        median_rollout_s=med("rollout_s"),
        train_tokens=sum(r.get("train_tokens", 0) for r in rows),
        train_tokens_shared=sum(r.get("train_tokens_shared", 0) for r in rows),
        share_prefix=cfg.share_prefix,
        tokens_trained=sum(r["tokens_trained"] for r in rows),
        median_train_tokens=med("train_tokens"),
        median_ref_s=med("ref_s"),
        median_update_s=med("train_s"),
        prompt_read=sum(r.get("prompt_tokens_read", 0) for r in rows),
        prompt_computed=sum(r.get("prompt_tokens_computed", 0) for r in rows),
        sampler_gap=med("sampler_gap") if all(r.get("sampler_gap") is not None for r in later) else None,
        verdict=verdict,
        not_judged_because=why,
        device=dev,
    )


def run_children(argv: list, runs: list) -> dict | None:
    "Run `(backend, context, share_prefix)` each in its own process, one after the other; their result dicts (None when one failed)."
    res = {}
    with tempfile.TemporaryDirectory() as d:
        for b, c, sh in runs:
            j = Path(d) / f"{b}-{c}-{sh}.json"
            cmd = [
                sys.executable,
                __file__,
                *_without(argv, ("--backend", "--context", "--json", "--out")),
                "--backend",
                b,
                "--context",
                c,
                "--json",
                str(j),
            ]
            if sh is not None:
                cmd = [*_without(cmd, ("--share-prefix",)), "--share-prefix", str(sh)]
            print(f"\n=== {b}, {c}: {' '.join(cmd[1:])}", flush=True)
            rc = subprocess.call(cmd)
            if rc != 0 or not j.exists():
                print(f"the {b} {c} run failed (exit {rc})")
                return None
            res[(b, c, sh)] = json.loads(j.read_text())
    return res


def both_backends(a, argv: list) -> int:
    "Run the step on hf and on vllm, each in its own process, and print them side by side with the CPU target."
    res = run_children(argv, [("hf", a.context, None), ("vllm", a.context, None)])
    if res is None:
        return 1
    h, v = res[("hf", a.context, None)], res[("vllm", a.context, None)]
    print(f"\nside by side ({h['device']}; medians of the steps after the first):")
    lines = [
        ("rollout s", "median_rollout_s", "{:.1f}"),
        ("reference pass s", "median_ref_s", "{:.1f}"),
        ("update s", "median_update_s", "{:.1f}"),
        ("step s", "median_step_s", "{:.1f}"),
        ("prompt tokens read (all steps)", "prompt_read", "{:,}"),
        ("prompt tokens computed", "prompt_computed", "{:,}"),
        ("run wall s (load, engine start)", "wall_s", "{:.0f}"),
    ]
    print(f"{'':34}{'transformers':>14}{'vLLM':>14}")
    for label, key, f in lines:
        print(f"{label:34}{f.format(h[key]):>14}{f.format(v[key]):>14}")
    gap = lambda r: "-" if r["sampler_gap"] is None else f"{r['sampler_gap']:.1e}"
    print(f"{'sampler/trainer gap per token':34}{gap(h):>14}{gap(v):>14}")
    x = h["median_rollout_s"] / v["median_rollout_s"]
    verdict = "PASS" if x >= CPU_TARGET_X else "FAIL"
    print(
        f"\nCPU target (issue #13): the vLLM rollout at least {CPU_TARGET_X}x shorter than transformers' in the same run: "
        f"{h['median_rollout_s']:.1f} s / {v['median_rollout_s']:.1f} s = {x:.2f}x -> {verdict}"
    )
    fast = "transformers (hf)" if h["wall_s"] <= v["wall_s"] else "vLLM"
    print(
        f"faster end to end: {fast} ({h['wall_s']:.0f} s against {v['wall_s']:.0f} s for {len(h['rows'])} steps, load and engine start included)"
    )
    if a.json:
        a.json.write_text(
            json.dumps(dict(hf=h, vllm=v, rollout_x=x, cpu_target=verdict, faster=fast), default=str, indent=1)
        )
    return 1 if verdict == "FAIL" else 0


TOKENS_X, STEP_X = 4.0, 2.0  # issue #15: conversation training >= 4x fewer tokens, the whole CPU step >= 2x faster


def both_contexts(a, argv: list, backends: list) -> int:
    "Run the step in the window context (without and with shared first stretches) and the conversation context on each backend; print them side by side with #15's targets."
    S = a.share_prefix or 64  # the shared columns: GRPOConfig.share_prefix is opt-in (0 by default)
    res = run_children(
        argv, [(b, c, sh) for b in backends for c, sh in (("window", 0), ("window", S), ("conversation", S))]
    )
    if res is None:
        return 1
    fails, out = 0, {}
    for b in backends:
        w0, w, c = res[(b, "window", 0)], res[(b, "window", S)], res[(b, "conversation", S)]
        print(
            f"\n{b}: window against conversation context ({w['device']}; medians of the steps after the first; tokens: all steps)"
        )
        print(f"{'':44}{'window, whole':>14}{'window':>14}{'conversation':>14}")
        for label, key, f in [
            ("shared first stretches run once (tokens >=)", "share_prefix", "{}"),
            ("tokens per training pass (ref and update)", "train_tokens", "{:,}"),
            ("  not computed again (shared)", "train_tokens_shared", "{:,}"),
            ("answer tokens trained", "tokens_trained", "{:,}"),
            ("rollout s", "median_rollout_s", "{:.1f}"),
            ("reference pass s", "median_ref_s", "{:.1f}"),
            ("update s", "median_update_s", "{:.1f}"),
            ("step s", "median_step_s", "{:.1f}"),
            ("prompt tokens read", "prompt_read", "{:,}"),
            ("prompt tokens computed", "prompt_computed", "{:,}"),
        ]:
            print(f"{label:44}" + "".join(f"{f.format(r.get(key, 0)):>14}" for r in (w0, w, c)))
        per_tok = lambda r: r["train_tokens"] / max(r["tokens_trained"], 1)
        verdicts = {}
        for name, base in (("window, whole sequences", w0), ("window, the same trainer", w)):
            tx = per_tok(base) / per_tok(c)  # per answer token: the two contexts' episodes differ in length and count
            sx = base["median_step_s"] / c["median_step_s"]
            tv, sv = ("PASS" if tx >= TOKENS_X else "FAIL"), ("PASS" if sx >= STEP_X else "FAIL")
            print(
                f"against {name}: training tokens computed per answer token {per_tok(base):.1f} -> {per_tok(c):.1f} conversation = "
                f"{tx:.2f}x fewer (target >= {TOKENS_X:g}x) -> {tv}; whole step {base['median_step_s']:.1f} s / {c['median_step_s']:.1f} s "
                f"= {sx:.2f}x faster (target >= {STEP_X:g}x) -> {sv}"
            )
            verdicts[name] = dict(tokens_x=tx, step_x=sx, tokens_target=tv, step_target=sv)
        fails += sum(
            v == "FAIL"
            for v in (
                verdicts["window, the same trainer"]["tokens_target"],
                verdicts["window, the same trainer"]["step_target"],
            )
        )
        out[b] = dict(window_whole=w0, window=w, conversation=c, verdicts=verdicts)
    print("(judged against the window context under the same trainer: shared first stretches help both contexts)")
    if a.json:
        a.json.write_text(json.dumps(out, default=str, indent=1))
    return 1 if fails else 0


def _without(argv: list, flags: tuple) -> list:
    "argv less the given flags and their values."
    out, skip = [], False
    for x in argv:
        if skip:
            skip = False
            continue
        if x in flags:
            skip = True
            continue
        if any(x.startswith(f + "=") for f in flags):
            continue
        out.append(x)
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import importlib.util

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model",
        default=None,
        help="tiny-test, tiny, qwen3-8b-standin, or any model spec (default: the params', else tiny-test)",
    )
    ap.add_argument(
        "--backend",
        default=None,
        choices=["hf", "vllm", "both"],
        help="default: both on a CPU with vLLM installed, else hf",
    )
    ap.add_argument(
        "--params",
        default=None,
        help="a parameter file whose train: section sets the step (default on a CPU: params/pilot-cpu.yaml; '' for none)",
    )
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument(
        "--groups", type=int, default=None, help="games per step (default: the params', else 4 on a GPU, 2 on a CPU)"
    )
    ap.add_argument(
        "--k", type=int, default=None, help="episodes per game (default: the params', else 8 on a GPU, 4 on a CPU)"
    )
    ap.add_argument("--games", type=int, default=8, help="training bank size")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the params', else 384")
    ap.add_argument(
        "--max-turns",
        type=int,
        default=None,
        help="protocol deadline override (default: the params', else the protocol's; 4 on a CPU)",
    )
    ap.add_argument("--constrain", default=None, help="legal or none (default: legal for tiny models and stand-ins)")
    ap.add_argument(
        "--chars",
        type=int,
        default=None,
        help="scratchpad and message length under the constraint (default: the params', else 64)",
    )
    ap.add_argument(
        "--context",
        default="window",
        choices=["window", "conversation", "both"],
        help="the seats' context; both: each backend in each context, side by side with issue #15's targets",
    )
    ap.add_argument(
        "--share-prefix",
        type=int,
        default=None,
        help="run first stretches of at least this many tokens that sequences share once in training (0: never; default: GRPOConfig's)",
    )
    ap.add_argument(
        "--decode",
        default=None,
        choices=["auto", "dynamic", "static", "graphed"],
        help="the HF policy's decoding (default: GRPOConfig's, auto: graphed on a GPU, dynamic on a CPU)",
    )
    ap.add_argument("--standin-dir", default=str(Path(tempfile.gettempdir()) / "fairneg-qwen3-8b-standin"))
    ap.add_argument("--out", default=None, help="run folder (default: a temporary one)")
    ap.add_argument("--json", type=Path, default=None, help="write the rows and the verdict here")
    a = ap.parse_args(argv)
    import torch

    gpu = torch.cuda.is_available()
    if not gpu:
        torch.set_num_threads(2)
    if a.params is None and not gpu:
        a.params = str(Path(__file__).resolve().parent.parent / "params" / "pilot-cpu.yaml")
    if a.backend is None:
        a.backend = "both" if not gpu and importlib.util.find_spec("vllm") else ("vllm" if gpu else "hf")
    if a.context == "both":
        return both_contexts(a, argv, ["hf", "vllm"] if a.backend == "both" else [a.backend])
    if a.backend == "both":
        return both_backends(a, argv)
    res = one_backend(a, gpu)
    if a.json:
        a.json.write_text(json.dumps(res, default=str, indent=1))
    return 1 if res["verdict"] == "FAIL" else 0


if __name__ == "__main__":
    sys.exit(main())
