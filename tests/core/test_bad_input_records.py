"""Second battery of bad data files: records, predictions, QA sets and configs holding values of the wrong
type or shape, values that contradict each other, repeated keys and deep nesting. Each is refused by a
general rule of the reader, as one line naming the file, the line (or row), the field and what was
expected, with exit code 2 and nothing written; good files still read exactly as before."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_bad_input import one_error_line, snapshot
from typer.testing import CliRunner
from typing_extensions import Self

from elical.cli import app
from elical.records import Record, read_records, record_to_dict, write_jsonl, write_parquet
from elical.world import default_lm_path

WORLD_LM = str(default_lm_path())
DEEP = "[" * 100_000 + "]" * 100_000


def hb_row(question: str, **fields: Any) -> dict[str, Any]:
    """A complete HonestyBench row with two samples, then ``fields``."""
    row = {"question": question, "answer": ["a"], "greedy_response": ["a"], "greedy_correctness": 1,
           "greedy_tokens": [["a", "b"]], "greedy_cumulative_logprobs": [-0.3], "greedy_logprobs": [[-0.1, -0.2]],
           "sampling_response": ["a", "b"], "sampling_correctness": [1, 0], "consistency_judgement": [1, 0]}
    return row | fields


def good_rows() -> list[dict[str, Any]]:
    """Four valid rows, two correct, to put a bad row after."""
    return [hb_row(f"good {i}?", greedy_correctness=i % 2) for i in range(4)]


def jsonl(*rows: dict[str, Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def bad_second(**fields: Any) -> str:
    """A records file whose second row (line 2) has ``fields``."""
    rows = good_rows()
    rows[1] = rows[1] | fields
    return jsonl(*rows)


def raw_second(line: str) -> str:
    """A records file whose second line is ``line`` as written."""
    rows = good_rows()
    return json.dumps(rows[0]) + "\n" + line + "\n" + jsonl(*rows[2:])


def parquet_of(records: list[Record], **replace: list[Any]) -> Callable[[Path], None]:
    """Writes ``records`` as elical Parquet with the named columns replaced by raw values."""
    def write(path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        write_parquet(records, path)
        table = pq.read_table(path)
        for name, values in replace.items():
            index = table.column_names.index(name)
            table = table.set_column(index, pa.field(name, table.schema.field(name).type), pa.array(values, table.schema.field(name).type))
        pq.write_table(table, path)
    return write


def table_of(columns: dict[str, Any], names: list[str] | None = None) -> Callable[[Path], None]:
    """Writes a Parquet file of the given columns (pyarrow infers the types; ``names`` may repeat one)."""
    def write(path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrays = [pa.array(v) for v in columns.values()]
        pq.write_table(pa.Table.from_arrays(arrays, names=names or list(columns)), path)
    return write


def good_records(n: int = 4) -> list[Record]:
    return [Record(question=f"good {i}?", answers=["a"], dataset="nq", greedy_response="a", greedy_tokens=["a", "b"],
                   greedy_logprobs=[-0.1, -0.2], greedy_cumulative_logprob=-0.3, greedy_correct=i % 2,
                   samples=["a", "b"], sample_correct=[1, 0], sample_consistent=[1, 0]) for i in range(n)]


def with_second(**fields: Any) -> list[Record]:
    records = good_records()
    for name, value in fields.items():
        setattr(records[1], name, value)
    return records


IDS = [f"id{i}" for i in range(4)]

# file name -> its text, or a function writing it
FILES: dict[str, str | Callable[[Path], None]] = {
    "nq_test.jsonl": jsonl(*[hb_row(f"good {i}?", greedy_correctness=i % 2, id=IDS[i]) for i in range(4)]),
    # gold aliases: strings only
    "answer_null.jsonl": bad_second(answer=[None]),
    "answer_nested.jsonl": bad_second(answer=[["Treilul"]]),
    "answer_number.jsonl": bad_second(answer=["a", 7]),
    "answer_bool.jsonl": bad_second(answer=[True]),
    "answer_object.jsonl": bad_second(answer={"text": "a"}),
    "answer_null_alone.jsonl": bad_second(answer=None),
    # failure: a reason (a non-empty string) or null
    "failure_false.jsonl": bad_second(failure=False),
    "failure_true.jsonl": bad_second(failure=True),
    "failure_empty.jsonl": bad_second(failure="\t"),
    "failure_number.jsonl": bad_second(failure=0),
    "failure_list.jsonl": bad_second(failure=["timeout"]),
    "failure_bool.parquet": table_of({"question": ["q1?", "q2?"], "answer": [["a"], ["b"]], "greedy_correctness": [1, 0],
                                      "failure": [None, False]}),
    "failure_empty.parquet": parquet_of(good_records(), failure=[None, None, "", None]),
    # descriptive fields: strings (or null), never stringified
    "id_list.jsonl": bad_second(id=["x1"]),
    "id_number.jsonl": bad_second(id=17),
    "id_float.jsonl": bad_second(id=1.5),
    "id_bool.jsonl": bad_second(id=True),
    "dataset_list.jsonl": bad_second(dataset=["nq"]),
    "dataset_number.jsonl": bad_second(dataset=3),
    "split_object.jsonl": bad_second(split={"name": "test"}),
    "prompt_list.jsonl": bad_second(prompt=[{"role": "user", "content": "q"}]),
    "id_number.parquet": table_of({"question": ["q1?", "q2?"], "answer": [["a"], ["b"]], "id": [1, 2]}),
    # log-probs: numbers (not booleans), finite, <= 0; the cumulative one their sum
    "cumulative_off.jsonl": bad_second(greedy_cumulative_logprobs=[-5.0]),
    "cumulative_sign.jsonl": bad_second(greedy_cumulative_logprobs=[0.3]),
    "cumulative_tokens.jsonl": bad_second(greedy_tokens=[["a", "b", "c"]], greedy_logprobs=[[-1.0, -2.0, -3.0]],
                                          greedy_cumulative_logprobs=[-5.9]),
    "cumulative_nan.jsonl": raw_second(json.dumps(hb_row("nan?"))
                                       .replace('"greedy_cumulative_logprobs": [-0.3]', '"greedy_cumulative_logprobs": [NaN]')),
    "cumulative_off.parquet": parquet_of(with_second(greedy_cumulative_logprob=-2.5)),
    "greedy_nan.jsonl": raw_second(json.dumps(hb_row("nan?")).replace('"greedy_logprobs": [[-0.1, -0.2]]',
                                                                      '"greedy_logprobs": [[-0.1, NaN]]')),
    "greedy_infinity.jsonl": raw_second(json.dumps(hb_row("inf?")).replace('"greedy_logprobs": [[-0.1, -0.2]]',
                                                                           '"greedy_logprobs": [[Infinity, -0.2]]')),
    "greedy_overflow.jsonl": raw_second(json.dumps(hb_row("big?")).replace('"greedy_logprobs": [[-0.1, -0.2]]',
                                                                           '"greedy_logprobs": [[-0.1, -1e400]]')),
    "greedy_bool.jsonl": bad_second(greedy_logprobs=[[True, -0.2]]),
    "greedy_string.jsonl": bad_second(greedy_logprobs=[["-0.1", -0.2]]),
    "sample_nan.jsonl": raw_second(json.dumps(hb_row("s?", sampling_logprobs=[[-0.1], [-0.2]]))
                                   .replace('"sampling_logprobs": [[-0.1], [-0.2]]', '"sampling_logprobs": [[-0.1], [NaN]]')),
    "greedy_positive.parquet": parquet_of(with_second(greedy_logprobs=[-0.1, 0.4], greedy_cumulative_logprob=0.3)),
    "sample_nan.parquet": parquet_of(with_second(sample_logprobs=[[-0.1], [float("nan")]])),
    # verbal: an object of reply texts; generation: an object
    "verbal_list.jsonl": bad_second(verbal=["0.9"]),
    "verbal_number.jsonl": bad_second(verbal={"verbal-0": 0.9}),
    "verbal_null_reply.jsonl": bad_second(verbal={"verbal-10": None}),
    "verbal_twice.jsonl": bad_second(verbal={"verbal0": "0.9", "Verbal-0": "0.8"}),
    "verbal_text.jsonl": bad_second(verbal="Confidence: 0.9"),
    "verbal_null.parquet": parquet_of(good_records(), verbal=[[], [("verbal-0", None)], [], []]),
    "generation_list.jsonl": bad_second(generation=[["model", "x"]]),
    "generation_text.jsonl": bad_second(generation="temperature=1"),
    "generation_number.jsonl": bad_second(generation=1),
    "generation_list.parquet": parquet_of(good_records(), generation=["{}", "[1, 2]", "{}", "{}"]),
    "generation_bad.parquet": parquet_of(good_records(), generation=["{}", '{"a": 1, "a": 2}', "{}", "{}"]),
    # one key once per object, one column once per table
    "dup_question.jsonl": raw_second('{"question": "q?", "answer": ["a"], "question": "r?", "greedy_correctness": 1}'),
    "dup_nested.jsonl": raw_second(json.dumps(hb_row("g?", generation={"k": 1})).replace('{"k": 1}', '{"k": 1, "k": 2}')),
    "dup_column.parquet": table_of({"question": ["q1?"], "answer": [["a"]], "q2": ["q2?"]},
                                   names=["question", "answer", "question"]),
    # nesting
    "deep_row.jsonl": raw_second(DEEP),
    "deep_field.jsonl": raw_second(json.dumps(hb_row("d?")).replace('"answer": ["a"]', '"answer": ["a"], "notes": '
                                                                     + "[" * 150 + "]" * 150)),
    "deep_generation.jsonl": raw_second(json.dumps(hb_row("d?")).replace('"answer": ["a"]', '"answer": ["a"], "generation": '
                                                                          + '{"a": ' * 120 + "1" + "}" * 120)),
    # predictions
    "pred_true.jsonl": jsonl({"id": IDS[0], "confidence": 0.5}, {"id": IDS[1], "confidence": True}),
    "pred_false.jsonl": jsonl({"id": IDS[0], "confidence": False}),
    "pred_list.jsonl": jsonl({"id": IDS[0], "confidence": 0.5}, {"id": IDS[1], "confidence": [0.5]}),
    "pred_null.jsonl": jsonl({"id": IDS[0], "confidence": None}),
    "pred_id_number.jsonl": jsonl({"id": IDS[0], "confidence": 0.5}, {"id": 12, "confidence": 0.5}),
    "pred_id_list.jsonl": jsonl({"id": [IDS[0]], "confidence": 0.5}),
    "pred_dup_key.jsonl": jsonl({"id": IDS[0], "confidence": 0.5}) + f'{{"id": "{IDS[1]}", "confidence": 0.1, "confidence": 0.9}}\n',
    "pred_deep.jsonl": jsonl({"id": IDS[0], "confidence": 0.5}) + '{"id": "x", "confidence": 0.5, "m": ' + DEEP + "}\n",
    "pred_methods.jsonl": jsonl({"id": IDS[0], "confidence": 0.5, "method": "A"},
                                {"id": IDS[1], "confidence": 0.5, "method": "B"}),
    "pred_true.csv": f"id,confidence\n{IDS[0]},0.5\n{IDS[1]},True\n",
    "pred_dup_column.csv": f"id,confidence,confidence\n{IDS[0]},0.5,0.9\n",
    "pred_width.csv": f"id,confidence\n{IDS[0]},0.5\n{IDS[1]},0,5\n",
    "pred_bool.parquet": table_of({"id": IDS[:2], "confidence": [True, False]}),
    "pred_id_number.parquet": table_of({"id": [1, 2], "confidence": [0.5, 0.5]}),
    # QA sets: gold aliases are strings, options non-empty text
    "qa_alias_null.jsonl": jsonl({"question": "q1?", "answer": ["a"]}, {"question": "q2?", "answer": [None]}),
    "qa_alias_nested.jsonl": jsonl({"question": "q1?", "answer": [["Treilul"]]}),
    "qa_alias_number.jsonl": jsonl({"question": "q1?", "answer": 1984}),
    "qa_alias_bool.jsonl": jsonl({"question": "q1?", "answer": ["a", False]}),
    "qa_alias_dup.jsonl": '{"question": "q1?", "answer": ["a"], "answer": ["b"]}\n',
    "qa_deep.jsonl": '{"question": "q1?", "answer": ["a"], "x": ' + DEEP + "}\n",
    "qa_list.json": '[\n  {"question": "q1?", "answer": ["a"]},\n  {"question": "q2?",\n   "answer": ["b"],\n   "answer": ["c"]}\n]\n',
    "musique_dev.jsonl": jsonl({"question": "q1?", "answer": "a", "answer_aliases": [None]}),
    "popqa_test.jsonl": jsonl({"question": "q1?", "possible_answers": "[\"a\", null]"}),
    "tq_dev.jsonl": jsonl({"question": "q1?", "answer": {"value": "a", "aliases": ["b", 3]}}),
    "cwq_dev.jsonl": jsonl({"question": "q1?", "answers": [{"answer": "a", "aliases": [["b"]]}]}),
    "mmlu_empty_val.csv": "Q1?,a,b,c,d,A\nQ2?,a,,c,d,B\n",
    "mmlu_blank_val.csv": "Q1?, ,b,c,d,A\n",
    "mc1/mmlu_test.jsonl": jsonl({"question": "Q?", "choices": ["x", "", "z", "w"], "answer": 0}),
    "mc2/mmlu_test.jsonl": jsonl({"question": "Q?", "choices": ["x", None, "z", "w"], "answer": 0}),
    "mc3/mmlu_test.jsonl": jsonl({"question": "Q?", "A": "x", "B": "y", "D": "w", "answer": "A"}),
    "mc4/mmlu_test.jsonl": jsonl({"question": "Q?", "A": "x", "B": "y", "C": "z", "D": "w", "answer": True}),
    # configs: one key once per mapping
    "dup_annotate.yaml": "k: 3\nmax_new_tokens: 8\nk: 5\n",
    "dup_train.yaml": "epochs_stage1: 1\nbatch_size: 4\nbatch_size: 8\n",
    "dup_honesty.yaml": "honesty:\n  method: sft\n  method: absolute\n",
    "dup_run.yaml": "annotate:\n  k: 3\n  k: 4\n",
    "dup_flow.yaml": "k: 3\nprompts: {system: a, system: b}\n",
    "deep.yaml": "k: " + "[" * 50_000 + "]" * 50_000 + "\n",
    # honesty sets, judge pairs
    "honesty/puqa.jsonl": '{"question": "q?", "label": "unknown", "label": "known"}\n',
    "pairs.jsonl": '{"question": "q?", "answer": "a", "gold": ["a"], "label": 1}\n{"question": "q?", "answer": "a", "gold": ["a"], "label": 1, "label": 0}\n',
}

EVAL = "evaluate {in}/{file} --out {out}"
TRAIN = "train {in}/{file} --model {lm} --out {out}"
PREDICT = "predict {in} {in}/{file} --out {out}.csv"
TUNE = "honesty-tune {in}/{file} --model {lm} --out {out}"
HEVAL = "honesty-eval --adapter {in} --model {lm} --records {in}/{file} --out {out}"
GATE = "gate {in} {in}/{file}"
PRED = "evaluate {in}/nq_test.jsonl -p {in}/{file} --out {out}"
QA = "annotate {in}/{file} --out {out} --model {lm}"

# (case id, command template, file, words the one line must hold)
CASES = [
    ("alias-null", EVAL, "answer_null.jsonl", [":2:", "'answer'", "expected a list of strings", "null at position 0"]),
    ("alias-nested", TRAIN, "answer_nested.jsonl", [":2:", "'answer'", "a list of 1 element(s) at position 0"]),
    ("alias-number", PREDICT, "answer_number.jsonl", [":2:", "'answer'", "int 7 at position 1"]),
    ("alias-bool", TUNE, "answer_bool.jsonl", [":2:", "'answer'", "bool True at position 0"]),
    ("alias-object", GATE, "answer_object.jsonl", [":2:", "'answer'", "expected a list of strings, got an object"]),
    ("alias-null-alone", HEVAL, "answer_null_alone.jsonl", [":2:", "'answer'", "expected a list of strings, got null"]),
    ("failure-false", EVAL, "failure_false.jsonl", [":2:", "'failure'", "non-empty string", "bool False"]),
    ("failure-true", TRAIN, "failure_true.jsonl", [":2:", "'failure'", "bool True"]),
    ("failure-blank", EVAL, "failure_empty.jsonl", [":2:", "'failure'", "non-empty string", "'\\t'"]),
    ("failure-number", PREDICT, "failure_number.jsonl", [":2:", "'failure'", "int 0"]),
    ("failure-list", GATE, "failure_list.jsonl", [":2:", "'failure'", "a list of 1"]),
    ("failure-bool-parquet", EVAL, "failure_bool.parquet", ["failure_bool.parquet:2:", "'failure'", "bool False"]),
    ("failure-empty-parquet", EVAL, "failure_empty.parquet", ["failure_empty.parquet:3:", "'failure'", "''"]),
    ("id-list", EVAL, "id_list.jsonl", [":2:", "'id'", "expected a string or null", "a list of 1"]),
    ("id-number", TRAIN, "id_number.jsonl", [":2:", "'id'", "int 17"]),
    ("id-float", HEVAL, "id_float.jsonl", [":2:", "'id'", "float 1.5"]),
    ("id-bool", PREDICT, "id_bool.jsonl", [":2:", "'id'", "bool True"]),
    ("dataset-list", EVAL, "dataset_list.jsonl", [":2:", "'dataset'", "a list of 1"]),
    ("dataset-number", TUNE, "dataset_number.jsonl", [":2:", "'dataset'", "int 3"]),
    ("split-object", EVAL, "split_object.jsonl", [":2:", "'split'", "an object of 1 key(s)"]),
    ("prompt-messages", TRAIN, "prompt_list.jsonl", [":2:", "'prompt'", "expected a string or null"]),
    ("id-number-parquet", EVAL, "id_number.parquet", ["id_number.parquet:1:", "'id'", "int 1"]),
    ("cumulative-off", EVAL, "cumulative_off.jsonl", [":2:", "'greedy_cumulative_logprobs'", "sum of the 2", "-5.0"]),
    ("cumulative-sign", TRAIN, "cumulative_sign.jsonl", [":2:", "'greedy_cumulative_logprobs'", "<= 0", "0.3"]),
    ("cumulative-tokens", PREDICT, "cumulative_tokens.jsonl", [":2:", "'greedy_cumulative_logprobs'", "sum of the 3", "(-6)"]),
    ("cumulative-nan", GATE, "cumulative_nan.jsonl", [":2:", "'greedy_cumulative_logprobs'", "nan"]),
    ("cumulative-off-parquet", EVAL, "cumulative_off.parquet", ["cumulative_off.parquet:2:", "'greedy_cumulative_logprobs'", "-2.5"]),
    ("greedy-nan", EVAL, "greedy_nan.jsonl", [":2:", "'greedy_logprobs'", "nan at position 1"]),
    ("greedy-infinity", TUNE, "greedy_infinity.jsonl", [":2:", "'greedy_logprobs'", "inf at position 0"]),
    ("greedy-overflow", EVAL, "greedy_overflow.jsonl", [":2:", "'greedy_logprobs'", "-inf at position 1"]),
    ("greedy-bool", TRAIN, "greedy_bool.jsonl", [":2:", "'greedy_logprobs'", "list of numbers", "bool True at position 0"]),
    ("greedy-text", EVAL, "greedy_string.jsonl", [":2:", "'greedy_logprobs'", "str '-0.1' at position 0"]),
    ("sample-nan", HEVAL, "sample_nan.jsonl", [":2:", "'sampling_logprobs'", "nan at sample 1 position 0"]),
    ("greedy-positive-parquet", EVAL, "greedy_positive.parquet", ["greedy_positive.parquet:2:", "'greedy_logprobs'", "0.4"]),
    ("sample-nan-parquet", PREDICT, "sample_nan.parquet", ["sample_nan.parquet:2:", "'sampling_logprobs'", "nan"]),
    ("verbal-list", EVAL, "verbal_list.jsonl", [":2:", "'verbal'", "expected a JSON object or null"]),
    ("verbal-number", EVAL, "verbal_number.jsonl", [":2:", "'verbal'", "reply text", "float 0.9"]),
    ("verbal-null-reply", TRAIN, "verbal_null_reply.jsonl", [":2:", "'verbal'", "'verbal-10'", "null"]),
    ("verbal-twice", EVAL, "verbal_twice.jsonl", [":2:", "'verbal'", "'verbal-0' a second time"]),
    ("verbal-text", GATE, "verbal_text.jsonl", [":2:", "'verbal'", "expected a JSON object", "str"]),
    ("verbal-null-parquet", EVAL, "verbal_null.parquet", ["verbal_null.parquet:2:", "'verbal'", "null"]),
    ("generation-list", EVAL, "generation_list.jsonl", [":2:", "'generation'", "expected a JSON object or null"]),
    ("generation-text", PREDICT, "generation_text.jsonl", [":2:", "'generation'", "str 'temperature=1'"]),
    ("generation-number", TUNE, "generation_number.jsonl", [":2:", "'generation'", "int 1"]),
    ("generation-list-parquet", EVAL, "generation_list.parquet", ["generation_list.parquet:2:", "'generation'", "a list of 2"]),
    ("generation-dup-parquet", EVAL, "generation_bad.parquet", ["generation_bad.parquet:2:", "'generation'", "duplicate key 'a'"]),
    ("dup-key", EVAL, "dup_question.jsonl", ["dup_question.jsonl:2:", "duplicate key 'question'"]),
    ("dup-key-nested", TRAIN, "dup_nested.jsonl", ["dup_nested.jsonl:2:", "duplicate key 'k'"]),
    ("dup-column-parquet", EVAL, "dup_column.parquet", ["dup_column.parquet:", "'question'", "column given twice"]),
    ("deep-row", EVAL, "deep_row.jsonl", ["deep_row.jsonl:2:", "nested more than 100 levels"]),
    ("deep-field", TRAIN, "deep_field.jsonl", ["deep_field.jsonl:2:", "nested more than 100 levels"]),
    ("deep-generation", PREDICT, "deep_generation.jsonl", ["deep_generation.jsonl:2:", "nested more than 100 levels"]),
    ("pred-true", PRED, "pred_true.jsonl", ["pred_true.jsonl:2:", "'confidence'", "number in [0, 1]", "bool True"]),
    ("pred-false", PRED, "pred_false.jsonl", ["pred_false.jsonl:1:", "'confidence'", "bool False"]),
    ("pred-list", PRED, "pred_list.jsonl", ["pred_list.jsonl:2:", "'confidence'", "a list of 1 element(s)"]),
    ("pred-null", PRED, "pred_null.jsonl", ["pred_null.jsonl:1:", "'confidence'", "got null"]),
    ("pred-id-number", PRED, "pred_id_number.jsonl", ["pred_id_number.jsonl:2:", "'id'", "expected a string", "int 12"]),
    ("pred-id-list", PRED, "pred_id_list.jsonl", ["pred_id_list.jsonl:1:", "'id'", "expected a string, got a list of 1 element(s)"]),
    ("pred-dup-key", PRED, "pred_dup_key.jsonl", ["pred_dup_key.jsonl:2:", "duplicate key 'confidence'"]),
    ("pred-deep", PRED, "pred_deep.jsonl", ["pred_deep.jsonl:2:", "nested more than 100 levels"]),
    ("pred-methods", PRED, "pred_methods.jsonl", ["pred_methods.jsonl:2:", "'method'", "same method", "'B'"]),
    ("pred-true-csv", PRED, "pred_true.csv", ["pred_true.csv:3:", "'confidence'", "'True'"]),
    ("pred-dup-column-csv", PRED, "pred_dup_column.csv", ["pred_dup_column.csv:", "'confidence'", "column given twice"]),
    ("pred-width-csv", PRED, "pred_width.csv", ["pred_width.csv:3:", "expected 2 columns", "got 3"]),
    ("pred-bool-parquet", PRED, "pred_bool.parquet", ["pred_bool.parquet:1:", "'confidence'", "bool True"]),
    ("pred-id-number-parquet", PRED, "pred_id_number.parquet", ["pred_id_number.parquet:1:", "'id'", "int 1"]),
    ("qa-alias-null", QA, "qa_alias_null.jsonl", ["qa_alias_null.jsonl:2:", "'answer'", "null at position 0"]),
    ("qa-alias-nested", QA, "qa_alias_nested.jsonl", ["qa_alias_nested.jsonl:1:", "'answer'", "a list of 1 element(s) at position 0"]),
    ("qa-alias-number", QA, "qa_alias_number.jsonl", ["qa_alias_number.jsonl:1:", "'answer'", "int 1984"]),
    ("qa-alias-bool", QA, "qa_alias_bool.jsonl", ["qa_alias_bool.jsonl:1:", "'answer'", "bool False at position 1"]),
    ("qa-dup-key", QA, "qa_alias_dup.jsonl", ["qa_alias_dup.jsonl:1:", "duplicate key 'answer'"]),
    ("qa-deep", QA, "qa_deep.jsonl", ["qa_deep.jsonl:1:", "nested more than 100 levels"]),
    ("qa-json-dup-line", QA, "qa_list.json", ["qa_list.json:3:", "duplicate key 'answer'"]),
    ("qa-musique-aliases", QA, "musique_dev.jsonl", ["musique_dev.jsonl:1:", "'answer_aliases'", "null at position 0"]),
    ("qa-popqa-text", QA, "popqa_test.jsonl", ["popqa_test.jsonl:1:", "'possible_answers'", "null at position 1"]),
    ("qa-triviaqa-aliases", QA, "tq_dev.jsonl", ["tq_dev.jsonl:1:", "'answer.aliases'", "int 3 at position 1"]),
    ("qa-cwq-aliases", QA, "cwq_dev.jsonl", ["cwq_dev.jsonl:1:", "'answers[0].aliases'", "a list of 1 element(s)"]),
    ("mmlu-empty-option", QA, "mmlu_empty_val.csv", ["mmlu_empty_val.csv:2:", "'B'", "non-empty text", "str ''"]),
    ("mmlu-blank-option", QA, "mmlu_blank_val.csv", ["mmlu_blank_val.csv:1:", "'A'", "non-empty text"]),
    ("mmlu-empty-choice", QA, "mc1/mmlu_test.jsonl", ["mc1/mmlu_test.jsonl:1:", "'choices[1]'", "non-empty text"]),
    ("mmlu-null-choice", QA, "mc2/mmlu_test.jsonl", ["mc2/mmlu_test.jsonl:1:", "'choices[1]'", "null"]),
    ("mmlu-option-gap", QA, "mc3/mmlu_test.jsonl", ["mc3/mmlu_test.jsonl:1:", "'C' is missing"]),
    ("mmlu-answer-bool", QA, "mc4/mmlu_test.jsonl", ["mc4/mmlu_test.jsonl:1:", "'answer'", "True"]),
    ("yaml-dup-annotate", "annotate {in}/nq_test.jsonl --out {out} -c {in}/{file}", "dup_annotate.yaml",
     ["dup_annotate.yaml:3:", "duplicate key 'k'", "also on line 1"]),
    ("yaml-dup-train", "train {in}/nq_test.jsonl --model {lm} --out {out} -c {in}/{file}", "dup_train.yaml",
     ["dup_train.yaml:3:", "duplicate key 'batch_size'", "also on line 2"]),
    ("yaml-dup-honesty", "honesty-tune {in}/nq_test.jsonl --model {lm} --out {out} -c {in}/{file}", "dup_honesty.yaml",
     ["dup_honesty.yaml:3:", "duplicate key 'method'"]),
    ("yaml-dup-run", "run --out {out} -c {in}/{file}", "dup_run.yaml", ["dup_run.yaml:3:", "duplicate key 'k'"]),
    ("yaml-dup-flow", "annotate {in}/nq_test.jsonl --out {out} --model {lm} -c {in}/{file}", "dup_flow.yaml",
     ["dup_flow.yaml:2:", "duplicate key 'system'"]),
    ("yaml-deep", "train {in}/nq_test.jsonl --model {lm} --out {out} -c {in}/{file}", "deep.yaml",
     ["deep.yaml", "nested more than 100 levels"]),
    ("honesty-set-dup", "honesty-eval --adapter {in} --model {lm} --honesty-data {in}/honesty --out {out}", "honesty/puqa.jsonl",
     ["puqa.jsonl:1:", "duplicate key 'label'"]),
    ("judge-pairs-dup", "judge-check {in}/{file} --judge match", "pairs.jsonl", ["pairs.jsonl:2:", "duplicate key 'label'"]),
]


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """Every file of FILES in ``tmp_path/in``."""
    folder = tmp_path / "in"
    for name, content in FILES.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            content(path)
    return folder


@pytest.mark.parametrize("case, command, file, words", CASES, ids=[c[0] for c in CASES])
def test_bad_data_is_one_line_exit_2_and_writes_nothing(inputs, tmp_path, case, command, file, words):
    out = tmp_path / "out"
    args = command.format(**{"in": inputs, "out": out, "lm": WORLD_LM, "file": file}).split()
    before = snapshot(tmp_path)
    result = CliRunner().invoke(app, args)
    line = one_error_line(result)
    assert Path(file).name in line, result.output
    assert all(word in line for word in words), result.output
    assert snapshot(tmp_path) == before
    assert not out.exists() and not Path(f"{out}.csv").exists()


# ----------------------------------------------------------------------------- an OpenAI-compatible server


class CannedServer:
    """An OpenAI-compatible chat server answering every request with one token of the given log-prob."""

    def __init__(self, logprob_json: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                choices = [{"index": i, "message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop",
                            "logprobs": {"content": [{"token": "Paris", "logprob": "LOGPROB"}]}} for i in range(body["n"])]
                data = json.dumps({"choices": choices}).replace('"LOGPROB"', logprob_json).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> Self:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("logprob, shown", [("0.5", "0.5"), ("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf"),
                                            ("1e400", "inf")])
def test_a_server_answering_impossible_log_probs_stops_annotate_before_any_record(tmp_path, logprob, shown):
    """The engine refuses what evaluate would refuse: one line naming the server's answer, exit 2, no record."""
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "Capital of France?", "answer": ["Paris"]}\n')
    out = tmp_path / "out"
    with CannedServer(logprob) as server:
        result = CliRunner().invoke(app, ["annotate", str(qa), "--out", str(out), "--backend", "openai", "--base-url",
                                          server.url, "--model", "m", "--k", "2", "--max-new-tokens", "4"])
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert line.startswith("error: ") and f"{server.url}/chat/completions" in line, result.output
    assert f"log-prob {shown} at token 0" in line and "not written" in line, result.output
    assert not list(out.rglob("*.parquet")) and not list(out.rglob("*.jsonl"))


def test_a_sound_server_answer_is_written_and_evaluated(tmp_path):
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "Capital of France?", "answer": ["Paris"]}\n{"question": "Capital of Peru?", "answer": ["Lima"]}\n')
    with CannedServer("-0.25") as server:
        result = CliRunner().invoke(app, ["annotate", str(qa), "--out", str(tmp_path / "out"), "--backend", "openai",
                                          "--base-url", server.url, "--model", "m", "--k", "2", "--max-new-tokens", "4"])
    assert result.exit_code == 0, result.output
    records = read_records(tmp_path / "out" / "records.parquet")
    assert [r.greedy_logprobs for r in records] == [[-0.25], [-0.25]]
    result = CliRunner().invoke(app, ["evaluate", str(tmp_path / "out" / "records.parquet"), "--out", str(tmp_path / "ev"),
                                      "--resamples", "2"])
    assert result.exit_code == 0, result.output


# ----------------------------------------------------------------------------- good files read as before


def full_rows() -> list[dict[str, Any]]:
    """Valid rows using every field and the spellings the rules allow."""
    return [
        hb_row("one?", id="r1", dataset="nq", split="dev", prompt="Q: one?", failure=None,
               verbal={"verbal0": "Confidence: 0.8", "verbal-10": "9"}, generation={"model": "m", "k": 2, "nested": {"a": [1]}},
               sampling_logprobs=[[-0.5, -0.25], [-1.0]], source={"page": 3}),
        hb_row("two?", answer="single alias", greedy_correctness=[0], greedy_cumulative_logprobs=[-0.30004],
               sampling_correctness=[True, False]),  # a cumulative rounded within the tolerance, flags as booleans
        {"question": "three?", "answer": ["x", "y"], "failure": "generation failed after 2 tries: timeout"},
        hb_row("four?", greedy_tokens=[["a", "b", "c"]], greedy_logprobs=[[-1e-7, 0.0, -30.0]],
               greedy_cumulative_logprobs=[-30.0000001], id=""),
    ]


def test_good_rows_read_identically_through_jsonl_and_parquet(tmp_path):
    source = tmp_path / "nq_test.jsonl"
    source.write_text(jsonl(*full_rows()), encoding="utf-8")
    records = read_records(source)
    assert [r.id for r in records][:1] == ["r1"] and records[1].answers == ["single alias"]
    assert records[0].verbal == {"verbal-0": "Confidence: 0.8", "verbal-10": "9"}
    assert records[0].extra == {"source": {"page": 3}} and records[2].failed and not records[0].failed
    assert records[1].sample_correct == [1, 0] and records[1].greedy_correct == 0
    write_jsonl(records, tmp_path / "again.jsonl")
    write_parquet(records, tmp_path / "again.parquet")
    for copy in (tmp_path / "again.jsonl", tmp_path / "again.parquet"):
        assert [record_to_dict(r) for r in read_records(copy)] == [record_to_dict(r) for r in records]
    write_jsonl(read_records(tmp_path / "again.jsonl"), tmp_path / "third.jsonl")
    assert (tmp_path / "third.jsonl").read_bytes() == (tmp_path / "again.jsonl").read_bytes()


def test_good_predictions_read_the_same_in_every_format(tmp_path):
    from elical.model.predictions import read_predictions

    (tmp_path / "p.jsonl").write_text(jsonl({"id": "007", "confidence": 1, "method": "M"},
                                            {"id": "b", "confidence": 0.25, "method": "M"}))
    (tmp_path / "p.csv").write_text('id,confidence,method\n007,1.0,M\nb," 0.25",M\n')
    table_of({"id": ["007", "b"], "confidence": [1.0, 0.25]})(tmp_path / "p.parquet")
    for name in ("p.jsonl", "p.csv", "p.parquet"):
        assert read_predictions(tmp_path / name).confidence == {"007": 1.0, "b": 0.25}, name
    assert read_predictions(tmp_path / "p.csv").method == "M"


def test_good_qa_rows_read_as_before(tmp_path):
    from elical.data import load_items

    (tmp_path / "popqa_test.jsonl").write_text(jsonl({"question": "q1?", "possible_answers": '["a", "b"]'},
                                                     {"question": "q2?", "possible_answers": "[not json"}))
    (tmp_path / "cwq_dev.jsonl").write_text(jsonl({"question": "q?", "answers": [{"answer": "a", "aliases": ["b"]}]}))
    (tmp_path / "tq_dev.jsonl").write_text(jsonl({"question": "q?", "answer": {"value": "a", "aliases": ["b"]}}))
    (tmp_path / "mmlu_val.csv").write_text('Q?,"x, y",0,z,w,B\n')
    assert [i.answers for i in load_items(tmp_path / "popqa_test.jsonl")] == [["a", "b"], ["[not json"]]
    assert load_items(tmp_path / "cwq_dev.jsonl")[0].answers == ["a", "b"]
    assert load_items(tmp_path / "tq_dev.jsonl")[0].answers == ["a", "b"]
    item = load_items(tmp_path / "mmlu_val.csv")[0]
    assert item.choices == ["x, y", "0", "z", "w"] and item.answers == ["B"]


def test_a_yaml_merge_key_may_be_overridden(tmp_path):
    from elical.core.yaml_config import read_yaml_mapping

    (tmp_path / "c.yaml").write_text("base: &b {k: 1, seed: 2}\nannotate:\n  <<: *b\n  k: 3\n")
    assert read_yaml_mapping(tmp_path / "c.yaml")["annotate"] == {"k": 3, "seed": 2}
