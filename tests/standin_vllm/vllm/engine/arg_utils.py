"Stand-in `vllm.engine.arg_utils` (tests only): the engine arguments `vllm.LLM` accepts here."

from dataclasses import dataclass


@dataclass
class EngineArgs:
    model: str = ""
    enable_lora: bool = False
    max_lora_rank: int = 16
    max_loras: int = 1
    seed: int = 0
    logprobs_mode: str = "raw_logprobs"
    gpu_memory_utilization: float = 0.9
    dtype: str = "auto"
    max_model_len: int | None = None
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None
    tensor_parallel_size: int = 1
