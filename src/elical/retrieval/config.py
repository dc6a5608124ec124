"""Settings of retrieval-augmented answering and of its evaluation."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from elical.annotate.backends.base import GenerationSettings
from elical.annotate.prompts import PromptConfig
from elical.inputs import Range


class RetrievalSettings(BaseModel):
    """How questions are answered with retrieval (``k`` passages, greedy decoding as annotate's) and the
    accuracy share the summary asks of the gate (``target`` of always-retrieve accuracy)."""

    model_config = ConfigDict(extra="forbid")

    corpus: str | None = None  # a JSONL corpus file: needed for the qa subject, replaces world/geo's own
    k: Annotated[int, Range(1)] = 3
    max_new_tokens: Annotated[int, Range(1)] = 64
    repetition_penalty: Annotated[float, Range(0, low_open=True, note="1.0: none")] = 1.0
    batch_size: Annotated[int, Range(1)] = 64
    retries: Annotated[int, Range(0)] = 1
    target: Annotated[float, Range(0, 1, low_open=True)] = 0.95
    prompts: PromptConfig = Field(default_factory=PromptConfig)

    def generation(self) -> GenerationSettings:
        """Greedy decoding, as the answers without retrieval were made."""
        return GenerationSettings(do_sample=False, max_new_tokens=self.max_new_tokens,
                                  repetition_penalty=self.repetition_penalty, logprobs=False)
