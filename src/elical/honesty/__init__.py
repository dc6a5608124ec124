"""Alignment for Honesty (Yang et al.): refusal fine-tuning methods, refusal detection, honesty
metrics, and EliCal confidence-gated answering, side by side in one table."""

from elical.honesty.builders import (
    HonestyInputError,
    SFTExample,
    build_examples,
    check_records,
    expected_accuracy,
)
from elical.honesty.compare import run_honesty_comparison, run_honesty_plan
from elical.honesty.config import METHODS, REFUSAL, HonestyConfig, HonestyPlan, TuneConfig
from elical.honesty.evaluate import evaluate_adapter, load_honesty_dir, load_honesty_set
from elical.honesty.gate import Gate, choose_tau
from elical.honesty.refusal import detect_refusals, is_refusal
from elical.honesty.tune import TuneResult, tune

__all__ = [
    "METHODS",
    "REFUSAL",
    "Gate",
    "HonestyConfig",
    "HonestyInputError",
    "HonestyPlan",
    "SFTExample",
    "TuneConfig",
    "TuneResult",
    "build_examples",
    "check_records",
    "choose_tau",
    "detect_refusals",
    "evaluate_adapter",
    "expected_accuracy",
    "is_refusal",
    "load_honesty_dir",
    "load_honesty_set",
    "run_honesty_comparison",
    "run_honesty_plan",
    "tune",
]
