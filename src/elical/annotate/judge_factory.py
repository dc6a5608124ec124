"""Build the correctness and consistency judges an AnnotateConfig names, cached and deduplicated."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from elical.annotate.config import AnnotateConfig, JudgeConfig
from elical.annotate.judge_front import OfflineFront
from elical.annotate.judges import CachedJudge, CascadeJudge, ExactJudge, Judge, JudgeCache, MatchJudge, MentionJudge

if TYPE_CHECKING:
    from elical.annotate.judge_models import AnswerJudge

JUDGE_NAMES = ("match", "mention", "exact", "paper", "answer", "embedding", "llm", "cascade")


def _llm_judge(config: AnnotateConfig, backend: Any) -> Judge:
    from elical.annotate.judge_models import LLMJudge

    if config.judges.llm_model:
        from elical.loading import load_model

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


def judge_maker(config: AnnotateConfig, backend: Any = None) -> Callable[[str], Judge]:
    """A function that builds the judge of a name (see :data:`JUDGE_NAMES`) once and reuses it."""
    built: dict[str, Judge] = {}
    settings: JudgeConfig = config.judges

    def make(kind: str) -> Judge:
        if kind in built:
            return built[kind]
        if kind == "match":
            judge: Judge = MatchJudge()
        elif kind == "mention":
            judge = MentionJudge()
        elif kind == "exact":
            judge = ExactJudge()
        elif kind == "paper":
            from elical.annotate.paper_judge import PaperJudge

            judge = PaperJudge()
        elif kind == "answer":
            from elical.annotate.judge_models import AnswerJudge

            judge = AnswerJudge(settings.embedding_model, settings.answer_threshold)
        elif kind == "embedding":
            from elical.annotate.judge_models import EmbeddingJudge

            judge = EmbeddingJudge(settings.embedding_model, settings.embedding_threshold)
        elif kind == "llm":
            judge = _llm_judge(config, backend)
        elif kind == "cascade":
            judge = CascadeJudge(make("llm"), OfflineFront(_answer_or_none(make)))
        else:
            raise ValueError(f"unknown judge {kind!r} (expected one of {', '.join(JUDGE_NAMES)})")
        built[kind] = judge
        return judge

    return make


def build_judges(config: AnnotateConfig, backend: Any = None, out_dir: str | Path | None = None):
    """The two judges of the config, each wrapped in dedup + the run folder's on-disk cache."""
    from elical.annotate.pipeline import Judges

    cache = JudgeCache(Path(out_dir) / "judge_cache.sqlite") if out_dir is not None and config.judges.cache else None
    make = judge_maker(config, backend)
    return Judges(CachedJudge(make(config.judges.correctness), cache), CachedJudge(make(config.judges.consistency), cache))
