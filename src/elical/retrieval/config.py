"""Settings of retrieval-augmented answering and of its evaluation."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from elical.annotate.backends.base import GenerationSettings
from elical.annotate.prompts import PromptConfig


class RetrievalSettings(BaseModel):
    """How questions are answered with retrieval (``k`` passages, greedy decoding as annotate's) and the
    accuracy share the summary asks of the gate (``target`` of always-retrieve accuracy)."""

    model_config = ConfigDict(extra="forbid")

    corpus: str | None = None  # a JSONL corpus file: needed for the qa subject, replaces world/geo's own
    k: int = Field(default=3, ge=1)
    max_new_tokens: int = Field(default=64, ge=1)
    repetition_penalty: float = Field(default=1.0, gt=0)
    batch_size: int = Field(default=64, ge=1)
    retries: int = Field(default=1, ge=0)
    target: float = Field(default=0.95, gt=0, le=1)
    prompts: PromptConfig = Field(default_factory=PromptConfig)

    def generation(self) -> GenerationSettings:
        """Greedy decoding, as the answers without retrieval were made."""
        return GenerationSettings(do_sample=False, max_new_tokens=self.max_new_tokens,
                                  repetition_penalty=self.repetition_penalty, logprobs=False)
