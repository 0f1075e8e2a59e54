"""The policy pass on one micro-batch (a GPU-check stage, not a test): where a NaN gradient comes from, and what
activation checkpointing costs.

    python bench/bench_policy_pass.py --section padding --model qwen3-8b-standin --json pass.json   # GPU: issue #51 (i)
    python bench/bench_policy_pass.py --section update --model /tmp/fairneg-qwen3-8b-standin \
        --steps-json grpo.json --json pass.json                                                     # GPU: issue #51 (iii)
    .venv/bin/python bench/bench_policy_pass.py --section padding --model standin --seqs 3 --len 40  # CPU: checks the script

The model is loaded as the trainer loads it (`fairneg.llm.load_model`: bf16 on a GPU) and wrapped in a fresh LoRA
adapter of `GRPOConfig`'s defaults (`fairneg.train.adapters.lora_model`). The micro-batch is built at the real run's shape:
sequences of random token ids of about `--len` tokens (their lengths spread ±25%, so rows are padded), each scoring its
last `--answer` tokens, cut by the trainer's own sizing (`grpo.pack_samples`, `grpo.micro_batches` with `GRPOConfig`'s
`micro_batch` and `token_budget`); the one computing the most tokens is used. `--steps-json` (the GRPO stage's JSON)
takes `--len` and `--answer` from the run's rows (training tokens per sequence, answer tokens per sample).

`--section padding` (issue #51 (i), the H200's NaN gradient under a finite loss): the policy pass with backward on that
micro-batch, right-padded (the trainer's layout, `llm.span_logprobs`) and left-padded (the layout before: pads' query
rows see no key), activation checkpointing off and on. Per pass: the loss and whether it is finite, log-probs not
finite, the LoRA gradients' norm and how many LoRA gradient tensors hold a value that is not finite (with the first
names), the attention operators that ran (the aten `scaled_dot_product_*` ops the profiler saw, forward and backward:
flash, efficient, cudnn or math), seconds and peak GPU memory. `--imports` first imports every module the GPU path can
reach (the old `imports` stage: a package missing on the image fails here at once, recorded, exit 1 at the end).

`--section update` (issue #51 (iii)): one `grpo.update` (reference pass, policy pass, backward, optimizer step) on the
micro-batch, activation checkpointing on, then forced off, then each again: seconds and peak GPU memory of each (the
second of each is the figure: the first carries the allocator's warm-up); an out-of-memory is recorded, not fatal.

`--json` is read (other sections kept) and written again after every measurement, so a stage stopped by its time limit
keeps what it measured.
"""

from __future__ import annotations
import argparse, importlib, json, math, os, resource, sys, time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decode import model_folder  # the stand-ins are written once, by the decode benchmark's one function


def import_sweep() -> dict:
    "Import every fairneg module the GPU path can reach (report and pilot aside: altair, vl-convert) and the carried needs."
    root = Path(__file__).resolve().parent.parent / "fairneg"
    # report/ (export with it: importing a folder's module imports its face, which re-exports the report) and the pilot
    skip = ("fairneg._modidx", "fairneg.report", "fairneg.run.pilot")
    dotted = lambda p: ".".join(p.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
    mods = sorted(m for m in map(dotted, root.rglob("*.py")) if not m.startswith(skip))
    bad = {}
    for m in mods + ["xgrammar", "trl.trainer.utils", "pynvml"]:
        try:
            importlib.import_module(m)
        except Exception as e:
            bad[m] = f"{type(e).__name__}: {e}"[:300]
    print(
        "\n".join(f"import {m}: {e}" for m, e in bad.items())
        or f"imports: all {len(mods)} fairneg modules (report, pilot aside), xgrammar, trl.trainer.utils, pynvml",
        flush=True,
    )
    return dict(modules=len(mods), failed=bad)


class Out:
    "The stage's JSON: read (other sections kept), this section rewritten after every measurement."

    def __init__(self, path: Path | None, section: str):
        self.path, self.section = path, section
        self.all = json.loads(path.read_text()) if path and path.exists() else {}
        self.d = self.all[section] = dict(done=False)

    def write(self):
        if not self.path:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.all, indent=1, default=str))
        tmp.replace(self.path)


def shape_from_steps(path: Path) -> tuple:
    "(tokens per training sequence, answer tokens per sample) of a GRPO stage's rows (None, None without rows)."
    try:
        rows = json.loads(Path(path).read_text()).get("rows") or []
    except (OSError, ValueError):
        rows = []
    seqs, toks = sum(r.get("train_sequences", 0) for r in rows), sum(r.get("train_tokens", 0) for r in rows)
    samp, ans = sum(r.get("samples", 0) for r in rows), sum(r.get("tokens_trained", 0) for r in rows)
    return (round(toks / seqs) if seqs else None), (round(ans / samp) if samp else None)


def micro_batch(tok, n: int, L: int, A: int, cfg, seed: int = 0) -> list:
    "The trainer's largest micro-batch (`Packed`s) of `n` random sequences of about `L` tokens, the last `A` scored."
    import numpy as np
    from fairneg.train.grpo import Sample, pack_samples, micro_batches

    rng = np.random.default_rng(seed)
    V = len(tok)
    samples = []
    for i in range(n):
        ln = max(A + 2, int(L * rng.uniform(0.75, 1.25)))
        ids = rng.integers(1, V, ln).tolist()
        samples.append(Sample(ids[: ln - A], ids[ln - A :], [0.0] * A, 1.0 if i % 2 else -1.0, turn=f"probe {i}"))
    mbs = micro_batches(pack_samples(samples, cfg.pack), cfg.micro_batch, cfg.token_budget)
    return max(mbs, key=lambda mb: sum(len(p.ids) for p in mb))


def set_checkpointing(model, on: bool):
    "Activation checkpointing on (as the trainer turns it on) or off."
    from types import SimpleNamespace
    from fairneg.train.grpo import use_gradient_checkpointing

    if on:
        use_gradient_checkpointing(model, SimpleNamespace(gradient_checkpointing=True, token_budget=0))
    elif hasattr(model, "activation_checkpointing_disable"):
        model.activation_checkpointing_disable()
    else:
        model.gradient_checkpointing_disable()


def left_padded_logprobs(model, S: list, SP: list, vocab: int, pad: int) -> list:
    "`span_logprobs`' pass laid out left-padded (the trainer's layout before the fix: pads' query rows see no key)."
    from fairneg.llm.logprobs import _forward_spans
    from fairneg.llm.load import model_device
    from fairneg.llm.sampling import left_pad

    ids, mask, pos = left_pad(S, pad, model_device(model))
    L = ids.shape[1]
    out = _forward_spans(
        model,
        dict(input_ids=ids, attention_mask=mask, position_ids=pos),
        lambda i, p: p + L - len(S[i]),
        S,
        SP,
        [[None] * len(sp) for sp in SP],
        1.0,
        vocab,
    )
    return [lp for r in out for lp in r]


def attention_ops(prof) -> list:
    "The aten attention operators a profile saw (which fused kernel, or the math path, ran)."
    names = {e.key for e in prof.key_averages()}
    return sorted(n for n in names if "scaled_dot_product" in n or "flash_attention" in n or "efficient_attention" in n)


def padding(a, model, tok, mb, out: Out, gpu: bool):
    "The policy pass with backward, right- and left-padded, checkpointing off and on."
    import torch
    from fairneg.llm import span_logprobs

    S, SP = [p.ids for p in mb], [p.spans for p in mb]
    adv = [s.advantage for p in mb for s in p.samples]
    pad = tok.pad_token_id or 0
    lora = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    out.d.update(
        attn_implementation=getattr(model.config, "_attn_implementation", None),
        passes=[],
        sdp_enabled=dict(
            flash=torch.backends.cuda.flash_sdp_enabled(),
            efficient=torch.backends.cuda.mem_efficient_sdp_enabled(),
            cudnn=torch.backends.cuda.cudnn_sdp_enabled(),
            math=torch.backends.cuda.math_sdp_enabled(),
        )
        if gpu
        else None,
    )
    out.write()
    model.train()
    for ckpt in (False, True):
        set_checkpointing(model, ckpt)
        for layout in ("right", "left"):
            row = dict(padding=layout, checkpointing=ckpt)
            try:
                if gpu:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                t0 = time.perf_counter()
                acts = [torch.profiler.ProfilerActivity.CPU]
                with torch.profiler.profile(activities=acts) as prof:
                    lps = (
                        span_logprobs(model, S, SP, pad_id=pad, vocab=len(tok))
                        if layout == "right"
                        else left_padded_logprobs(model, S, SP, len(tok), pad)
                    )
                    new = torch.cat(lps)
                    A = torch.cat(
                        [torch.full((len(l),), v, dtype=new.dtype, device=new.device) for l, v in zip(lps, adv)]
                    )
                    loss = -(torch.exp(new - new.detach()) * A).sum() / max(
                        len(new), 1
                    )  # the policy-gradient surrogate at ratio 1
                    loss.backward()
                if gpu:
                    torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                bad = [n for n, p in lora if p.grad is not None and not torch.isfinite(p.grad).all()]
                norm = math.sqrt(sum(float(p.grad.float().pow(2).sum()) for _, p in lora if p.grad is not None))
                row.update(
                    loss=float(loss.detach()),
                    loss_finite=math.isfinite(float(loss.detach())),
                    nonfinite_logprobs=int((~torch.isfinite(new.detach())).sum()),
                    logprobs=int(new.numel()),
                    grad_norm=norm,
                    lora_grads=len(lora),
                    lora_grads_with_grad=sum(p.grad is not None for _, p in lora),
                    lora_grads_nonfinite=len(bad),
                    nonfinite_grad_names=bad[:5],
                    all_lora_grads_finite=not bad,
                    attention_ops=attention_ops(prof),
                    seconds=round(dt, 3),
                    peak_mb=round(torch.cuda.max_memory_allocated() / 2**20, 1) if gpu else None,
                )
            except Exception as e:  # an OOM or a kernel error: recorded, the others go on
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            finally:
                model.zero_grad(set_to_none=True)
                if gpu:
                    torch.cuda.empty_cache()
            print(json.dumps(row), flush=True)
            out.d["passes"].append(row)
            out.write()
    set_checkpointing(model, False)


def update_section(a, model, tok, mb, out: Out, gpu: bool, cfg):
    "One `grpo.update` on the micro-batch, checkpointing on then forced off (each twice): seconds and peak memory."
    import torch
    from fairneg.train.adapters import lora_model  # noqa: F401  (the model is wrapped already)
    from fairneg.train.grpo import update, make_optimizer
    from fairneg.llm import span_logprobs

    samples = [s for p in mb for s in p.samples]
    pad = tok.pad_token_id or 0
    model.eval()
    with torch.no_grad():  # the sampler's log-probs: ratios start at 1
        lps = span_logprobs(model, [p.ids for p in mb], [p.spans for p in mb], pad_id=pad, vocab=len(tok))
    for s, lp in zip(samples, lps):
        s.old_logprobs = lp.float().cpu().tolist()
    opt, sch = make_optimizer(model, cfg)
    out.d["runs"] = []
    for ckpt in (True, False, True, False):
        set_checkpointing(model, ckpt)
        row = dict(checkpointing=ckpt)
        try:
            if gpu:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            up = update(model, opt, sch, samples, cfg, tok)
            if gpu:
                torch.cuda.synchronize()
            row.update(
                seconds=round(time.perf_counter() - t0, 3),
                ref_s=round(up["ref_s"], 3),
                update_s=round(up["update_s"], 3),
                grad_norm=up["grad_norm"],
                nonfinite=up["nonfinite"],
                train_tokens=up["train_tokens"],
                peak_mb=round(torch.cuda.max_memory_allocated() / 2**20, 1) if gpu else None,
            )
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
            opt.zero_grad(set_to_none=True)
            if gpu:
                torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)
        out.d["runs"].append(row)
        out.write()
    set_checkpointing(model, False)
    last = {c: [r for r in out.d["runs"] if r["checkpointing"] == c and "error" not in r] for c in (True, False)}
    if last[True] and last[False]:
        on, off = last[True][-1], last[False][-1]
        out.d.update(
            on_s=on["seconds"],
            off_s=off["seconds"],
            speedup_off=round(on["seconds"] / off["seconds"], 3),
            on_peak_mb=on["peak_mb"],
            off_peak_mb=off["peak_mb"],
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", choices=("padding", "update"), required=True)
    ap.add_argument(
        "--model",
        default=None,
        help="qwen3-8b-standin, standin or a model spec (default: qwen3-8b-standin on a GPU, standin on a CPU)",
    )
    ap.add_argument("--standin-dir", default=None)
    ap.add_argument(
        "--seqs", type=int, default=64, help="sequences the micro-batch is cut from (the trainer's sizing picks it)"
    )
    ap.add_argument("--len", type=int, default=410, help="tokens per sequence, about (the H200 run's: 104,565 / 255)")
    ap.add_argument(
        "--answer", type=int, default=53, help="answer tokens scored per sequence (the H200 run's: 13,625 / 255)"
    )
    ap.add_argument(
        "--steps-json", type=Path, default=None, help="the GRPO stage's JSON: --len and --answer from its rows"
    )
    ap.add_argument("--imports", action="store_true", help="first import every module the GPU path can reach")
    ap.add_argument("--threads", type=int, default=None, help="torch threads on a CPU")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    out = Out(a.json, a.section)
    bad = {}
    if a.imports:
        out.all["imports"] = imp = import_sweep()
        out.write()
        bad = imp["failed"]
    import torch
    from fairneg.train.adapters import lora_model
    from fairneg.train.grpo import GRPOConfig
    from fairneg.llm import load_model

    gpu = torch.cuda.is_available()
    if not gpu and a.threads:
        torch.set_num_threads(a.threads)
    a.model = a.model or ("qwen3-8b-standin" if gpu else "standin")
    if a.steps_json:
        L, A = shape_from_steps(a.steps_json)
        a.len, a.answer = L or a.len, A or a.answer
    cfg = GRPOConfig(model="probe", bank="probe")
    path = model_folder(a)
    t0 = time.perf_counter()
    base, tok = load_model(path)
    model = lora_model(base, cfg)
    mb = micro_batch(tok, a.seqs, a.len, a.answer, cfg)
    out.d.update(
        model=path,
        device=torch.cuda.get_device_name() if gpu else f"CPU ({torch.get_num_threads()} threads)",
        dtype=str(base.dtype),
        torch=torch.__version__,
        load_s=round(time.perf_counter() - t0, 2),
        micro_batch=dict(
            sequences=len(mb),
            tokens=sum(len(p.ids) for p in mb),
            scored=sum(b - s for p in mb for s, b in p.spans),
            lengths=[len(p.ids) for p in mb],
            len=a.len,
            answer=a.answer,
            cfg_micro_batch=cfg.micro_batch,
            cfg_token_budget=cfg.token_budget,
        ),
    )
    print(
        f"{a.section}: {path} ({out.d['dtype']}, {out.d['device']}), LoRA r{cfg.lora_r}; micro-batch {out.d['micro_batch']['sequences']} "
        f"sequences, {out.d['micro_batch']['tokens']} tokens ({a.len} per sequence about, {a.answer} scored)",
        flush=True,
    )
    out.write()
    if a.section == "padding":
        padding(a, model, tok, mb, out, gpu)
    else:
        update_section(a, model, tok, mb, out, gpu, cfg)
    out.d["done"] = True
    out.d["rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out.write()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
