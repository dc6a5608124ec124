"""vLLM offline engine (optional extra ``elical[vllm]``): ``SamplingParams(n=k)`` shares the prefill.

A thin adapter: vLLM does the batching, prefix sharing, data parallelism (one engine per GPU, or a
shard per process via ``--shard i/n``) and tensor parallelism (``tensor_parallel_size``). It is
imported only when this backend is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from elical.annotate.backends.base import GREEDY, Backend, Generation, GenerationSettings, Prompt


class VLLMBackend(Backend):
    """Generate with ``vllm.LLM`` (chat prompts rendered with the model's own chat template)."""

    name = "vllm"

    def __init__(self, llm: Any, model_name: str = "") -> None:
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        self.model_name = model_name

    @classmethod
    def from_pretrained(cls, model: str, dtype: str = "auto", tensor_parallel_size: int = 1, **kwargs: Any) -> VLLMBackend:
        """Start a vLLM engine for ``model`` (needs ``pip install 'elical[vllm]'``)."""
        try:
            from vllm import LLM
        except ImportError as err:
            raise ImportError("the vllm backend needs the extra: pip install 'elical[vllm]'") from err
        return cls(LLM(model=model, dtype=dtype, tensor_parallel_size=tensor_parallel_size, **kwargs), model_name=model)

    def render(self, prompt: Prompt) -> str:
        if isinstance(prompt, str):
            return prompt
        return self.tokenizer.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model_name}

    def sampling_params(self, settings: GenerationSettings) -> Any:
        """vLLM SamplingParams equal to the settings (temperature 0 = greedy; 1 log-prob per token)."""
        from vllm import SamplingParams

        return SamplingParams(
            n=settings.n,
            temperature=settings.temperature if settings.do_sample else 0.0,
            top_p=settings.top_p if settings.do_sample else 1.0,
            top_k=settings.top_k if settings.do_sample and settings.top_k else -1,
            max_tokens=settings.max_new_tokens,
            repetition_penalty=settings.repetition_penalty,
            seed=settings.seed,
            logprobs=0 if settings.logprobs else None,
        )

    def generate(self, prompts: Sequence[Prompt], settings: GenerationSettings = GREEDY) -> list[Generation]:
        outputs = self.llm.generate([self.render(p) for p in prompts], self.sampling_params(settings), use_tqdm=False)
        out: list[Generation] = []
        for request in outputs:
            for completion in request.outputs:
                ids = list(completion.token_ids)
                values = None
                if completion.logprobs is not None:
                    values = [float(step[t].logprob) for step, t in zip(completion.logprobs, ids)]
                stop = self.tokenizer.eos_token_id
                if ids and ids[-1] == stop:  # keep the answer's tokens only, as the HF backend does
                    ids, values = ids[:-1], values[:-1] if values is not None else None
                out.append(
                    Generation(
                        text=completion.text.strip(),
                        tokens=[self.tokenizer.decode([t]) for t in ids],
                        token_logprobs=values,
                        finish_reason=completion.finish_reason or "stop",
                        token_ids=ids,
                    )
                )
        return out
