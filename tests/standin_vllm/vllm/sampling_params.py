"Stand-in `vllm.sampling_params` (tests only)."

from dataclasses import dataclass


@dataclass
class StructuredOutputsParams:
    json: str | dict | None = None
    grammar: str | None = None  # an xgrammar EBNF text (what fairneg hands vLLM)


@dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int = 16
    logprobs: int | None = None
    structured_outputs: StructuredOutputsParams | None = None
    allowed_token_ids: list | None = None  # the only ids that may be drawn (fairneg passes the tokenizer's, 0..n-1)
