"""AnnotateConfig: every setting of an annotation run, loadable from and written to YAML."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field, field_validator

from elical.annotate.backends.base import GenerationSettings
from elical.annotate.prompts import PromptConfig
from elical.data.items import parse_shard
from elical.yaml_config import YamlConfig

JudgeKind = Literal["match", "embedding", "llm", "cascade"]


class JudgeConfig(BaseModel):
    """Which judge decides correctness and consistency, and its settings."""

    correctness: JudgeKind = "match"
    consistency: JudgeKind = "match"
    llm_model: str | None = None  # judge model for `llm`/`cascade` (path, alias); None = the answering model
    embedding_model: str | None = None  # None = the packaged all-MiniLM-L6-v2
    embedding_threshold: float = 0.8
    batch_size: int = 32
    cache: bool = True  # cache judgements on disk (out_dir/judge_cache.sqlite)


class AnnotateConfig(YamlConfig):
    """An annotation run. Defaults are the paper's: k=20 samples at temperature 1, top_p 0.95,
    top_k 50, max 64 new tokens. The authors also used repetition_penalty 1.05 (for greedy too, so
    their greedy is not a pure argmax); it defaults to 1.0 here and is a setting."""

    yaml_section: ClassVar[str | None] = "annotate"  # a run file holds these settings under `annotate:`

    model: str = "smollm2"
    backend: Literal["hf", "openai", "vllm"] = "hf"
    base_url: str | None = None  # openai backend: e.g. http://127.0.0.1:8000/v1
    dtype: str = "auto"
    device: str = "auto"
    k: int = Field(20, ge=0)
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 50
    max_new_tokens: int = 64
    repetition_penalty: float = 1.0
    seed: int = 0
    batch_size: int = 64  # sequences per generate call (HF); prompts per call = batch_size // k
    shared_prefix: bool = True
    chunk_size: int = 256  # questions per output shard file
    retries: int = 2
    shard: str = "0/1"
    verbal: list[Literal["verbal0", "verbal10"]] = Field(default_factory=list)
    verbal_examples: str | None = None  # records file of a split that is NOT evaluated (for Verbal-10)
    prompts: PromptConfig = Field(default_factory=PromptConfig)
    judges: JudgeConfig = Field(default_factory=JudgeConfig)

    @field_validator("shard")
    @classmethod
    def _check_shard(cls, value: str) -> str:
        parse_shard(value)
        return value

    def greedy_settings(self) -> GenerationSettings:
        """Greedy decoding (with the configured repetition penalty), token log-probs on."""
        return GenerationSettings(
            do_sample=False, max_new_tokens=self.max_new_tokens, repetition_penalty=self.repetition_penalty, seed=self.seed
        )

    def sample_settings(self) -> GenerationSettings:
        """k samples per question with the paper's sampling settings."""
        return GenerationSettings(
            do_sample=True,
            n=max(1, self.k),
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=self.max_new_tokens,
            repetition_penalty=self.repetition_penalty,
            seed=self.seed,
        )
