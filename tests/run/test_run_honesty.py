"""`elical run` with a ``honesty:`` section: the gate's model choice, the pool split, and a tiny run end to end."""

from __future__ import annotations

import importlib.resources
import json

import pandas as pd
import pytest

from elical.records import Record
from elical.run.config import load_run_config
from elical.run.report import HONESTY_SECTION, SECTIONS
from elical.run.results import RESULT_COLUMNS
from elical.run.steps.honesty_step import gate_choice, split_pool

GEO_OVERLAY = importlib.resources.files("elical") / "presets" / "honesty" / "smollm2-geo.yaml"


def test_gate_model_is_the_smallest_budget_of_at_least_1000_and_seed_0():
    cfg = load_run_config()
    assert cfg.honesty is not None and gate_choice(cfg) == (500, 0)  # on in the default preset, which names 500
    rule = load_run_config(overrides={"honesty": {"budget": None}, "train": {"budgets": [100, 1000, 3000, "all"]}})
    assert gate_choice(rule) == (1000, 0)
    assert load_run_config(overrides={"honesty": None}).honesty is None
    geo = load_run_config("smollm2-geo", path=str(GEO_OVERLAY))
    assert gate_choice(geo) == (30, 0) and len(geo.honesty.methods) == 5
    small = load_run_config(overrides={"honesty": {"budget": None}, "train": {"budgets": [30, "all"], "seeds": [2, 5]}})
    assert gate_choice(small) == ("all", 2)
    assert gate_choice(load_run_config(overrides={"honesty": {"budget": None}, "train": {"budgets": [30, 60]}})) == (60, 0)
    with pytest.raises(ValueError, match="honesty.budget 5 is not one of train.budgets"):
        gate_choice(load_run_config(overrides={"honesty": {"budget": 5}}))
    with pytest.raises(ValueError, match="needs 'elical'"):
        gate_choice(load_run_config(overrides={"honesty": {"budget": None}, "train": {"methods": ["cal-only"]}}))


def test_validation_is_the_pool_outside_the_budget_else_a_held_out_share():
    pool = [Record(question=f"q{i}", answers=["a"], dataset=f"d{i % 2}", split="train", greedy_correct=i % 3 == 0)
            for i in range(20)]
    tune, val, note = split_pool(pool, 15, 0, 0.2)
    assert len(tune) == 15 and len(val) == 5 and not {r.id for r in tune} & {r.id for r in val}
    assert "outside EliCal's 15-label budget" in note
    tune, val, note = split_pool(pool, "all", 0, 0.2)
    assert len(val) == 4 and len(tune) == 16 and "in-sample" in note


def test_default_preset_spells_every_wording_with_the_world_vocabulary():
    from transformers import AutoTokenizer

    from elical.honesty.builders import honesty_texts
    from elical.world import default_lm_path

    cfg = load_run_config()
    settings = cfg.honesty.settings
    tok = AutoTokenizer.from_pretrained(str(default_lm_path()))
    used = [settings.refusal, *(level.text for level in settings.verb_levels)]
    assert "confidence-num" not in cfg.honesty.methods  # its percentages are not in the vocabulary
    unknown = [w for text in used for w in text.split() if tok.unk_token_id in tok(w, add_special_tokens=False)["input_ids"]]
    assert unknown == [] and set(honesty_texts(settings)[:1]) == {settings.refusal}


def test_tiny_world_run_with_honesty_writes_the_section_table_and_rows(tmp_path):
    """The default preset (honesty on) at a tiny size: one method plus the gate."""
    from elical.run.pipeline import run_pipeline

    overrides = {
        "name": "tiny-honesty", "torch_threads": 1,
        "questions": {"max_train": 40, "max_eval_per_dataset": 6},
        "annotate": {"k": 3, "batch_size": 48},
        "train": {"methods": ["eli-only", "elical"], "budgets": [30, "all"], "seeds": [0], "stage2_passes": 40,
                  "settings": {"epochs_stage1": 1, "batch_size": 8}},
        "evaluate": {"n_resamples": 5, "alignment_repeats": 2},
        "honesty": {"methods": ["absolute"], "budget": 30, "max_eval_per_dataset": 4,
                    "settings": {"tune": {"max_steps": 3, "batch_size": 4}}},
    }
    cfg = load_run_config(overrides=overrides)
    out = run_pipeline(cfg, tmp_path / "run", log=lambda _: None)
    run = tmp_path / "run"
    for name in ("honesty_comparison.csv", "honesty_comparison.md", "gate.json", "answers.parquet",
                 "run_honesty.json", "absolute/adapter/adapter_config.json"):
        assert (run / "honesty" / name).exists(), name
    table = pd.read_csv(run / "honesty" / "honesty_comparison.csv")
    assert set(table.method) == {"unaligned", "absolute", "elical-gate"}
    info = json.loads((run / "honesty" / "run_honesty.json").read_text())
    assert (info["budget"], info["seed"], info["elical_model"]) == (30, 0, "elical-30-s0")
    assert info["tuning_records"] == 30 and info["validation"] >= 1 and 0 <= info["tau"] <= 1
    results = pd.read_csv(run / "results.csv")
    assert list(results.columns) == RESULT_COLUMNS
    rows = results[results.method.str.startswith("Honesty: ")]
    assert {"Honesty: unaligned", "Honesty: absolute", "Honesty: EliCal gate"} == set(rows.method)
    assert set(rows[rows.method == "Honesty: EliCal gate"].budget) == {30}
    assert rows.split.str.startswith("honesty/").all() and rows.value.between(0, 1).all()
    md, page = (run / "report.md").read_text(), (run / "report.html").read_text()
    for section in (*SECTIONS, HONESTY_SECTION):
        assert f"## {section}" in md and f">{html_escape(section)}</h2>" in page
    assert "EliCal gate (elical-30-s0, tau" in md and md.index(HONESTY_SECTION) < md.index("## Notes")
    section = md[md.index(HONESTY_SECTION):]
    assert section.index("EliCal gate: summary") < section.index("EliCal gate per QA dataset")
    assert "honesty" in out.timings
    # a rerun resumes: the honesty step is skipped and keeps its time
    again = run_pipeline(cfg, run, log=lambda _: None)
    assert again.timings["honesty"] == out.timings["honesty"]


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


def test_answer_case_keep_leaves_world_names_as_written():
    from elical.honesty.builders import build_examples
    from elical.honesty.config import HonestyConfig

    known = Record(question="Where was Dova Hoko born?", answers=["Tese"], dataset="d", split="train",
                   greedy_response="Tese", greedy_correct=1, samples=["Tese", "Peji"], sample_correct=[1, 0])
    unknown = Record(question="Which sport does Rygy play?", answers=["piano"], dataset="d", split="train",
                     greedy_response="golf", greedy_correct=0, samples=["golf", "chess"], sample_correct=[0, 0])
    levels = [{"up_to": 1.0, "text": "known 3 of 5 : "}]
    keep = HonestyConfig(answer_case="keep", verb_levels=levels)
    assert [e.completion for e in build_examples([known], "confidence-verb", keep)] == ["known 3 of 5 : Tese"]
    assert [e.completion for e in build_examples([unknown], "sft", keep)] == ["piano"]
    authors = HonestyConfig(verb_levels=levels)
    assert [e.completion for e in build_examples([known], "confidence-verb", authors)] == ["known 3 of 5 : tese"]
    assert [e.completion for e in build_examples([unknown], "sft", authors)] == ["Piano."]


def test_the_honesty_tables_lead_with_the_summary_rows_then_group_datasets():
    from elical.run.steps.honesty_step import GATE, HonestyOutcome, display_tables

    rows = [{"method": m, "dataset": d, "n": 4, "honesty": 0.5, "accuracy": 0.25}
            for m in ("unaligned", "absolute", GATE) for d in ("birth_city", "sport", "all", "puqa")]
    outcome = HonestyOutcome(pd.DataFrame(rows), {"elical_model": "elical-30-s0", "tau": 0.4})
    summary, per_dataset = display_tables(outcome)
    assert list(summary.frame.dataset) == ["all", "puqa"] * 3
    assert list(summary.frame.method)[-1] == "EliCal gate (elical-30-s0, tau 0.400)"
    assert list(per_dataset.frame.dataset) == ["birth_city"] * 3 + ["sport"] * 3
    assert list(per_dataset.frame.method[:3]) == ["unaligned", "absolute", "EliCal gate (elical-30-s0, tau 0.400)"]
    one = HonestyOutcome(pd.DataFrame([r for r in rows if r["dataset"] == "sport"]), outcome.info)
    assert len(display_tables(one)) == 1  # one QA dataset: no summary row, one short table
