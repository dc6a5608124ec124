"""HonestyBench JSONL <-> Record <-> Parquet round trips and the errors bad input must give."""

from __future__ import annotations

import json

import pytest

from elical.records import (
    HB_FIELDS,
    Record,
    RecordError,
    dataset_and_split_from_path,
    read_jsonl,
    read_parquet,
    read_records,
    record_id,
    write_jsonl,
    write_parquet,
)


def hb_row(k: int = 3, **overrides) -> dict:
    """One row in the released HonestyBench layout (field order as released)."""
    row = {
        "question": "who wrote hamlet?",
        "answer": ["William Shakespeare", "Shakespeare"],
        "greedy_response": ["Hamlet was written by William Shakespeare."],
        "greedy_correctness": 1,
        "greedy_tokens": [["Ham", "let", " was", " written"]],
        "greedy_cumulative_logprobs": [-0.7123456789012345],
        "greedy_logprobs": [[-0.1, -0.0123456789, -0.5, -0.1]],
        "sampling_response": [f"sample {i}" for i in range(k)],
        "sampling_correctness": [1, 0, 1][:k],
        "consistency_judgement": [1, 1, 0][:k],
    }
    row.update(overrides)
    return row


def write_lines(path, rows) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows))


def test_honestybench_round_trip_is_byte_identical(tmp_path):
    rows = [hb_row(), hb_row(question="¿Dónde está Zürich?", answer=["Schweiz"], greedy_correctness=0)]
    source = tmp_path / "nq_test.jsonl"
    write_lines(source, rows)
    records = read_jsonl(source)
    assert [r.dataset for r in records] == ["nq", "nq"] and records[0].split == "test"
    assert records[0].greedy_response == "Hamlet was written by William Shakespeare."
    assert records[0].sample_consistent == [1, 1, 0]
    copy = tmp_path / "copy.jsonl"
    write_jsonl(records, copy, fmt="honestybench")
    assert copy.read_bytes() == source.read_bytes()
    assert list(json.loads(copy.read_text().splitlines()[0])) == list(HB_FIELDS)


def test_unknown_fields_survive_a_round_trip(tmp_path):
    source = tmp_path / "x.jsonl"
    write_lines(source, [hb_row(source_id="q-17", annotator={"name": "a"})])
    copy = tmp_path / "y.jsonl"
    write_jsonl(read_jsonl(source), copy, fmt="honestybench")
    assert json.loads(copy.read_text()) == hb_row(source_id="q-17", annotator={"name": "a"})


def test_elical_jsonl_and_parquet_keep_everything(tmp_path):
    record = Record(
        question="q?", answers=["a"], dataset="popqa", split="dev", prompt="<|im_start|>user\nq?",
        greedy_response="a", greedy_tokens=["a"], greedy_logprobs=[-0.25], greedy_correct=1,
        samples=["a", "b"], sample_logprobs=[[-0.1], [-2.0, -0.5]], sample_correct=[1, 0],
        sample_consistent=[1, 0], verbal={"verbal-0": "0.7"}, generation={"temperature": 1.0, "k": 2},
        failure=None, extra={"note": "x"},
    )
    write_jsonl([record], tmp_path / "r.jsonl")
    write_parquet([record], tmp_path / "r.parquet")
    from_jsonl = read_jsonl(tmp_path / "r.jsonl")[0]
    from_parquet = read_parquet(tmp_path / "r.parquet")[0]
    assert from_jsonl.greedy_cumulative_logprob == -0.25  # written from the token log-probs
    from_jsonl.greedy_cumulative_logprob = None
    assert from_jsonl == record
    assert from_parquet == record


def test_parquet_columns_are_the_honestybench_fields_as_lists(tmp_path):
    import pyarrow.parquet as pq

    rows = [hb_row(verbal={"verbal-0": "0.8"}), hb_row(question="q2?", k=2, greedy_correctness=0)]
    write_lines(tmp_path / "nq_test.jsonl", rows)
    records = read_jsonl(tmp_path / "nq_test.jsonl")
    write_parquet(records, tmp_path / "nq_test.parquet")
    table = pq.read_table(tmp_path / "nq_test.parquet")
    assert table.column_names[: len(HB_FIELDS)] == list(HB_FIELDS)
    for row, stored in zip(rows, table.to_pylist()):
        assert {name: stored[name] for name in HB_FIELDS} == {name: row[name] for name in HB_FIELDS}
    assert table.to_pylist()[0]["verbal"] == [("verbal-0", "0.8")]  # a map column, not JSON text
    assert read_parquet(tmp_path / "nq_test.parquet") == records  # JSONL -> Parquet -> the same records


def test_parquet_of_the_former_layout_still_reads(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({  # the former layout: Record's attribute names, dicts as JSON text
        "id": ["x1"], "dataset": ["nq"], "split": ["test"], "question": ["q?"], "answers": [["a"]],
        "greedy_response": ["a"], "greedy_correct": pa.array([1], pa.int8()), "samples": [["a", "b"]],
        "sample_correct": pa.array([[1, 0]], pa.list_(pa.int8())), "verbal": ['{"verbal-0": "0.7"}'],
        "generation": ['{"k": 2}'], "extra": ["{}"]}), tmp_path / "old.parquet")
    [rec] = read_parquet(tmp_path / "old.parquet")
    assert (rec.id, rec.answers, rec.greedy_response, rec.greedy_correct) == ("x1", ["a"], "a", 1)
    assert (rec.samples, rec.sample_correct, rec.verbal, rec.generation) == (["a", "b"], [1, 0], {"verbal-0": "0.7"}, {"k": 2})


def test_parquet_greedy_fields_hold_one_element_and_unknown_columns_are_kept(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [hb_row(), hb_row(question="q2?", greedy_response=["one", "two"])]
    table = pa.Table.from_pylist([{name: row[name] for name in HB_FIELDS} | {"source": "s"} for row in rows])
    pq.write_table(table, tmp_path / "hb.parquet")
    with pytest.raises(RecordError, match=r"hb.parquet:2: field 'greedy_response': expected a list holding exactly one"):
        read_parquet(tmp_path / "hb.parquet")
    pq.write_table(table.slice(0, 1), tmp_path / "hb.parquet")
    assert read_parquet(tmp_path / "hb.parquet")[0].extra == {"source": "s"}


def test_ids_are_stable_and_duplicates_get_distinct_ids(tmp_path):
    assert record_id("nq", "who?") == record_id("nq", "who?") != record_id("tq", "who?")
    source = tmp_path / "nq_test.jsonl"
    write_lines(source, [hb_row(), hb_row()])
    ids = [r.id for r in read_records(source)]
    assert ids[0] == record_id("nq", "who wrote hamlet?") and ids[1] == ids[0] + "-2"


@pytest.mark.parametrize("name, expected", [
    ("nq_test.jsonl", ("nq", "test")), ("hq_dev.parquet", ("hq", "dev")),
    ("2wiki_dev.jsonl", ("2wiki", "dev")), ("popqa.jsonl", ("popqa", "test")),
])
def test_dataset_and_split_from_file_name(name, expected):
    assert dataset_and_split_from_path(name) == expected


BAD_ROWS = [
    ('{"question": "q", "answer": ["a"]', None, "malformed JSON"),
    (hb_row(answer=None) | {"answer": None}, "answer", "list of strings"),
    ({k: v for k, v in hb_row().items() if k != "answer"}, "answer", "missing"),
    ({k: v for k, v in hb_row().items() if k != "question"}, "question", "missing"),
    (hb_row(sampling_correctness=[1, 0]), "sampling_correctness", "expected 3 values"),
    (hb_row(consistency_judgement=[1, 2, 0]), "consistency_judgement", "only 0/1 values, got 2 at position 1"),
    (hb_row(sampling_correctness=[1, 0.5, 0]), "sampling_correctness", "only 0/1"),
    (hb_row(greedy_correctness="yes"), "greedy_correctness", "expected 0 or 1"),
    (hb_row(greedy_response="bare string"), "greedy_response", "exactly one element"),
    (hb_row(greedy_logprobs=[[-0.1, -0.2]]), "greedy_logprobs", "one log-prob per greedy token"),
    (hb_row(greedy_logprobs=[[-0.1, 0.5, -0.1, -0.1]]), "greedy_logprobs", "<= 0"),
    ("[1, 2]", None, "expected a JSON object"),
]


@pytest.mark.parametrize("bad, field, message", BAD_ROWS)
def test_invalid_rows_name_file_line_and_field(tmp_path, bad, field, message):
    path = tmp_path / "nq_test.jsonl"
    write_lines(path, [hb_row(), bad])
    with pytest.raises(RecordError) as info:
        read_jsonl(path)
    err = info.value
    assert (err.line, err.field) == (2, field)
    assert message in str(err) and str(path) in str(err) and ":2:" in str(err)


def test_skip_invalid_skips_and_reports_where(tmp_path):
    path = tmp_path / "nq_test.jsonl"
    write_lines(path, [hb_row(), hb_row(consistency_judgement=[1]), "not json", hb_row(question="second?")])
    with pytest.warns(UserWarning, match=r"skipped 2 invalid row\(s\)") as caught:
        records = read_records(path, skip_invalid=True)
    assert [r.question for r in records] == ["who wrote hamlet?", "second?"]
    text = str(caught[0].message)
    assert f"{path}:2" in text and f"{path}:3" in text


def test_missing_file_and_non_record_parquet(tmp_path):
    with pytest.raises(FileNotFoundError, match="record file not found"):
        read_records(tmp_path / "nope.jsonl")
    import pandas as pd

    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "other.parquet")
    with pytest.raises(RecordError, match="question"):
        read_parquet(tmp_path / "other.parquet")


def test_required_fields_are_checked_per_row_with_failed_rows_exempt(tmp_path):
    rows = [hb_row(), {"question": "q2?", "answer": ["a"], "failure": "timeout after 3 tries"},
            {k: v for k, v in hb_row(question="q3?").items() if k != "greedy_correctness"}]
    path = tmp_path / "nq_test.jsonl"
    write_lines(path, rows)
    assert len(read_records(path)) == 3
    with pytest.raises(RecordError, match=r"nq_test.jsonl:3: field 'greedy_correctness': missing"):
        read_records(path, require=["greedy_correctness"])
    write_parquet(read_records(path), tmp_path / "r.parquet")
    with pytest.raises(RecordError, match=r"r.parquet:3: field 'greedy_correctness': missing"):
        read_records(tmp_path / "r.parquet", require=["greedy_correctness", "consistency_judgement"])


def parquet_record(i: int, **changes) -> Record:
    """A complete record with two samples, as annotate writes them."""
    fields = {"question": f"q{i}?", "answers": ["a"], "greedy_response": "a", "greedy_tokens": ["a"],
              "greedy_logprobs": [-0.1], "greedy_correct": 1, "samples": ["a", "b"], "sample_logprobs": [[-0.1], [-0.2]],
              "sample_correct": [1, 0], "sample_consistent": [1, 1]}
    return Record(**(fields | changes))


PARQUET_BAD = [
    ({"greedy_correct": 5}, "greedy_correctness", "expected 0 or 1, got 5"),
    ({"sample_correct": [1, 2]}, "sampling_correctness", "got 2 at position 1"),
    ({"sample_consistent": [1]}, "consistency_judgement", "expected 2 values"),
    ({"sample_logprobs": [[-0.1], [0.5]]}, "sampling_logprobs", "got 0.5 at sample 1 position 0"),
    ({"sample_logprobs": [[-0.1]]}, "sampling_logprobs", "expected 2 lists"),
    ({"greedy_logprobs": [float("-inf")]}, "greedy_logprobs", "got -inf"),
    ({"greedy_cumulative_logprob": float("nan")}, "greedy_cumulative_logprobs", "got nan"),
    ({"greedy_tokens": ["a", "b"]}, "greedy_logprobs", "one log-prob per greedy token"),
    ({"question": "  "}, "question", "non-empty string"),
    ({"answers": []}, "answer", "at least one string"),
]


@pytest.mark.parametrize("change, field, message", PARQUET_BAD)
def test_parquet_rows_get_the_checks_of_jsonl_rows(tmp_path, change, field, message):
    path = tmp_path / "r.parquet"
    write_parquet([parquet_record(0), parquet_record(1), parquet_record(2, **change)], path)
    with pytest.raises(RecordError) as info:
        read_parquet(path)
    assert (info.value.line, info.value.field) == (3, field) and message in str(info.value)
    with pytest.warns(UserWarning, match=r"skipped 1 invalid row"):
        assert [r.question for r in read_records(path, skip_invalid=True)] == ["q0?", "q1?"]


def test_parquet_of_other_column_types_is_checked_row_by_row(tmp_path):
    import pandas as pd

    pd.DataFrame({"question": ["a?", "b?"], "answers": [["x"], ["y"]], "greedy_correct": [1, 7]}).to_parquet(
        tmp_path / "other.parquet")  # int64, not elical's int8
    with pytest.raises(RecordError, match=r"other.parquet:2: field 'greedy_correctness': expected 0 or 1, got 7"):
        read_records(tmp_path / "other.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(RecordError, match=r"junk.parquet: not a readable Parquet file"):
        read_records(tmp_path / "junk.parquet")


def test_ids_are_unique_across_files_unless_made_from_a_repeated_question(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        write_lines(tmp_path / folder / "nq_test.jsonl", [hb_row()])
    ids = [r.id for r in read_records([tmp_path / "a" / "nq_test.jsonl", tmp_path / "b" / "nq_test.jsonl"])]
    assert ids == [record_id("nq", "who wrote hamlet?"), record_id("nq", "who wrote hamlet?") + "-2"]
    write_parquet(read_records(tmp_path / "a"), tmp_path / "a.parquet")  # ids stated in the file
    with pytest.raises(RecordError, match=r"nq_test.jsonl:1: field 'id': duplicate id '\w+' \(also at .*a.parquet:1\)"):
        read_records([tmp_path / "a.parquet", tmp_path / "a" / "nq_test.jsonl"])
    with pytest.raises(ValueError, match="given twice"):
        read_records([tmp_path / "a", tmp_path / "a" / "nq_test.jsonl"])
