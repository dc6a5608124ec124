"""Bad input must stop every command with exit code 2 and one line naming the file (line, row or field)
or the option, before anything is written: one case per kind of bad input, on tiny files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from elical.cli import app
from elical.records import read_records, write_parquet
from elical.world import default_lm_path
from extras import SMOLLM2, require

WORLD_LM = str(default_lm_path())


def hb_row(question: str, **overrides) -> dict:
    """A complete HonestyBench row with two samples."""
    row = {"question": question, "answer": ["a"], "greedy_response": ["a"], "greedy_correctness": 1,
           "greedy_tokens": [["a"]], "greedy_cumulative_logprobs": [-0.1], "greedy_logprobs": [[-0.1]],
           "sampling_response": ["a", "b"], "sampling_correctness": [1, 0], "consistency_judgement": [1, 0]}
    return row | overrides


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """Tiny good and bad inputs, in ``tmp_path/in``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path / "in"
    good = write_rows(d / "nq_test.jsonl", [hb_row(f"q{i}?", greedy_correctness=i % 2) for i in range(4)])
    write_rows(d / "qa.jsonl", [{"question": "q?", "answer": ["a"]}])
    (d / "existing").write_text("keep me")
    (d / "existing_dir").mkdir()
    (d / "empty.jsonl").write_text("")
    (d / "empty_dir").mkdir()
    (d / "binary.jsonl").write_bytes(b"\x00\x01\x02PK\x03\x04\x00\x00")
    (d / "latin1.jsonl").write_bytes('{"question": "Zürich?", "answer": ["a"]}\n'.encode("latin-1"))
    (d / "latin1.yaml").write_bytes("k: 3\nsystem: Zürich\n".encode("latin-1"))
    (d / "mmlu_val.csv").write_text("Q?,1,2,3,4,5,6,B\n")
    (d / "syntax.yaml").write_text("k: 3\nmodel: [unclosed\n")
    (d / "unknown.yaml").write_text("k: 3\nbogus_key: 1\n")
    (d / "unknown_honesty.yaml").write_text("method: sft\nbogus_key: 1\n")
    (d / "unknown_run.yaml").write_text("annotate:\n  k: 3\n  bogus_key: 1\n")
    write_rows(d / "both" / "nq_test.jsonl", [hb_row("q?")])
    write_parquet(read_records(d / "both" / "nq_test.jsonl"), d / "both" / "nq_test.parquet")
    write_rows(d / "dup_ids.jsonl", [hb_row("q1?", id="x1"), hb_row("q2?", id="x1")])
    write_rows(d / "neginf.jsonl", [hb_row("q?", greedy_logprobs=[[float("-inf")]])])
    write_rows(d / "possample.jsonl", [hb_row("q?", sampling_logprobs=[[-0.1], [0.5]])])
    records = read_records(good)
    pq.write_table(pa.table({"id": [r.id for r in records], "question": [r.question for r in records],
                             "answers": [r.answers for r in records],
                             "greedy_correct": pa.array([1, 0, 5, 1], pa.int8())}), d / "bad_correct.parquet")
    pq.write_table(pa.table({"id": [r.id for r in records], "confidence": ["0.5", "0.2", "high", "0.1"]}),
                   d / "bad_confidence.parquet")
    return d


# (case id, command line with {in} = the input folder, {out} = the output path and {lm} = the packaged world
# LM, words the message must hold). The output is {in}/../out unless --out points at an existing path.
CASES = [
    # an output path that exists as the other kind
    ("evaluate-out-is-file", "evaluate {in}/nq_test.jsonl --out {in}/existing", ["--out", "existing", "existing file"]),
    ("annotate-out-is-file", "annotate {in}/qa.jsonl --out {in}/existing --model {lm}", ["--out", "existing file"]),
    ("train-out-is-file", "train {in}/nq_test.jsonl --model {lm} --out {in}/existing", ["--out", "existing file"]),
    ("run-out-is-file", "run --out {in}/existing", ["--out", "existing file"]),
    ("honesty-tune-out-is-file", "honesty-tune {in}/nq_test.jsonl --out {in}/existing", ["--out", "existing file"]),
    ("honesty-eval-out-is-file", "honesty-eval --adapter {in} --out {in}/existing", ["--out", "existing file"]),
    ("predict-out-is-folder", "predict {in} {in}/nq_test.jsonl --out {in}/existing_dir", ["--out", "existing folder"]),
    ("merge-out-is-folder", "annotate-merge {in} --out {in}/existing_dir", ["--out", "existing folder"]),
    ("predict-out-format", "predict {in} {in}/nq_test.jsonl --out {out}.txt", ["--out", "unknown format '.txt'"]),
    # unknown model alias, missing model path
    ("annotate-unknown-alias", "annotate {in}/qa.jsonl --out {out} --model smollm9", ["unknown model 'smollm9'", "alias"]),
    ("annotate-missing-path", "annotate {in}/qa.jsonl --out {out} --model ./no/such/model", ["model folder not found", "./no/such/model"]),
    ("train-unknown-alias", "train {in}/nq_test.jsonl --out {out} --model smollm9", ["unknown model 'smollm9'"]),
    ("honesty-tune-missing-path", "honesty-tune {in}/nq_test.jsonl --out {out} --model /no/model", ["model folder not found", "/no/model"]),
    ("run-missing-path", "run --out {out} --model ./no/model", ["model folder not found"]),
    # YAML syntax errors name file and line
    ("annotate-yaml-syntax", "annotate {in}/qa.jsonl --out {out} -c {in}/syntax.yaml", ["syntax.yaml:3:", "YAML syntax error"]),
    ("train-yaml-syntax", "train {in}/nq_test.jsonl --out {out} -c {in}/syntax.yaml", ["syntax.yaml:3:", "YAML syntax error"]),
    ("run-yaml-syntax", "run --out {out} -c {in}/syntax.yaml", ["syntax.yaml:3:", "YAML syntax error"]),
    ("honesty-yaml-syntax", "honesty-tune {in}/nq_test.jsonl --out {out} -c {in}/syntax.yaml", ["syntax.yaml:3:"]),
    ("yaml-not-utf8", "annotate {in}/qa.jsonl --out {out} -c {in}/latin1.yaml", ["latin1.yaml:2:", "not UTF-8"]),
    # evaluation settings
    ("ece-strategy", "evaluate {in}/nq_test.jsonl --out {out} --ece-strategy bogus", ["'--ece-strategy'", "'bogus'"]),
    ("resamples-0", "evaluate {in}/nq_test.jsonl --out {out} --resamples 0", ["n_resamples", "at least 1"]),
    ("ece-bins-0", "evaluate {in}/nq_test.jsonl --out {out} --ece-bins 0", ["ece_bins", "at least 1"]),
    ("ece-bins-huge", "evaluate {in}/nq_test.jsonl --out {out} --ece-bins 1000000000", ["ece_bins", "at most 10000"]),
    # devices, sizes, steps, limits
    ("annotate-device", "annotate {in}/qa.jsonl --out {out} --model {lm} --device tpu9", ["device:", "'tpu9'"]),
    ("honesty-device", "honesty-tune {in}/nq_test.jsonl --out {out} --model {lm} --device tpu9", ["tune.device:", "'tpu9'"]),
    ("predict-device", "predict {in} {in}/nq_test.jsonl --out {out}.csv --device tpu9", ["--device:", "'tpu9'"]),
    ("chunk-size-0", "annotate {in}/qa.jsonl --out {out} --model {lm} --chunk-size 0", ["chunk_size", "(got 0)"]),
    ("epochs-0", "train {in}/nq_test.jsonl --out {out} --model {lm} --set epochs_stage1=0", ["epochs_stage1", "(got 0)"]),
    ("steps-negative", "honesty-tune {in}/nq_test.jsonl --out {out} --model {lm} --steps -3", ["tune.max_steps", "(got -3)"]),
    ("steps-0", "honesty-tune {in}/nq_test.jsonl --out {out} --model {lm} --steps 0", ["tune.max_steps", "(got 0)"]),
    ("annotate-limit", "annotate {in}/qa.jsonl --out {out} --model {lm} --limit -1", ["'--limit'", "greater than or equal to 1"]),
    ("honesty-eval-limit", "honesty-eval --adapter {in} --out {out} --limit -1", ["'--limit'", "greater than or equal to 1"]),
    # binary and non-UTF-8 files
    ("records-binary", "evaluate {in}/binary.jsonl --out {out}", ["binary.jsonl:1:", "binary file"]),
    ("records-latin1", "evaluate {in}/latin1.jsonl --out {out}", ["latin1.jsonl:1:", "not UTF-8"]),
    ("predictions-binary", "evaluate {in}/nq_test.jsonl -p {in}/binary.jsonl --out {out}", ["binary.jsonl", "not a readable jsonl"]),
    ("qa-binary", "annotate {in}/binary.jsonl --out {out} --model {lm}", ["binary.jsonl:1:", "binary file"]),
    # Parquet rows
    ("parquet-correctness", "evaluate {in}/bad_correct.parquet --out {out}", ["bad_correct.parquet:3:", "greedy_correctness", "got 5"]),
    ("parquet-confidence", "evaluate {in}/nq_test.jsonl -p {in}/bad_confidence.parquet --out {out}",
     ["bad_confidence.parquet:3:", "confidence", "'high'"]),
    # MMLU CSV width
    ("mmlu-8-columns", "annotate {in}/mmlu_val.csv --out {out} --model {lm}", ["mmlu_val.csv:1:", "expected 6 columns", "got 8"]),
    # empty inputs
    ("qa-empty-file", "annotate {in}/empty.jsonl --out {out} --model {lm}", ["empty.jsonl", "no questions"]),
    ("qa-empty-folder", "annotate {in}/empty_dir --out {out} --model {lm}", ["empty_dir", "no QA files"]),
    ("records-empty-file", "evaluate {in}/empty.jsonl --out {out}", ["empty.jsonl", "no records"]),
    ("records-empty-folder", "evaluate {in}/empty_dir --out {out}", ["empty_dir", "no record files"]),
    # unknown keys
    ("annotate-unknown-key", "annotate {in}/qa.jsonl --out {out} -c {in}/unknown.yaml", ["unknown.yaml", "bogus_key: unknown setting"]),
    ("honesty-unknown-key", "honesty-tune {in}/nq_test.jsonl --out {out} -c {in}/unknown_honesty.yaml",
     ["unknown_honesty.yaml", "bogus_key: unknown setting"]),
    ("run-unknown-annotate-key", "run --out {out} -c {in}/unknown_run.yaml", ["unknown_run.yaml", "annotate.bogus_key: unknown setting"]),
    # the same records twice, duplicate ids, impossible log-probs
    ("jsonl-and-parquet", "evaluate {in}/both --out {out}", ["both", "nq_test.jsonl and nq_test.parquet"]),
    ("duplicate-ids", "evaluate {in}/dup_ids.jsonl --out {out}", ["dup_ids.jsonl:2:", "duplicate id 'x1'", "dup_ids.jsonl:1"]),
    ("greedy-minus-inf", "evaluate {in}/neginf.jsonl --out {out}", ["neginf.jsonl:1:", "greedy_logprobs", "-inf"]),
    ("sample-positive", "evaluate {in}/possample.jsonl --out {out}", ["possample.jsonl:1:", "sampling_logprobs", "0.5"]),
]
USAGE_ERRORS = {"annotate-limit", "honesty-eval-limit", "ece-strategy"}  # click's own checks: a boxed message


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) with its content."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def one_error_line(result) -> str:
    """The one line a refused command printed ('error: ...'), after checking it exited with 2 and said no more."""
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.mark.parametrize("case, command, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(inputs, tmp_path, case, command, words):
    if command.startswith("honesty-tune") and "--model" not in command:
        require(*SMOLLM2)  # honesty-tune resolves its default model, smollm2, first
    out = tmp_path / "out"
    args = command.format(**{"in": inputs, "out": out, "lm": WORLD_LM}).split()
    before = snapshot(tmp_path)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    if case in USAGE_ERRORS:
        lines = [line for line in lines if "Invalid value" in line]
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert len(lines) == 1 and all(word in lines[0] for word in words), result.output
    assert snapshot(tmp_path) == before  # nothing written, not even beside the output
    assert not out.exists()


def test_prediction_ids_without_a_record_are_a_note(inputs, tmp_path):
    import pandas as pd

    records = read_records(inputs / "nq_test.jsonl")
    pd.DataFrame({"id": [r.id for r in records] + ["other-1", "other-2"], "confidence": [0.5] * 6}).to_csv(
        tmp_path / "preds.csv", index=False)
    result = CliRunner().invoke(app, ["evaluate", str(inputs / "nq_test.jsonl"), "-p", str(tmp_path / "preds.csv"),
                                      "--out", str(tmp_path / "out"), "--resamples", "5"])
    assert result.exit_code == 0, result.output
    assert "note: preds: 2 of 6 prediction id(s) match no record" in " ".join(result.output.split())
    assert "2 of 6 prediction id(s) match no record" in (tmp_path / "out" / "evaluation.json").read_text()


def test_missing_optional_extra_is_one_line_naming_the_install(monkeypatch):
    """Without sentence-transformers (the `embed` extra) the answer judge stops with exit 2 and the fix."""
    import sys

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import now raises ImportError
    pairs = Path(__file__).resolve().parents[1] / "data" / "judge_pairs_consistency.jsonl"
    result = CliRunner().invoke(app, ["judge-check", str(pairs), "--judge", "answer"])
    assert result.exit_code == 2, result.output
    assert "pip install 'elical[embed]'" in result.output and len(result.output.strip().splitlines()) == 1
