"""The allowed values of the configs' choice settings, as Literal types, in a leaf module (typing only).

The configs type their fields with them (``AnnotateConfig.backend``, ``TrainConfig.mode``, ...; each config
module exports its own under the same name), and the command line offers exactly these values without
importing the configs (which ``elical --help`` would pay for). A new value is added here, once; a judge is added
to :mod:`elical.annotate.judge_registry`, which the judge kinds re-exported here come from.
"""

from __future__ import annotations

from typing import Literal

from elical.annotate.judge_registry import (  # built from the judge registry
           ConsistencyJudgeKind,
           CorrectnessJudgeKind,
)

__all__ = ["BackendName", "BinStrategy", "ConsistencyJudgeKind", "Convention", "CorrectnessJudgeKind", "Engine", "LabelStrategy",
           "Method", "Mode", "Stage2Recipe", "SubjectName"]

BackendName = Literal["hf", "openai", "vllm"]  # elical.annotate.config.AnnotateConfig.backend
Engine = Literal["local", "ray"]  # AnnotateConfig.engine: annotate here, or on Ray workers
Mode = Literal["eli-only", "cal-only", "elical", "head-only"]  # elical.train.config: training modes
Stage2Recipe = Literal["full", "head", "platt", "mixed", "l2sp", "wise"]  # TrainSettings.stage2: EliCal's calibration-stage recipes
# elical.train.label_selection: which pool questions get labels (RunConfig train.label_selection, select-labels)
LabelStrategy = Literal["random", "stratified-confidence", "uncertainty", "diverse", "uncertain-diverse"]
Method = Literal["sft", "absolute", "confidence-num", "confidence-verb", "multisample"]  # elical.honesty.config
Convention = Literal["elical", "paper"]  # elical.metrics: the corrected or the authors' evaluation conventions
BinStrategy = Literal["uniform", "quantile"]  # elical.metrics: ECE bins of equal width or of equal mass
SubjectName = Literal["world", "geo", "qa"]  # elical.run.config.RunConfig.subject, retrieve-eval's --subject
