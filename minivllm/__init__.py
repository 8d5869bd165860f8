"""minivllm: a small, complete, vLLM-shaped LLM inference engine for learning where the speed comes from."""

from pathlib import Path

__version__ = "0.1.0"

#: The embedded default model (trained by `python scripts/maint/train_tiny.py`, shipped in assets/).
DEFAULT_MODEL = str(Path(__file__).resolve().parents[1] / "assets" / "models" / "minivllm-tiny")


def __getattr__(name: str):
    # Lazy imports keep `import minivllm` cheap (the CLI and the labs import it first).
    if name == "LLM":
        from minivllm.llm import LLM

        return LLM
    if name == "SamplingParams":
        from minivllm.sampling_params import SamplingParams

        return SamplingParams
    if name == "Logprob":
        from minivllm.outputs import Logprob

        return Logprob
    if name == "diagnose":
        from minivllm.compilation.diagnose import diagnose

        return diagnose
    raise AttributeError(name)


__all__ = ["LLM", "SamplingParams", "Logprob", "DEFAULT_MODEL", "diagnose"]
