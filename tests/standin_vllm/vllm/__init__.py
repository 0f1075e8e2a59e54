"""Stand-in for vLLM's offline API (tests only; see tests/standin_vllm/README.md): fairneg's transformers sampler behind
`vllm.LLM`, with LoRA adapters cached by integer id as vLLM does."""

import copy, dataclasses, json, os
from dataclasses import dataclass, field
from .sampling_params import SamplingParams
from .engine.arg_utils import EngineArgs
from standin_digest import adapter_digest

__all__ = ["LLM", "SamplingParams"]
STANDIN = True


def _log(**row):
    p = os.environ.get("STANDIN_VLLM_LOG")
    if p:
        with open(p, "a") as f:
            f.write(json.dumps(row, default=str) + "\n")


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list
    logprobs: list | None
    finish_reason: str


@dataclass
class RequestOutput:
    prompt_token_ids: list
    outputs: list = field(default_factory=list)


class LLM:
    "The offline engine: `generate` samples with fairneg's reproducible per-row sampler under the request's LoRA."

    def __init__(self, model: str, **kw):
        names = {f.name for f in dataclasses.fields(EngineArgs)}
        bad = sorted(set(kw) - names)
        if bad:
            raise TypeError(f"stand-in vllm.LLM: unknown engine argument(s) {bad}")
        self.args = EngineArgs(model=model, **kw)
        if self.args.logprobs_mode != "processed_logprobs":
            raise ValueError(
                "the stand-in returns sampling (processed) log-probs only: pass logprobs_mode='processed_logprobs'"
            )
        from fairneg.llm import load_model, stop_ids

        self.base, self.tokenizer = load_model(model, dtype="float32", device="cpu")
        self.eos_ids = stop_ids(self.base, self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_ids[0]
        self.adapters = {}  # lora_int_id -> (name, path, model): vLLM's cache is keyed by id
        from types import SimpleNamespace
        from fairneg.llm import vocab_size

        width = vocab_size(self.base)  # vLLM's ModelConfig.get_vocab_size(): the output layer's width
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(get_vocab_size=lambda: width))
        _log(event="init", model=model, **kw)

    def __del__(self):  # the tests check an engine is gone before the next one starts
        try:
            _log(event="release", model=self.args.model)
        except Exception:
            pass

    def get_tokenizer(self):
        return self.tokenizer

    def _model(self, lora):
        if lora is None:
            return self.base
        if not self.args.enable_lora:
            raise ValueError("a LoRA request on an engine started without enable_lora")
        if lora.lora_int_id not in self.adapters:
            from peft import PeftModel

            cfg = json.loads(open(os.path.join(lora.lora_path, "adapter_config.json")).read())
            if cfg["r"] > self.args.max_lora_rank:
                raise ValueError(f"LoRA rank {cfg['r']} > max_lora_rank {self.args.max_lora_rank}")
            m = PeftModel.from_pretrained(copy.deepcopy(self.base), lora.lora_path).eval()
            self.adapters[lora.lora_int_id] = (lora.lora_name, lora.lora_path, m)
            _log(event="load_lora", name=lora.lora_name, id=lora.lora_int_id, path=lora.lora_path)
        return self.adapters[lora.lora_int_id][2]

    def generate(self, prompts: list, sampling_params, lora_request=None, use_tqdm: bool = True) -> list:
        from fairneg.llm import sample_batch, compiled_grammar, compiled_ebnf, vocab_size

        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError("one SamplingParams per prompt")
        if len({(p.temperature, p.top_p) for p in params}) > 1:
            raise NotImplementedError("the stand-in samples one temperature/top_p per call")
        model = self._model(lora_request)
        ids = [list(p["prompt_token_ids"]) for p in prompts]

        def grammar(so):
            if so is None:
                return None
            if so.grammar is not None:
                return compiled_ebnf(self.tokenizer, so.grammar, vocab_size(model))
            return compiled_grammar(self.tokenizer, so.json, vocab_size(model))

        grammars = [grammar(p.structured_outputs) for p in params]
        allowed = {None if p.allowed_token_ids is None else tuple(p.allowed_token_ids) for p in params}
        if len(allowed) > 1:
            raise NotImplementedError("the stand-in takes one allowed_token_ids per call")
        allowed = allowed.pop()
        if allowed is not None and allowed != tuple(range(len(allowed))):
            raise NotImplementedError("the stand-in allows 0..n-1 only")
        outs = sample_batch(
            model,
            ids,
            [p.seed if p.seed is not None else self.args.seed for p in params],
            [p.max_tokens for p in params],
            params[0].temperature,
            params[0].top_p,
            self.eos_ids,
            self.pad_id,
            grammars if any(g is not None for g in grammars) else None,
            vocab=None if allowed is None else len(allowed),
        )
        served = None
        if lora_request is not None:
            from peft import get_peft_model_state_dict

            served = adapter_digest(get_peft_model_state_dict(model))
        _log(
            event="generate",
            lora=None if lora_request is None else lora_request.lora_name,
            n=len(prompts),
            served=served,
        )
        res = []
        for p, sp, o in zip(ids, params, outs):
            toks = list(o["completion_ids"])
            lps = (
                [{t: Logprob(float(lp), 1)} for t, lp in zip(toks, o["logprobs"])] if sp.logprobs is not None else None
            )
            text = self.tokenizer.decode(toks, skip_special_tokens=True)
            res.append(RequestOutput(p, [CompletionOutput(0, text, toks, lps, "length" if o["truncated"] else "stop")]))
        return res
