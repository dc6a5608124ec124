"""Annotation: generate greedy answers and k samples with a backend, judge them, write Records."""

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
