"""Annotation: generate greedy answers and k samples with a backend, judge them, write Records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elical.core._lazy import lazy_exports

if TYPE_CHECKING:
    from elical.annotate.backends.base import GREEDY, Backend, Generation, GenerationSettings, group
    from elical.annotate.config import AnnotateConfig, JudgeConfig
    from elical.annotate.judges import (
        CachedJudge,
        CascadeJudge,
        ExactJudge,
        Judge,
        JudgeCache,
        JudgeQuery,
        MatchJudge,
    )
    from elical.annotate.merge import MergeError, merge_shards
    from elical.annotate.pipeline import Judges, annotate, annotate_batch
    from elical.annotate.prompts import PromptConfig, qa_prompt, verbal_prompt
    from elical.annotate.text import normalize

_LAZY = {  # name -> the submodule that defines it, imported on first use (PEP 562)
    "GREEDY": "elical.annotate.backends.base",
    "Backend": "elical.annotate.backends.base",
    "Generation": "elical.annotate.backends.base",
    "GenerationSettings": "elical.annotate.backends.base",
    "group": "elical.annotate.backends.base",
    "AnnotateConfig": "elical.annotate.config",
    "JudgeConfig": "elical.annotate.config",
    "CachedJudge": "elical.annotate.judges",
    "CascadeJudge": "elical.annotate.judges",
    "ExactJudge": "elical.annotate.judges",
    "Judge": "elical.annotate.judges",
    "JudgeCache": "elical.annotate.judges",
    "JudgeQuery": "elical.annotate.judges",
    "MatchJudge": "elical.annotate.judges",
    "MergeError": "elical.annotate.merge",
    "merge_shards": "elical.annotate.merge",
    "Judges": "elical.annotate.pipeline",
    "annotate": "elical.annotate.pipeline",
    "annotate_batch": "elical.annotate.pipeline",
    "PromptConfig": "elical.annotate.prompts",
    "qa_prompt": "elical.annotate.prompts",
    "verbal_prompt": "elical.annotate.prompts",
    "normalize": "elical.annotate.text",
}
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "GREEDY",
    "AnnotateConfig",
    "Backend",
    "CachedJudge",
    "CascadeJudge",
    "ExactJudge",
    "Generation",
    "GenerationSettings",
    "Judge",
    "JudgeCache",
    "JudgeConfig",
    "JudgeQuery",
    "Judges",
    "MatchJudge",
    "MergeError",
    "PromptConfig",
    "annotate",
    "annotate_batch",
    "group",
    "merge_shards",
    "normalize",
    "qa_prompt",
    "verbal_prompt",
]
