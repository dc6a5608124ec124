"""Generation backends: HF transformers (hf), OpenAI-compatible HTTP servers (openai), vLLM (vllm)."""

from elical.annotate.backends.base import GREEDY, Backend, Generation, GenerationSettings, Prompt, group

__all__ = ["GREEDY", "Backend", "Generation", "GenerationSettings", "Prompt", "group"]
