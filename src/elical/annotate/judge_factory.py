"""Build the correctness and consistency judges an AnnotateConfig names, cached and deduplicated."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from elical.annotate.config import AnnotateConfig
from elical.annotate.judge_front import OfflineFront
from elical.annotate.judge_registry import BOTH, VERIFIED_RULES, judge_names
from elical.annotate.judges import (
    CachedJudge,
    CascadeJudge,
    ExactJudge,
    Judge,
    JudgeCache,
    Judges,
    MatchJudge,
    MentionJudge,
)

if TYPE_CHECKING:
    from elical.annotate.judge_models import AnswerJudge

CACHE_FLUSH_AT = 50_000  # judgements an annotation's disk cache gathers in memory before one write (JudgeCache)
JUDGE_NAMES = judge_names()  # every judge of elical.annotate.judge_registry, in its order


def _llm_judge(config: AnnotateConfig, backend: Any) -> Judge:
    from elical.annotate.judge_models import LLMJudge

    if config.judges.llm_model:
        from elical.model.loading import load_model

        model, tokenizer, source = load_model(config.judges.llm_model, dtype=config.dtype, device=config.device)
        return LLMJudge(model, tokenizer, config.prompts, config.judges.batch_size, label=source.name)
    if backend is None or not hasattr(backend, "model"):
        raise ValueError("the llm/cascade judge needs judges.llm_model, or an HF backend whose model can judge")
    return LLMJudge(backend.model, backend.tokenizer, config.prompts, config.judges.batch_size, label=getattr(backend, "model_name", None))


def _answer_or_none(make: Callable[[str], Judge]) -> AnswerJudge | None:
    """The answer judge for the cascade's consistency front, or None (its rules alone) where
    sentence-transformers or the packaged embedding model is not installed."""
    try:
        return cast("AnswerJudge", make("answer"))
    except ImportError as err:
        warnings.warn(f"cascade judge: consistency front without embeddings (its rules only): {err}", stacklevel=3)
        return None


# How each judge of the registry is built: (the annotate settings, a backend whose model the llm judge may use,
# the maker, for judges built from other judges) -> the judge. One builder per elical.annotate.judge_registry entry.
Builder = Callable[[AnnotateConfig, Any, Callable[[str], Judge]], Judge]


def _paper(config: AnnotateConfig, backend: Any, make: Callable[[str], Judge]) -> Judge:
    from elical.annotate.paper_judge import PaperJudge

    return PaperJudge()


def _answer(config: AnnotateConfig, backend: Any, make: Callable[[str], Judge]) -> Judge:
    from elical.annotate.judge_models import AnswerJudge

    return AnswerJudge(config.judges.embedding_model, config.judges.answer_threshold)


def _embedding(config: AnnotateConfig, backend: Any, make: Callable[[str], Judge]) -> Judge:
    from elical.annotate.judge_models import EmbeddingJudge

    return EmbeddingJudge(config.judges.embedding_model, config.judges.embedding_threshold)


def _verified(config: AnnotateConfig, backend: Any, make: Callable[[str], Judge]) -> Judge:
    from elical.annotate.judge_models import AnswerJudge, VerifiedJudge
    from elical.annotate.verifier import packaged_verifier

    answer = cast(AnswerJudge, make("answer"))  # its sentence model embeds for the verifiers too
    verifiers = {task: packaged_verifier(task, config.judges.verifiers) for task in BOTH}
    return VerifiedJudge({task: make(kind) for task, kind in VERIFIED_RULES.items()}, verifiers, answer.model, answer.label)


BUILDERS: dict[str, Builder] = {
    "match": lambda config, backend, make: MatchJudge(),
    "mention": lambda config, backend, make: MentionJudge(),
    "exact": lambda config, backend, make: ExactJudge(),
    "paper": _paper,
    "answer": _answer,
    "embedding": _embedding,
    "llm": lambda config, backend, make: _llm_judge(config, backend),
    "verified": _verified,
    "cascade": lambda config, backend, make: CascadeJudge(make("llm"), OfflineFront(_answer_or_none(make))),
}


def judge_maker(config: AnnotateConfig, backend: Any = None) -> Callable[[str], Judge]:
    """A function that builds the judge of a name (see :data:`JUDGE_NAMES`) once and reuses it."""
    built: dict[str, Judge] = {}

    def make(kind: str) -> Judge:
        if kind in built:
            return built[kind]
        if kind not in JUDGE_NAMES or kind not in BUILDERS:
            raise ValueError(f"unknown judge {kind!r} (expected one of {', '.join(JUDGE_NAMES)})")
        built[kind] = judge = BUILDERS[kind](config, backend, make)
        return judge

    return make


def build_judges(config: AnnotateConfig, backend: Any = None, out_dir: str | Path | None = None,
                 pool: Executor | None = None) -> Judges:
    """The two judges of the config, each wrapped in dedup + the run folder's on-disk cache; with ``pool``
    (``judges.workers`` processes, elical.annotate.judge_pool), their rules run on it."""
    cache = JudgeCache(Path(out_dir) / "judge_cache.sqlite", flush_at=CACHE_FLUSH_AT) \
        if out_dir is not None and config.judges.cache else None
    make = judge_maker(config, backend)

    def judge(kind: str) -> Judge:
        if pool is None:
            return make(kind)
        from elical.annotate.judge_pool import pooled

        return pooled(kind, make(kind), pool, config.judges.workers)

    return Judges(CachedJudge(judge(config.judges.correctness), cache), CachedJudge(judge(config.judges.consistency), cache))
