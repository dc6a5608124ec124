"""The annotation pipeline with tiny real models: records, resume after a kill, failures, shards, merge, CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from elical.annotate import AnnotateConfig, MatchJudge, MergeError, annotate, merge_shards
from elical.annotate.backends.hf import HFBackend
from elical.annotate.judges import JudgeQuery
from elical.data import QAItem, select_shard
from elical.records import read_parquet, read_records

TESTS = Path(__file__).resolve().parents[1]  # tests/, where tiny.py lies
QUESTIONS = [
    ("What is the capital of France?", ["Paris"]),
    ("Who wrote Hamlet?", ["William Shakespeare"]),
    ("Which river flows through Egypt?", ["The Nile"]),
    ("In which year did it happen?", ["1969"]),
    ("What is 2 + 2?", ["4", "four"]),
    ("Which fox is quick?", ["the brown fox"]),
]


def make_items(n: int = 6) -> list[QAItem]:
    base = QUESTIONS * (n // len(QUESTIONS) + 1)
    return [QAItem(f"{q} ({i})", a, dataset="nq" if i % 2 else "pararel") for i, (q, a) in enumerate(base[:n])]


CONFIG = AnnotateConfig(k=3, max_new_tokens=5, batch_size=12, chunk_size=4)


@pytest.fixture
def backend(tiny_tokenizer, tiny_llama):
    return HFBackend(tiny_llama, tiny_tokenizer, batch_size=12)


def test_records_hold_everything(backend, tmp_path):
    items = make_items(6) + [QAItem("Which is prime?", ["C"], "mmlu", "val", choices=["4", "6", "7", "8"])]
    records = annotate(items, backend, None, CONFIG, tmp_path, progress=False)
    assert [r.id for r in records] == [i.id for i in items]
    match = MatchJudge()
    for rec, item in zip(records, items):
        assert rec.failure is None and rec.k == 3
        assert rec.prompt.startswith("<|im_start|>system\nYou are a helpful assistant.")
        assert item.question in rec.prompt
        assert len(rec.greedy_tokens) == len(rec.greedy_logprobs) > 0
        assert rec.greedy_cumulative_logprob == pytest.approx(sum(rec.greedy_logprobs))
        assert len(rec.sample_logprobs) == 3 and len(rec.sample_correct) == 3 and len(rec.sample_consistent) == 3
        expected = match.judge_batch([JudgeQuery("correctness", item.question, rec.greedy_response, tuple(item.answers), tuple(item.choices) if item.choices else None)])[0]
        assert rec.greedy_correct == int(expected)
        assert rec.generation["sampling"]["n"] == 3 and rec.generation["sampling"]["top_p"] == 0.95
        assert rec.generation["greedy"]["do_sample"] is False
    assert records[-1].extra["choices"] == ["4", "6", "7", "8"]
    assert "A.4\nB.6\nC.7\nD.8" in records[-1].prompt
    # what is on disk is what was returned, and the config is written beside it
    on_disk = read_parquet(tmp_path / "records.parquet")
    assert [r.id for r in on_disk] == [r.id for r in records]
    assert on_disk[0].samples == records[0].samples
    assert AnnotateConfig.from_yaml(tmp_path / "annotate.yaml") == CONFIG
    meta = json.loads((tmp_path / "meta-0of1.json").read_text())
    assert meta["questions"] == 7 and meta["judge_calls"]["correctness"]["requested"] == 7 * 4


def test_rerun_costs_nothing(backend, tmp_path):
    items = make_items(5)
    first = annotate(items, backend, None, CONFIG, tmp_path, progress=False)
    calls = []
    original = backend.generate
    backend.generate = lambda *a, **k: calls.append(1) or original(*a, **k)
    second = annotate(items, backend, None, CONFIG, tmp_path, progress=False)
    assert not calls
    assert [r.samples for r in second] == [r.samples for r in first]


class FaultyBackend(HFBackend):
    """A real HF backend that fails on questions containing 'POISON' (a broken request)."""

    attempts = 0

    def generate(self, prompts, settings):
        if any("POISON" in self.render(p) for p in prompts):
            FaultyBackend.attempts += 1
            raise RuntimeError("CUDA error: device-side assert (simulated bad request)")
        return super().generate(prompts, settings)


def test_failed_questions_are_retried_then_recorded(tiny_tokenizer, tiny_llama, tmp_path):
    backend = FaultyBackend(tiny_llama, tiny_tokenizer)
    items = make_items(3) + [QAItem("POISON question", ["x"], "nq")]
    config = CONFIG.model_copy(update={"retries": 2})
    records = annotate(items, backend, None, config, tmp_path, progress=False)
    assert len(records) == 4
    bad = records[-1]
    assert bad.failed and "RuntimeError" in bad.failure and "after 3 tries" in bad.failure
    assert bad.greedy_response is None and bad.question == "POISON question"
    assert all(not r.failed and r.k == 3 for r in records[:3])  # the rest of the batch survived
    assert FaultyBackend.attempts == 1 + 2  # the batch, then the question alone twice
    assert read_parquet(tmp_path / "records.parquet")[-1].failure == bad.failure
    assert json.loads((tmp_path / "meta-0of1.json").read_text())["failed"] == 1


RESUME_SCRIPT = """
import sys, json
sys.path.insert(0, {tests!r})
from tiny import build_tokenizer, build_model
from elical.annotate import AnnotateConfig, annotate
from elical.annotate.backends.hf import HFBackend
from elical.data import QAItem
tok = build_tokenizer(); model = build_model(tok, "llama")
items = [QAItem(q, a, "nq") for q, a in json.load(open({items!r}))]
config = AnnotateConfig(k=2, max_new_tokens=16, batch_size=4, chunk_size=2)
annotate(items, HFBackend(model, tok, batch_size=4), None, config, {out!r}, progress=False)
"""


def test_resume_after_kill_loses_and_duplicates_nothing(tiny_tokenizer, tiny_llama, tmp_path):
    questions = [[f"{q} number {i}", a] for i, (q, a) in enumerate(QUESTIONS * 3)]  # 18 questions, 9 shard files
    (tmp_path / "items.json").write_text(json.dumps(questions))
    out = tmp_path / "run"
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(RESUME_SCRIPT.format(tests=str(TESTS), items=str(tmp_path / "items.json"), out=str(out))))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 600  # generous: the subprocess imports torch and transformers first
    while time.time() < deadline and proc.poll() is None and len(list((out / "shards").glob("part-*.parquet"))) < 2:
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    parts_before = sorted((out / "shards").glob("part-*.parquet"))
    assert 2 <= len(parts_before) < 9, "the run must be killed mid-way for this test to mean anything"
    assert not (out / "records.parquet").exists()
    kept = {p.name: p.read_bytes() for p in parts_before}
    done_before = {r.id for p in parts_before for r in read_parquet(p)}
    # rerun the same job (here in-process: the same tiny model, items and config) to completion
    items = [QAItem(q, a, "nq") for q, a in questions]
    config = AnnotateConfig(k=2, max_new_tokens=16, batch_size=4, chunk_size=2)
    annotate(items, HFBackend(tiny_llama, tiny_tokenizer, batch_size=4), None, config, out, progress=False)
    records = read_parquet(out / "records.parquet")
    ids = [r.id for r in records]
    assert len(ids) == len(set(ids)) == 18
    assert [r.question for r in records] == [q for q, _ in questions]
    for name, data in kept.items():  # shards written before the kill were not rewritten
        assert (out / "shards" / name).read_bytes() == data
    assert done_before <= set(ids)
    assert len(merge_shards([out])) == 18


def test_shards_merge_and_detect_missing_or_duplicates(backend, tmp_path):
    items = make_items(12)
    for i in range(3):
        annotate(items, backend, None, CONFIG.model_copy(update={"shard": f"{i}/3"}), tmp_path / "run", progress=False)
    merged = merge_shards([tmp_path / "run"], tmp_path / "all.parquet")
    assert sorted(r.id for r in merged) == sorted(i.id for i in items)
    assert len(read_records(tmp_path / "all.parquet")) == 12
    assert not (tmp_path / "run" / "records.parquet").exists()  # a shard run writes no merged file
    # a shard's file lost -> missing questions are named
    part = min((tmp_path / "run" / "shards").glob("part-1of3-*.parquet"))
    saved = part.read_bytes()
    part.unlink()
    with pytest.raises(MergeError, match=r"shard 1/3: \d+ of \d+ question\(s\) missing"):
        merge_shards([tmp_path / "run"])
    assert len(merge_shards([tmp_path / "run"], allow_missing=True)) < 12
    part.write_bytes(saved)
    # the same shard copied into a second folder -> duplicate ids
    (tmp_path / "copy" / "shards").mkdir(parents=True)
    (tmp_path / "copy" / "shards" / part.name).write_bytes(saved)
    with pytest.raises(MergeError, match="duplicate id"):
        merge_shards([tmp_path / "run", tmp_path / "copy"])
    # a shard never started
    (tmp_path / "run" / "shards" / "expected-2of3.json").unlink()
    for p in (tmp_path / "run" / "shards").glob("part-2of3-*.parquet"):
        p.unlink()
    with pytest.raises(MergeError, match="never started: 2/3"):
        merge_shards([tmp_path / "run"])


def test_shard_runs_only_their_items(backend, tmp_path):
    items = make_items(10)
    records = annotate(items, backend, None, CONFIG.model_copy(update={"shard": "1/2", "k": 0}), None, progress=False)
    assert [r.id for r in records] == [i.id for i in select_shard(items, "1/2")]
    assert all(r.k == 0 and r.sample_correct == [] for r in records)


def test_verbal_confidence_prompts(backend, tmp_path):
    items = make_items(2)
    examples = make_items(12)[2:]
    pool = annotate(examples, backend, None, CONFIG.model_copy(update={"k": 0}), tmp_path / "pool", progress=False)
    config = AnnotateConfig(**{**CONFIG.model_dump(), "verbal": ["verbal0", "Verbal-10"], "verbal_examples": str(tmp_path / "pool" / "records.parquet")})
    records = annotate(items, backend, None, config, None, progress=False)
    assert all(set(r.verbal) == {"verbal-0", "verbal-10"} for r in records)  # the keys Verbal-0/10 read
    from elical.annotate.verbal import load_verbal_examples

    shots = load_verbal_examples(config, items)
    assert len(shots) == 10 and {q.question for q, _ in shots} <= {r.question for r in pool}
    with pytest.raises(ValueError, match="also evaluated"):
        load_verbal_examples(config, items + examples[:1])


def test_config_yaml_roundtrip_and_defaults(tmp_path):
    default = AnnotateConfig()
    assert (default.k, default.temperature, default.top_p, default.top_k, default.max_new_tokens) == (20, 1.0, 0.95, 50, 64)
    assert default.repetition_penalty == 1.0
    (tmp_path / "c.yaml").write_text("annotate:\n  k: 5\n  repetition_penalty: 1.05\n  judges:\n    consistency: embedding\n")
    config = AnnotateConfig.from_yaml(tmp_path / "c.yaml", max_new_tokens=16)
    assert (config.k, config.repetition_penalty, config.max_new_tokens, config.judges.consistency) == (5, 1.05, 16, "embedding")
    config.to_yaml(tmp_path / "out.yaml")
    assert AnnotateConfig.from_yaml(tmp_path / "out.yaml") == config
    (tmp_path / "list.yaml").write_text("- k\n")
    with pytest.raises(ValueError, match=r"list.yaml: expected a mapping of settings, got list"):
        AnnotateConfig.from_yaml(tmp_path / "list.yaml")
    with pytest.raises(ValueError, match="shard"):
        AnnotateConfig(shard="3/2")


@pytest.fixture
def cli_inputs(tiny_tokenizer, tiny_llama, tmp_path):
    """The tiny Llama saved as a model folder and QUESTIONS as an NQ file, for the CLI."""
    tiny_llama.save_pretrained(tmp_path / "model")
    tiny_tokenizer.save_pretrained(tmp_path / "model")
    data = tmp_path / "nq_test.jsonl"
    data.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in QUESTIONS))
    return tmp_path / "model", data


def test_cli_annotate_and_merge(cli_inputs, tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app

    model, data = cli_inputs
    runner = CliRunner()
    args = ["annotate", str(data), "--model", str(model), "--k", "2", "--max-new-tokens", "4", "--device", "cpu"]
    for i in range(2):
        result = runner.invoke(app, args + ["--out", str(tmp_path / "run"), "--shard", f"{i}/2"])
        assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["annotate-merge", str(tmp_path / "run"), "--out", str(tmp_path / "all.jsonl")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert sorted(r["question"] for r in rows) == sorted(q for q, _ in QUESTIONS)
    assert all(len(r["sampling_response"]) == 2 and r["dataset"] == "nq" for r in rows)
    result = runner.invoke(app, ["annotate", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path / "x"), "--model", str(model)])
    assert result.exit_code == 2 and "not found" in result.output


def test_cli_verbal_annotate_then_evaluate(cli_inputs, tmp_path):
    """`annotate --verbal verbal0` stores the reply where the Verbal-0 estimator reads it, so evaluate scores it."""
    from typer.testing import CliRunner

    from elical.cli import app
    from elical.confidence import get_estimator
    from elical.records import read_records

    model, data = cli_inputs
    runner = CliRunner()
    result = runner.invoke(app, ["annotate", str(data), "--model", str(model), "--k", "2", "--max-new-tokens", "4",
                                 "--device", "cpu", "--verbal", "verbal0", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    records = read_records(str(tmp_path / "run"))
    assert all(set(r.verbal) == {"verbal-0"} for r in records)
    assert len(get_estimator("Verbal-0").score_batch(records)) == len(QUESTIONS)
    result = runner.invoke(app, ["evaluate", str(tmp_path / "run"), "--out", str(tmp_path / "eval"), "--resamples", "10"])
    assert result.exit_code == 0, result.output
    assert "lacks" not in result.output
    assert "Verbal-0" in (tmp_path / "eval" / "metrics.csv").read_text()


def test_without_samples_consistency_is_n_a_and_consis_sem_is_left_out(tmp_path):
    from rich.console import Console

    from elical.annotate.run import summarize
    from elical.cli.annotate_cmds import _print_annotation_summary
    from elical.confidence import applicable_estimators
    from elical.records import Record

    records = [Record(question=f"q{i}", answers=["a"], dataset="d", greedy_response="a", greedy_logprobs=[-0.1 * i],
                      greedy_correct=i % 2, samples=[], sample_consistent=[]) for i in range(1, 7)]  # k = 0
    row = summarize(records)[-1]
    assert row["consistency"] is None and row["auroc_consis_sem"] is None and row["auroc_nprob"] is not None
    console = Console(record=True, width=200)
    _print_annotation_summary(console, records, tmp_path)
    line = next(line for line in console.export_text().splitlines() if " ALL " in line)
    assert [cell.strip() for cell in line.split("│")[5:7]] == ["n/a", "n/a"], line  # consistency, AUROC Consis-Sem
    usable, skipped = applicable_estimators(records)
    assert "Consis-Sem" not in {e.name for e in usable} and "Consis-Sem" in skipped
