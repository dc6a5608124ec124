"""AnnotateConfig: every setting of an annotation run, loadable from and written to YAML."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

from elical.annotate.backends.base import PAPER_SAMPLING, GenerationSettings
from elical.annotate.backends.vllm import VLLMSettings
from elical.annotate.consistency import ANSWER_THRESHOLD
from elical.annotate.judge_registry import DEFAULT_JUDGE
from elical.annotate.prompts import PromptConfig
from elical.core.choices import BackendName, ConsistencyJudgeKind, CorrectnessJudgeKind, Engine
from elical.core.inputs import Device, Distinct, Range, Seed
from elical.core.redact import MASK, redact
from elical.core.settings_contract import Output, output_settings
from elical.core.yaml_config import YamlConfig
from elical.data.items import parse_shard
from elical.records.record import verbal_kind

# Settings of how, not what, is annotated are marked Output.NEVER (a rerun may change them and resume): where the
# model runs (device, server address and key), speed (batch_size, shared_prefix, concurrency), shard files
# (chunk_size, chunk_seconds), pipelining, timeouts, retries, the shard index and the engine (local or Ray, and vLLM's engine
# settings); the judges' batch size and cache likewise.
REMOVED = {"static_cache": "fast_decode", "compile_decode": "fast_decode"}


class RaySettings(BaseModel):
    """Settings of the Ray engine (``ray:`` in an annotate config)."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None  # "auto" or ray://host:10001: an existing cluster; None: start a local one
    num_cpus: Annotated[int, Range(1)] | None = None  # CPUs of the local cluster (None: all of this machine's)
    workers: Annotated[int, Range(1)] | None = None  # actors, one model each (None: one per GPU, else one per CPU)
    shards: Annotated[int, Range(1)] | None = None  # None: the count already on disk, else workers x 4
    max_retries: Annotated[int, Range(0)] = 3  # reruns of a shard whose worker died


class JudgeConfig(BaseModel):
    """Which judge decides correctness and consistency, and its settings.

    Correctness: ``verified`` (the match rules with a veto learned from hand labels of real outputs; the
    default), ``match`` (alias containment, DPR ``has_answer`` style, without its flaws), ``exact``,
    ``paper`` (the authors' ``has_answer``, flaws included), ``embedding``, ``llm``, ``cascade``
    (the offline front of :mod:`~elical.annotate.judge_front`, then the LLM for what it leaves open).
    Consistency: ``verified`` (the answer judge with the learned veto; the default), ``answer`` (answer
    cores: rules, then embeddings of what differs), ``match`` (the rules alone), ``exact``, ``embedding``, ``llm``, ``cascade``.
    ``elical judge-check`` measures them on labelled pairs.
    """

    model_config = ConfigDict(extra="forbid")

    correctness: CorrectnessJudgeKind = DEFAULT_JUDGE["correctness"]  # "verified" (elical.annotate.judge_registry)
    consistency: ConsistencyJudgeKind = DEFAULT_JUDGE["consistency"]  # "verified"
    llm_model: str | None = None  # judge model for `llm`/`cascade` (path, alias); None = the answering model
    embedding_model: str | None = None  # None = the packaged all-MiniLM-L6-v2 (`embedding` and `answer`)
    embedding_threshold: Annotated[float, Range(0, 1)] = 0.8  # `embedding`: cosine of the whole texts
    answer_threshold: Annotated[float, Range(0, 1)] = ANSWER_THRESHOLD  # `answer`: cosine of what differs
    # `verified`: a folder with correctness.safetensors and consistency.safetensors (elical.annotate.verifier,
    # fitted by `elical judge-fit`); None = the packaged ones, fitted on tests/data/labels
    verifiers: str | None = None
    batch_size: Annotated[int, Range(1), Output.NEVER] = 32
    cache: Annotated[bool, Output.NEVER] = True  # cache judgements on disk (out_dir/judge_cache.sqlite)
    # processes the rules of match/mention/exact/paper/answer run on (elical.annotate.judge_pool); 0: in this
    # process. For many cores beside a fast GPU; the same decisions either way.
    workers: Annotated[int, Range(0), Output.NEVER] = 0


class AnnotateConfig(YamlConfig):
    """An annotation run. Decoding defaults are the paper's (:data:`PAPER_SAMPLING`): k=20 samples at
    temperature 1, top_p 0.95, top_k 50, max 64 new tokens. The authors also used repetition_penalty 1.05
    (for greedy too, so their greedy is not a pure argmax); it defaults to 1.0 here and is a setting."""

    yaml_section: ClassVar[str | None] = "annotate"  # a run file holds these settings under `annotate:`

    model: str = "smollm2"
    backend: BackendName = "hf"
    # openai backend: e.g. http://127.0.0.1:8000/v1, or a list of servers to spread requests over (user:password@ is
    # redacted when saved)
    base_url: Annotated[str | list[str] | None, Output.NEVER] = None
    # openai backend: the environment variable holding the API key (None: OPENAI_API_KEY when set); never the key
    api_key_env: Annotated[str | None, Output.NEVER] = None
    concurrency: Annotated[int, Range(1), Output.NEVER] = 8  # openai backend: requests in flight on each server
    connect_timeout: Annotated[float, Range(0, low_open=True), Output.NEVER] = 10.0  # openai backend: seconds to connect
    # openai backend: seconds to wait for an answer
    read_timeout: Annotated[float, Range(0, low_open=True), Output.NEVER] = 120.0
    dtype: str = "auto"
    device: Annotated[Device, Output.NEVER] = "auto"
    k: Annotated[int, Range(0, note="0: greedy answers only")] = PAPER_SAMPLING.n
    temperature: Annotated[float, Range(0, low_open=True)] = PAPER_SAMPLING.temperature
    top_p: Annotated[float, Range(0, 1, low_open=True)] = PAPER_SAMPLING.top_p
    top_k: Annotated[int, Range(0, note="0: no top-k cut")] = PAPER_SAMPLING.top_k
    max_new_tokens: Annotated[int, Range(1)] = PAPER_SAMPLING.max_new_tokens
    repetition_penalty: Annotated[float, Range(0, low_open=True, note="1.0: none")] = PAPER_SAMPLING.repetition_penalty
    seed: Seed = 0
    # sequences per generate call (HF); prompts per call = batch_size // k
    batch_size: Annotated[int, Range(1), Output.NEVER] = 64
    shared_prefix: Annotated[bool, Output.NEVER] = True
    # hf backend: elical's decoding loop (fixed-shape buffers; CUDA graphs on a GPU, 2-3x faster there; on a CPU a
    # batch ends as soon as every answer has) instead of transformers' generate. It samples from the same distribution
    # as generate but draws other samples; its greedy answers are generate's (in float32 the same; on a bf16 GPU as often
    # as generate's own at another batch size). None (auto): on where it applies (the model on a CUDA device or a
    # CPU, its attention sdpa/eager without sliding window or soft-capping,
    # repetition_penalty 1.0), else generate; a resumed folder keeps the path its records were made with. true forces
    # it, false forces generate (the exact path). The folder's settings record the path used: fast_decode true when
    # it is elical's loop, absent for generate (as before auto existed), so a folder is never resumed on the other
    # path; its meta-*.json says which path, why, and how often fast_decode's greedy answers matched generate's.
    fast_decode: Annotated[bool | None, Output.WHEN_ON] = None
    # judge each batch in a thread while the next is generated (at most two answered batches waiting); false: one
    # stage after the other; None (auto): on where generation runs off the CPU (a GPU, a server), off on a CPU, whose
    # cores torch's threads already fill (measured 0.96x on 2 cores). The same batches, so the same records, either way.
    pipeline: Annotated[bool | None, Output.NEVER] = None
    chunk_size: Annotated[int, Range(1), Output.NEVER] = 256  # questions per output shard file
    # ... or fewer: a chunk is written once it has run this long, so a kill loses at most about this much work
    chunk_seconds: Annotated[float, Range(0, low_open=True), Output.NEVER] = 180.0
    retries: Annotated[int, Range(0), Output.NEVER] = 2
    shard: Annotated[str, Output.NEVER] = "0/1"
    # ray: every shard on Ray workers (elical.annotate.ray_engine)
    engine: Annotated[Engine, Output.NEVER] = "local"
    ray: Annotated[RaySettings, Output.NEVER] = Field(default_factory=RaySettings)
    # vllm backend: the engine's settings
    vllm: Annotated[VLLMSettings, Output.NEVER] = Field(default_factory=VLLMSettings)
    verbal: Annotated[list[Literal["verbal-0", "verbal-10"]], Distinct(min_items=0)] = Field(
        default_factory=list, description="verbalized-confidence prompts to ask (verbal-0, verbal-10; 'verbal0' also accepted)")
    verbal_examples: str | None = None  # records file of a split that is NOT evaluated (for Verbal-10)
    prompts: PromptConfig = Field(default_factory=PromptConfig)
    judges: JudgeConfig = Field(default_factory=JudgeConfig)

    @field_validator("verbal", mode="before")
    @classmethod
    def _canonical_verbal(cls, value: object) -> object:
        """Store each kind under the key the Verbal-0/10 estimators read."""
        return [verbal_kind(v) if isinstance(v, str) else v for v in value] if isinstance(value, list) else value

    @field_validator("shard")
    @classmethod
    def _check_shard(cls, value: str) -> str:
        parse_shard(value)
        return value

    @field_validator("api_key_env")
    @classmethod
    def _names_a_variable(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError("expected the name of an environment variable (letters, digits, '_'), never the key itself")
        return value

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | list[str] | None) -> str | list[str] | None:
        for url in [value] if isinstance(value, str) else value or []:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"expected an http:// or https:// address, e.g. http://127.0.0.1:8000/v1, got {redact(url)!r}")
            if MASK in url:
                raise ValueError("holds a redacted credential (a saved config never keeps one): give the real address, "
                                 "or the key in OPENAI_API_KEY")
        return value

    @model_validator(mode="after")
    def _server_backend_has_url(self) -> AnnotateConfig:
        if self.backend == "openai" and not self.base_url:
            raise ValueError("the openai backend needs base_url (e.g. http://127.0.0.1:8000/v1)")
        return self

    @model_validator(mode="before")
    @classmethod
    def _removed_settings(cls, data: object) -> object:
        for old, new in REMOVED.items():
            if isinstance(data, dict) and old in data:
                raise ValueError(f"{old} was replaced by {new} (elical's own decoding loop, faster on a GPU)")
        return data

    @model_validator(mode="after")
    def _fast_decode_is_hf(self) -> AnnotateConfig:
        if self.fast_decode and self.backend != "hf":
            raise ValueError(f"fast_decode applies to the hf backend, not {self.backend}")
        if self.fast_decode and self.repetition_penalty != 1.0:
            raise ValueError("fast_decode applies no repetition penalty: set repetition_penalty: 1.0, or leave fast_decode "
                             "unset (auto) or false to decode with generate")
        return self

    @field_serializer("base_url", when_used="json")
    def _redacted_url(self, value: str | list[str] | None) -> str | list[str] | None:
        """Saved configs (YAML, fingerprints) never hold the URLs' credentials."""
        return redact(value) if isinstance(value, str) else None if value is None else [redact(url) for url in value]

    def output_settings(self) -> dict[str, Any]:
        """The settings that decide the records (an annotation folder's fingerprint): every one but
        those that change how, not what, is annotated, so changing these never blocks a resume.
        ``fast_decode`` is recorded as true when true, left out otherwise: an annotation records the path it
        resolved auto to (:func:`elical.annotate.pipeline.annotation_fingerprint`)."""
        from elical.annotate.judges import judge_version  # the judges' rules: only here, a config stays light

        data = output_settings(self)  # the fields marked Output.NEVER left out, fast_decode only when true
        data["judges"]["versions"] = {"correctness": judge_version(self.judges.correctness),
                                      "consistency": judge_version(self.judges.consistency)}
        return data

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
