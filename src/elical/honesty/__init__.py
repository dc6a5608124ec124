"""Alignment for Honesty (Yang et al.): refusal fine-tuning methods, refusal detection, honesty
metrics, and EliCal confidence-gated answering, side by side in one table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elical.core._lazy import lazy_exports

if TYPE_CHECKING:
    from elical.honesty.builders import (
        HonestyInputError,
        SFTExample,
        build_examples,
        check_records,
        expected_accuracy,
    )
    from elical.honesty.compare import run_honesty_comparison, run_honesty_plan
    from elical.honesty.config import METHODS, REFUSAL, HonestyConfig, HonestyPlan, TuneConfig
    from elical.honesty.gating import Gate, choose_tau
    from elical.honesty.refusal import detect_refusals, is_refusal
    from elical.honesty.scoring import evaluate_adapter, load_honesty_dir, load_honesty_set
    from elical.honesty.tune import TuneResult, tune

_LAZY = {  # name -> the submodule that defines it, imported on first use (PEP 562)
    "HonestyInputError": "elical.honesty.builders",
    "SFTExample": "elical.honesty.builders",
    "build_examples": "elical.honesty.builders",
    "check_records": "elical.honesty.builders",
    "expected_accuracy": "elical.honesty.builders",
    "run_honesty_comparison": "elical.honesty.compare",
    "run_honesty_plan": "elical.honesty.compare",
    "METHODS": "elical.honesty.config",
    "REFUSAL": "elical.honesty.config",
    "HonestyConfig": "elical.honesty.config",
    "HonestyPlan": "elical.honesty.config",
    "TuneConfig": "elical.honesty.config",
    "evaluate_adapter": "elical.honesty.scoring",
    "load_honesty_dir": "elical.honesty.scoring",
    "load_honesty_set": "elical.honesty.scoring",
    "Gate": "elical.honesty.gating",
    "choose_tau": "elical.honesty.gating",
    "detect_refusals": "elical.honesty.refusal",
    "is_refusal": "elical.honesty.refusal",
    "TuneResult": "elical.honesty.tune",
    "tune": "elical.honesty.tune",
}
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

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
