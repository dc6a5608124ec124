"""The pipelined annotation (generation of the next batch while the last is judged and written): the same
records as the serial path, the same batches whatever the timing, errors raised, stage timings recorded."""

from __future__ import annotations

import json
import threading

import pytest
from test_annotate import CONFIG, make_items

from elical.annotate import MatchJudge, annotate, decoding
from elical.annotate.backends.base import UnusableAnswer
from elical.annotate.backends.hf import HFBackend
from elical.annotate.judges import JudgeQuery
from elical.annotate.pipeline import annotation_fingerprint
from elical.annotate.stages import batch_plan
from elical.data import QAItem
from elical.records import read_parquet

SERIAL = CONFIG.model_copy(update={"pipeline": False})
PIPELINED = CONFIG.model_copy(update={"pipeline": True})


@pytest.fixture
def backend(tiny_tokenizer, tiny_llama):
    return HFBackend(tiny_llama, tiny_tokenizer, batch_size=12)


def test_batch_plan_cuts_blocks_then_batches_and_skips_what_is_done():
    items = [QAItem(f"q{i}", ["a"], id=str(i)) for i in range(10)]
    plan = batch_plan(items, set(), per_step=3, chunk_size=4)
    assert [([it.id for it in b], closes) for b, closes in plan] == [
        (["0", "1", "2"], False), (["3"], True), (["4", "5", "6"], False), (["7"], True), (["8", "9"], True)]
    resumed = batch_plan(items, {"1", "3", "4", "5", "6"}, per_step=3, chunk_size=4)
    assert [([it.id for it in b], closes) for b, closes in resumed] == [(["0", "2"], True), (["7"], True), (["8", "9"], True)]


def test_pipelined_records_equal_serial_records(backend, tmp_path):
    items = make_items(11) + [QAItem("Which is prime?", ["C"], "mmlu", "val", choices=["4", "6", "7", "8"])]
    serial = annotate(items, backend, None, SERIAL, tmp_path / "serial", progress=False)
    pipelined = annotate(items, backend, None, PIPELINED, tmp_path / "pipelined", progress=False)
    assert pipelined == serial  # answers, log-probs, labels, prompts, generation settings
    assert all(len(r.sample_consistent) == 3 for r in serial)
    parts = {name: [read_parquet(p) for p in sorted((tmp_path / name / "shards").glob("part-*.parquet"))]
             for name in ("serial", "pipelined")}
    assert len(parts["serial"]) == 3 and parts["pipelined"] == parts["serial"]  # 12 questions, 4 per shard file
    meta = json.loads((tmp_path / "pipelined" / "meta-0of1.json").read_text())
    assert meta["pipeline"] is True and meta["timings"]["generate_s"] > 0 and meta["timings"]["judge_s"] > 0
    assert set(meta["timings"]) >= {"wall_s", "generate_share", "judge_share", "write_share", "wait_share"}
    assert not [t for t in threading.enumerate() if t.name == "elical-annotate-judge"]


def test_shard_files_cut_by_time_hold_the_uninterrupted_batches(backend, tmp_path):
    items = make_items(8)
    # 6 sequences a call at k=3: 2 questions a batch, 2 batches a chunk of 4; a chunk_seconds of ~0 closes a
    # file after every batch
    small = PIPELINED.model_copy(update={"batch_size": 6, "chunk_seconds": 1e-9})
    cut = annotate(items, backend, None, small, tmp_path, progress=False)
    assert len(list((tmp_path / "shards").glob("part-*.parquet"))) == 4  # 8 questions, 2 per batch
    again = annotate(items, backend, None, small.model_copy(update={"pipeline": False, "chunk_seconds": 1e6}), None,
                     progress=False)
    assert cut == again  # the batches do not depend on when a file was cut


def test_pipeline_does_not_decide_outputs_so_either_resumes_the_other(backend, tmp_path):
    assert annotation_fingerprint(SERIAL) == annotation_fingerprint(PIPELINED)
    assert "pipeline" not in annotation_fingerprint(PIPELINED)
    items = make_items(6)
    first = annotate(items, backend, None, SERIAL, tmp_path, progress=False)
    calls: list[int] = []
    original = backend.generate
    backend.generate = lambda *a, **k: calls.append(1) or original(*a, **k)
    assert annotate(items, backend, None, PIPELINED, tmp_path, progress=False) == first
    assert not calls


class Unusable(HFBackend):
    """A real HF backend whose answers to 'BROKEN' prompts are values no record may hold."""

    def generate(self, prompts, settings):
        if any("BROKEN" in self.render(p) for p in prompts):
            raise UnusableAnswer("log-probability 0.5 > 0")
        return super().generate(prompts, settings)


def test_a_generation_error_is_raised_and_the_finished_files_stay(tiny_llama, tiny_tokenizer, tmp_path):
    items = make_items(8) + [QAItem("BROKEN question", ["x"], "nq")]
    backend = Unusable(tiny_llama, tiny_tokenizer, batch_size=12)
    with pytest.raises(UnusableAnswer, match="0.5 > 0"):
        annotate(items, backend, None, PIPELINED, tmp_path, progress=False)
    assert not [t for t in threading.enumerate() if t.name == "elical-annotate-judge"]
    kept = [r.id for p in sorted((tmp_path / "shards").glob("part-*.parquet")) for r in read_parquet(p)]
    assert kept == [it.id for it in items[:8]]  # the two whole chunks before the broken batch


def _queries(n: int) -> list[JudgeQuery]:
    """n consistency and n correctness queries over answers that are right, wrong, reworded or extended."""
    answers = ["Paris", "It is Paris.", "Lyon", "the capital is Paris, France", "William Shakespeare", "Marlowe",
               "The Nile river", "1969", "four", "I do not know"]
    golds = [("Paris",), ("William Shakespeare",), ("The Nile",), ("1969",), ("4", "four")]
    out = []
    for i in range(n):
        question, answer, gold = f"Question {i % 7}?", answers[i % len(answers)], golds[i % len(golds)]
        out += [JudgeQuery("correctness", question, answer, gold), JudgeQuery("consistency", question, answer, (answers[(i * 3) % len(answers)],))]
    return out


def test_judge_pool_decides_as_the_judge_does():
    from elical.annotate.judge_models import AnswerJudge
    from elical.annotate.judge_pool import MIN_SLICE, PooledRules, judge_pool, pooled_answer_judge
    from elical.annotate.judges import ExactJudge, MatchJudge

    queries = _queries(4 * MIN_SLICE)  # 8 slices' worth: the pool's 2 workers get half each
    consistency = [q for q in queries if q.task == "consistency"]
    with judge_pool(2) as pool:
        for judge in (MatchJudge(), ExactJudge()):
            alone = judge.judge_batch(queries)
            assert PooledRules(judge, pool, 2).judge_batch(queries) == alone and 0 < sum(alone) < len(alone)
        answer = AnswerJudge()
        rules = answer.comparisons(consistency)
        alone = answer.judge_batch(consistency)
        pooled = pooled_answer_judge(AnswerJudge(), pool, 2)
        assert pooled.comparisons(consistency) == rules and pooled.judge_batch(consistency) == alone
        assert PooledRules(MatchJudge(), pool, 2).judge_batch(queries[:10]) == MatchJudge().judge_batch(queries[:10])  # few: here


def test_annotation_with_a_judge_pool_equals_one_without(backend, tmp_path):
    items = make_items(6)
    alone = annotate(items, backend, None, SERIAL, None, progress=False)
    workers = PIPELINED.model_copy(update={"judges": PIPELINED.judges.model_copy(update={"workers": 2})})
    assert annotation_fingerprint(workers) == annotation_fingerprint(SERIAL)
    assert annotate(items, backend, None, workers, tmp_path, progress=False) == alone


class BreaksOnQuestion(MatchJudge):
    """The match judge, except that it stops at the question 'BREAK' (a judge that breaks mid-run)."""

    def judge_batch(self, queries):
        if any(q.question == "BREAK" for q in queries):
            raise ValueError("judge broke")
        return super().judge_batch(queries)


def test_a_judge_error_is_raised_and_the_judged_files_stay(backend, tmp_path):
    items = make_items(8) + [QAItem("BREAK", ["x"], "nq")]
    with pytest.raises(ValueError, match="judge broke"):
        annotate(items, backend, BreaksOnQuestion(), PIPELINED, tmp_path, progress=False)
    assert not [t for t in threading.enumerate() if t.name == "elical-annotate-judge"]
    kept = [r.id for p in sorted((tmp_path / "shards").glob("part-*.parquet")) for r in read_parquet(p)]
    assert kept == [it.id for it in items[:8]]  # the two chunks judged before the broken batch


def test_by_default_the_pipeline_runs_off_the_cpu_only(backend, tmp_path):
    from elical.annotate.pipeline import pipeline_on

    assert CONFIG.pipeline is None and not pipeline_on(CONFIG, backend)  # the tiny model is on the CPU
    assert pipeline_on(PIPELINED, backend) and not pipeline_on(SERIAL, backend)
    annotate(make_items(2), backend, None, CONFIG, tmp_path, progress=False)
    assert json.loads((tmp_path / "meta-0of1.json").read_text())["pipeline"] is False


def test_a_sampling_batch_that_fails_as_it_starts_is_retried_prompt_by_prompt(backend, tmp_path, monkeypatch):
    """The pipelined run starts the samples' batch and decodes it later; a batch that fails as it starts is tried
    again one prompt at a time, as generate_safely does: only the broken question is recorded as failed."""
    real = backend._model_part
    tried: list[int] = []

    def model_part(prompts, settings):
        tried.append(len(prompts))
        if settings.n > 1 and any("POISON" in backend.render(p) for p in prompts):
            raise RuntimeError("CUDA error: device-side assert")
        return real(prompts, settings)

    monkeypatch.setattr(backend, "_model_part", model_part)
    monkeypatch.setattr(decoding, "FAST_DECODE_CHECK", 0)  # the model calls counted below are the annotation's only
    items = make_items(3) + [QAItem("POISON question", ["x"], "nq")]
    records = annotate(items, backend, None, PIPELINED.model_copy(update={"retries": 1}), tmp_path, progress=False)
    failed = [r for r in records if r.failed]
    assert [r.question for r in failed] == ["POISON question"] and "device-side assert" in failed[0].failure
    assert all(len(r.samples) == PIPELINED.k for r in records if not r.failed)
    assert tried == [4, 4, 1, 1, 1, 1]  # the greedy batch, the samples batch, then each prompt's samples once (retries 1)
