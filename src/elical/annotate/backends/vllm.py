"""vLLM offline engine (optional extra ``elical[vllm]``): ``SamplingParams(n=k)`` shares the prefill.

A thin adapter: vLLM does the batching, prefix sharing and tensor parallelism; data parallelism is one
engine per GPU (``--engine ray`` starts one per GPU worker, or ``--shard i/n`` by hand), or vLLM's own
``data_parallel_size`` where the installed version has it. The engine settings come from the config
(:class:`VLLMSettings`). vllm is imported only when this backend is used.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from elical.annotate.backends.base import GREEDY, Backend, Generation, GenerationSettings, Prompt
from elical.core.inputs import Range


class VLLMSettings(BaseModel):
    """Settings of the vLLM engine (``vllm:`` in an annotate config); ``engine_kwargs`` passes any
    other ``vllm.LLM`` / ``EngineArgs`` setting through as given."""

    model_config = ConfigDict(extra="forbid")

    tensor_parallel_size: Annotated[int, Range(1)] = 1  # GPUs one model is split over
    data_parallel_size: Annotated[int, Range(1)] = 1  # model replicas inside one engine (vLLM versions that have it)
    gpu_memory_utilization: Annotated[float, Range(0, 1, low_open=True)] = 0.9  # share of each GPU's memory vLLM may take
    max_model_len: Annotated[int, Range(1)] | None = None  # None: the model's own context length
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)

    def gpus(self) -> int:
        """GPUs one engine occupies."""
        return self.tensor_parallel_size * self.data_parallel_size


def engine_kwargs(model: str, dtype: str, settings: VLLMSettings, accepted: Collection[str] | None = None) -> dict[str, Any]:
    """The keyword arguments of ``vllm.LLM`` for the settings; ``accepted`` (the names the installed
    vLLM takes; None = no check) turns a setting it lacks into a ValueError naming it."""
    kwargs: dict[str, Any] = {"model": model, "dtype": dtype, "tensor_parallel_size": settings.tensor_parallel_size,
                              "gpu_memory_utilization": settings.gpu_memory_utilization}
    if settings.max_model_len is not None:
        kwargs["max_model_len"] = settings.max_model_len
    if settings.data_parallel_size > 1:
        kwargs["data_parallel_size"] = settings.data_parallel_size
    repeated = sorted(set(settings.engine_kwargs) & set(kwargs))
    if repeated:
        raise ValueError(f"vllm.engine_kwargs repeats {', '.join(repeated)}: set it as a setting of its own (or the model/dtype)")
    kwargs.update(settings.engine_kwargs)
    unknown = sorted(set(kwargs) - set(accepted)) if accepted is not None else []
    if unknown:
        raise ValueError(f"the installed vllm does not accept {', '.join(unknown)} (a newer version may; or drop the setting)")
    return kwargs


def accepted_kwargs() -> set[str]:
    """The keyword arguments the installed ``vllm.LLM`` takes: its own and those of ``EngineArgs``."""
    import dataclasses
    import inspect

    from vllm import LLM, EngineArgs

    return {*inspect.signature(LLM.__init__).parameters, *(f.name for f in dataclasses.fields(EngineArgs))} - {"self", "kwargs"}


class VLLMBackend(Backend):
    """Generate with ``vllm.LLM`` (chat prompts rendered with the model's own chat template)."""

    name = "vllm"

    def __init__(self, llm: Any, model_name: str = "") -> None:
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        self.model_name = model_name

    @classmethod
    def from_pretrained(cls, model: str, dtype: str = "auto", settings: VLLMSettings | None = None) -> VLLMBackend:
        """Start a vLLM engine for ``model`` with the engine settings (needs ``pip install 'elical[vllm]'``)."""
        try:
            from vllm import LLM
        except ImportError as err:
            raise ImportError("the vllm backend needs the extra: pip install 'elical[vllm]'") from err
        return cls(LLM(**engine_kwargs(model, dtype, settings or VLLMSettings(), accepted_kwargs())), model_name=model)

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
