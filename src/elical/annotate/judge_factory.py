"""Build the correctness and consistency judges an AnnotateConfig names, cached and deduplicated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elical.annotate.config import AnnotateConfig
from elical.annotate.judges import CachedJudge, CascadeJudge, Judge, JudgeCache, MatchJudge


def _llm_judge(config: AnnotateConfig, backend: Any) -> Judge:
    from elical.annotate.judge_models import LLMJudge

    if config.judges.llm_model:
        from elical.annotate.models import load_causal_lm

        model, tokenizer, source = load_causal_lm(config.judges.llm_model, dtype=config.dtype, device=config.device)
        return LLMJudge(model, tokenizer, config.prompts, config.judges.batch_size, label=source.name)
    if backend is None or not hasattr(backend, "model"):
        raise ValueError("the llm/cascade judge needs judges.llm_model, or an HF backend whose model can judge")
    return LLMJudge(backend.model, backend.tokenizer, config.prompts, config.judges.batch_size, label=getattr(backend, "model_name", None))


def build_judges(config: AnnotateConfig, backend: Any = None, out_dir: str | Path | None = None):
    """The two judges of the config, each wrapped in dedup + the run folder's on-disk cache."""
    from elical.annotate.pipeline import Judges

    cache = JudgeCache(Path(out_dir) / "judge_cache.sqlite") if out_dir is not None and config.judges.cache else None
    built: dict[str, Judge] = {}

    def make(kind: str) -> Judge:
        if kind in built:
            return built[kind]
        if kind == "match":
            judge: Judge = MatchJudge()
        elif kind == "embedding":
            from elical.annotate.judge_models import EmbeddingJudge

            judge = EmbeddingJudge(config.judges.embedding_model, config.judges.embedding_threshold)
        elif kind == "llm":
            judge = _llm_judge(config, backend)
        elif kind == "cascade":
            judge = CascadeJudge(make("llm"))
        else:
            raise ValueError(f"unknown judge {kind!r} (expected match, embedding, llm or cascade)")
        built[kind] = judge
        return judge

    return Judges(
        CachedJudge(make(config.judges.correctness), cache),
        CachedJudge(make(config.judges.consistency), cache),
    )
