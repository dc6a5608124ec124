"""`elical run` with a ``retrieval:`` section: the gate's model, the target's reading, abstention's AURC table,
and a tiny world run end to end (outputs, report sections, resume, refusal of other settings)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from elical.core.fingerprint import SettingsMismatch
from elical.core.inputs import InputError
from elical.retrieval.outcome import gated_curve
from elical.run.config import load_run_config
from elical.run.report import RETRIEVAL_SECTIONS, SECTIONS
from elical.run.steps.retrieval_step import BASELINE, abstention, retrieval_gate, target_reading
from extras import RETRIEVAL, needs

TINY = {
    "name": "tiny-retrieval", "torch_threads": 1,
    "questions": {"max_train": 30, "max_eval_per_dataset": 6},
    "annotate": {"k": 2, "batch_size": 48},
    "train": {"methods": ["eli-only", "elical"], "budgets": ["all"], "seeds": [0], "stage2_passes": 40,
              "settings": {"epochs_stage1": 1, "batch_size": 8}},
    "evaluate": {"n_resamples": 5, "alignment_repeats": 2},
    "honesty": None,
    "retrieval": {"k": 1},
}


def test_the_gate_model_follows_the_honesty_rule_and_qa_needs_a_corpus(tmp_path):
    budgets = {"budgets": [100, 1000, "all"]}
    assert retrieval_gate(load_run_config(overrides={"retrieval": {}, "train": budgets})) == (1000, 0)  # seed 0
    assert retrieval_gate(load_run_config(overrides=TINY)) == ("all", 0)
    with pytest.raises(ValueError, match=r"retrieval.budget 5 is not one of train.budgets"):
        retrieval_gate(load_run_config(overrides={"retrieval": {"budget": 5}}))
    assert load_run_config().retrieval is None  # the world LM gains little from passages: off by default
    assert load_run_config("smollm2-geo-full").retrieval.k == 3
    with pytest.raises(InputError, match=r"retrieval.corpus: the qa subject has no corpus of its own"):
        load_run_config("smollm2-qa", overrides={"retrieval": {"k": 2}})
    # a saved config, read again, still takes decoding and wording from the run (not RetrievalSettings' defaults)
    load_run_config(overrides=TINY).to_yaml(tmp_path / "config.yaml")
    again = load_run_config(path=tmp_path / "config.yaml").retrieval
    assert again is not None and not {"prompts", "max_new_tokens"} & again.model_fields_set


def test_target_reading_says_met_or_by_how_much_it_missed():
    # confidence ranks the questions; retrieval fixes the two least confident wrong answers
    conf = [0.1, 0.2, 0.3, 0.4, 0.9, 0.95]
    without, with_ = [0, 0, 0, 1, 1, 1], [1, 1, 0, 1, 1, 1]
    reading, numbers = target_reading(gated_curve(conf, without, with_), 0.95, 0.5)
    # always: 5/6; 95 % of it (0.79) is reached by retrieving for the 2 least confident (5/6 too)
    assert numbers["met"] is True and numbers["retrieval_rate"] == pytest.approx(2 / 6)
    assert "reaches 100.0 % of always-retrieve accuracy" in reading and "with 33.3 % of the retrievals" in reading
    assert reading.endswith("target: >= 95 % with <= 50 %: met.")
    reading, numbers = target_reading(gated_curve(conf, without, with_), 0.95, 0.25)
    assert numbers["met"] is False and "missed by 8.3 points of retrievals" in reading
    assert "with 25 % it reaches 80.0 %" in reading  # one of the two fixed: 4/6 of 5/6


def test_abstention_table_ranks_elical_against_random_and_optimal():
    answers = pd.DataFrame({"confidence": [0.9, 0.8, 0.3, 0.2], "correct_without": [1, 1, 0, 0],
                            BASELINE + "Prob": [0.1, 0.9, 0.8, np.nan]})
    curves, table = abstention(answers, "elical-all-s0", "Prob")
    aurc = dict(zip(table.method, table.aurc))
    assert aurc["EliCal (elical-all-s0)"] == pytest.approx(aurc["optimal (perfect ranking)"])  # a perfect ranking
    assert aurc["random order (error rate)"] == pytest.approx(0.5)
    assert table.set_index("method").loc["Prob (best training-free)", "questions"] == 3  # no score, left out
    assert set(curves.method) == {"EliCal (elical-all-s0)", "Prob (best training-free)", "optimal (perfect ranking)"}


@needs(*RETRIEVAL)
def test_tiny_world_run_with_retrieval_writes_outputs_sections_and_resumes(tmp_path):
    from elical.run.pipeline import run_pipeline

    cfg = load_run_config(overrides=TINY)
    run = tmp_path / "run"
    out = run_pipeline(cfg, run, log=lambda _: None)
    folder = run / "retrieval"
    for name in ("answers.csv", "curves.csv", "summary.json", "index/passages.jsonl", "target.json", "abstention.csv",
                 "risk_coverage.csv", "../figures/retrieval.png", "../figures/risk_coverage.png"):
        assert (folder / name).exists(), name
    info = json.loads((folder / "summary.json").read_text())
    answers = pd.read_csv(folder / "answers.csv")
    assert (info["elical_model"], info["k"], info["questions"]) == ("elical-all-s0", 1, len(answers))
    assert set(answers.group) <= {"in-domain", "ood"} and set(answers.correct_with) <= {0, 1}
    assert BASELINE + "Consis-Sem" in answers.columns
    curve = pd.read_csv(folder / "curves.csv").set_index("policy")
    assert curve.loc["never", "accuracy"] == pytest.approx(answers.correct_without.mean())
    assert curve.loc["always", "accuracy"] == pytest.approx(answers.correct_with.mean())
    aurc = pd.read_csv(folder / "abstention.csv").set_index("method").aurc
    assert aurc["random order (error rate)"] == pytest.approx(1 - answers.correct_without.mean())
    assert aurc.min() == aurc["optimal (perfect ranking)"]
    md, page = (run / "report.md").read_text(), (run / "report.html").read_text()
    for section in (*SECTIONS, *RETRIEVAL_SECTIONS):
        assert f"## {section}" in md and f">{section}</h2>" in page
    assert "target: >= 95 % with <= 50 %: m" in md and md.index("## Abstention") < md.index("## Notes")
    assert "retrieval" in out.timings
    # a rerun resumes: the step is skipped and keeps its time
    made = (folder / "answers.csv").stat().st_mtime_ns
    again = run_pipeline(cfg, run, log=lambda _: None)
    assert again.timings["retrieval"] == out.timings["retrieval"] and (folder / "answers.csv").stat().st_mtime_ns == made
    # other retrieval settings are refused before anything is written (a batch size only changes speed)
    run_pipeline(load_run_config(overrides={**TINY, "retrieval": {"k": 1, "batch_size": 5}}), run, log=lambda _: None)
    with pytest.raises(SettingsMismatch, match=r"retrieval: retrieval.answers.k 1 → 2"):
        run_pipeline(load_run_config(overrides={**TINY, "retrieval": {"k": 2}}), run, log=lambda _: None)
    assert (folder / "answers.csv").stat().st_mtime_ns == made
