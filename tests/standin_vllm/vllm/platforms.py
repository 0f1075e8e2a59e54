"""The stand-in's `vllm.platforms`: `fairneg.llm.vllm_on_cpu` asks it whether this is vLLM's CPU build. The stand-in is
no build of vLLM, so it answers False (the engine arguments of a CUDA build, which the stand-in accepts and ignores)."""


class _Platform:
    def is_cpu(self) -> bool:
        return False


current_platform = _Platform()
