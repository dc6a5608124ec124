"""`elical run` with ``subject: qa``: pool and evaluation kept apart by question, annotated records reused,
a run end to end with a tiny model, and parallel training giving the same models as serial training."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from elical.run.config import load_run_config
from elical.run.subjects.by_name import build_subject
from elical.run.subjects.qa import question_key

TINY_TRAIN = {"budgets": [4, "all"], "seeds": [0], "stage2_passes": 8, "min_epochs": 1, "max_epochs": 2,
              "settings": {"epochs_stage1": 1, "batch_size": 4, "max_length": 64, "tokens_per_batch": 512,
                           "row_length": 128, "save_steps": 0, "dtype": "float32", "mixed_precision": "no"}}


def _write(path, rows):
    path.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows), encoding="utf-8")
    return str(path)


def _qa(tmp_path, **qa):
    return load_run_config(overrides={"subject": "qa", "model": "tiny", "qa": qa, "honesty": None,
                                      "questions": {"max_train": None, "max_eval_per_dataset": 3}})


def test_a_source_in_pool_and_eval_is_split_by_question_and_duplicates_leave_the_pool(tmp_path):
    nq = _write(tmp_path / "nq_test.jsonl", [(f"Who is person {i}?", [f"P{i}"]) for i in range(10)])
    # a pool file named *_test is pool all the same; one of its questions is evaluated (other case, punctuation)
    extra = _write(tmp_path / "extra_test.jsonl", [("What is thing A?", ["A"]), ("what is THING b", ["B"])])
    popqa = _write(tmp_path / "popqa_test.jsonl", [("What is thing B?", ["B"]), ("What is thing C?", ["C"])])
    notes = []
    from elical.run.subjects.qa import qa_subject

    subject = qa_subject(_qa(tmp_path, pool=[nq, extra], eval=[nq, popqa]), log=notes.append)
    pool = [it for it in subject.items if it.split == "train"]
    evaluated = [it for it in subject.items if it.split != "train"]
    assert sum(it.dataset == "nq" for it in evaluated) == 3 and sum(it.dataset == "nq" for it in pool) == 7
    assert {question_key(it.question) for it in pool}.isdisjoint({question_key(it.question) for it in evaluated})
    assert [it.question for it in pool if it.dataset == "extra"] == ["What is thing A?"]
    assert notes == ["qa: 1 pool question(s) are also evaluated and were dropped from the pool"]
    assert subject.groups == {"nq": "in-domain", "popqa": "ood"}


def test_the_split_is_seeded_and_a_bad_section_is_refused_before_any_work(tmp_path):
    nq = _write(tmp_path / "nq_test.jsonl", [(f"Who is person {i}?", [f"P{i}"]) for i in range(10)])
    first, again = (build_subject(_qa(tmp_path, pool=[nq], eval=[nq])) for _ in range(2))
    assert [it.id for it in first.items] == [it.id for it in again.items]
    with pytest.raises(ValueError, match="qa.pool"):
        build_subject(_qa(tmp_path, pool=[nq]))
    with pytest.raises(Exception, match="poool"):
        _qa(tmp_path, poool=[nq])


def test_annotated_records_are_used_as_they_are(tmp_path, records_file):
    from elical.records import read_records, write_jsonl

    records = read_records(records_file)
    half = len(records) // 2
    for rec in records[:half]:
        rec.split = "train"
    write_jsonl(records[:half], tmp_path / "toy_train.jsonl")
    write_jsonl(records[half:], tmp_path / "toy_test.jsonl")
    cfg = load_run_config(overrides={"subject": "qa", "model": "tiny", "honesty": None,
                                     "qa": {"records": [str(tmp_path / "toy_train.jsonl"), str(tmp_path / "toy_test.jsonl")]},
                                     "questions": {"max_train": None, "max_eval_per_dataset": None}})
    subject = build_subject(cfg)
    assert subject.items == [] and subject.records is not None
    pool = [r for r in subject.records if r.split == "train"]
    assert 0 < len(pool) <= half and len(subject.records) - len(pool) == len(records) - half


def test_a_qa_run_end_to_end_and_parallel_training_gives_the_same_models(tmp_path, model_dir):
    from elical.run.pipeline import run_pipeline

    pool = _write(tmp_path / "pool_train.jsonl", [(f"What is the capital of country {i}?", [f"City{i}"]) for i in range(16)])
    evaluated = _write(tmp_path / "nq_test.jsonl", [(f"Who wrote book {i}?", [f"Author{i}"]) for i in range(6)])
    overrides = {"name": "qa-tiny", "subject": "qa", "model": str(model_dir), "honesty": None, "torch_threads": 1,
                 "qa": {"pool": [pool], "eval": [evaluated], "groups": {"nq": "ood"}},
                 "questions": {"max_train": None, "max_eval_per_dataset": None},
                 "annotate": {"k": 2, "max_new_tokens": 4, "batch_size": 16, "device": "cpu", "dtype": "float32",
                              "judges": {"correctness": "match", "consistency": "match", "cache": False}},
                 "train": {**TINY_TRAIN, "methods": ["cal-only", "elical"]},
                 "evaluate": {"n_resamples": 5, "alignment_repeats": 2}}
    run = tmp_path / "run"
    run_pipeline(load_run_config(overrides=overrides), run, log=lambda _: None)
    serial = pd.read_csv(run / "results.csv")
    assert set(serial.split) >= {"ood", "ood/nq"} and {"EliCal", "Cal-Only"} <= set(serial.method)
    assert "pool_train" not in pd.read_csv(run / "metrics.csv").dataset.unique()
    # the number of training processes is a speed setting: the same run folder retrains with 2 at once
    shutil.rmtree(run / "models")
    shutil.rmtree(run / "scores")
    overrides["train"]["workers"] = 2
    run_pipeline(load_run_config(overrides=overrides), run, log=lambda _: None)
    parallel = pd.read_csv(run / "results.csv")
    pd.testing.assert_frame_equal(serial, parallel)
