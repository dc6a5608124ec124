"""The one interface every generation backend implements: prompts + settings -> generations."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# A prompt is either chat messages ([{"role": ..., "content": ...}], rendered with the model's chat
# template by the backend) or a plain string sent to the model as it is.
Message = dict[str, str]
Prompt = str | list[Message]


@dataclass(frozen=True)
class GenerationSettings:
    """How to decode. ``do_sample=False`` is greedy; ``n`` answers are returned per prompt. The defaults
    are the paper's decoding settings (annotation's defaults read them from :data:`PAPER_SAMPLING`)."""

    do_sample: bool = False
    n: int = 1
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 50
    max_new_tokens: int = 64
    repetition_penalty: float = 1.0
    seed: int = 0
    logprobs: bool = True

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if not self.do_sample and self.n != 1:
            raise ValueError("greedy decoding (do_sample=False) gives one answer per prompt; set n=1")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.do_sample and self.temperature <= 0:
            raise ValueError(f"sampling needs temperature > 0, got {self.temperature}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


GREEDY = GenerationSettings()
# The paper's sampling: k=20 answers per question at temperature 1, top_p 0.95, top_k 50, at most 64 new
# tokens (the authors allowed 256, plenty for short answers) and no repetition penalty (the authors used
# 1.05, reference.md section 4).
PAPER_SAMPLING = GenerationSettings(do_sample=True, n=20)


class UnusableAnswer(ValueError):
    """A backend answered with values no record may hold (a log-probability above 0 or not finite, ...):
    annotation stops with this one-line error instead of writing them, as a retry cannot mend a server."""


@dataclass
class Generation:
    """One answer: its text, its tokens (as text) and each token's log-probability under the model.

    ``token_logprobs`` are log-probabilities of the model's own (unprocessed) next-token distribution,
    so they equal what one forward pass over prompt + answer gives; the stop token is not included.
    """

    text: str
    tokens: list[str] = field(default_factory=list)
    token_logprobs: list[float] | None = None
    finish_reason: str = "stop"
    token_ids: list[int] | None = None  # where the backend knows them (HF, vLLM)
    usage: dict[str, int] | None = None  # OpenAI's token counts of the request, where known (see token_usage)

    @property
    def cumulative_logprob(self) -> float | None:
        return None if self.token_logprobs is None else float(sum(self.token_logprobs))


def token_usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """An OpenAI ``usage`` object: prompt, completion and total tokens."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


class Backend(abc.ABC):
    """Generates answers. ``generate`` returns ``len(prompts) * settings.n`` generations, grouped by
    prompt (the n answers of prompt 0 first, then prompt 1's, ...)."""

    name: str = "backend"

    @abc.abstractmethod
    def generate(self, prompts: Sequence[Prompt], settings: GenerationSettings = GREEDY) -> list[Generation]:
        """Answer every prompt ``settings.n`` times."""

    def start_generate(self, prompts: Sequence[Prompt], settings: GenerationSettings = GREEDY) -> Callable[[], list[Generation]]:
        """:meth:`generate` in two parts: the model's work now, and the host's (token ids into texts) when the
        returned function is called, from any thread, so that the model may go on meanwhile. By default
        everything happens now."""
        answers = self.generate(prompts, settings)
        return lambda: answers

    def render(self, prompt: Prompt) -> str:
        """The text the model actually reads for this prompt (chat template applied where there is one)."""
        if isinstance(prompt, str):
            return prompt
        return "\n".join(f"{m['role']}: {m['content']}" for m in prompt)

    def describe(self) -> dict[str, Any]:
        """What to record about this backend in every output (model name, dtype, ...)."""
        return {"backend": self.name}


def group(generations: Sequence[Generation], n: int) -> list[list[Generation]]:
    """Split a flat ``generate`` result into one list of n answers per prompt."""
    if n < 1 or len(generations) % n:
        raise ValueError(f"{len(generations)} generations do not split into groups of {n}")
    return [list(generations[i : i + n]) for i in range(0, len(generations), n)]
