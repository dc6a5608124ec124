"""QA loaders, dataset converters in their published formats, and deterministic sharding."""

from __future__ import annotations

import json

import pytest

from elical.data import QAItem, load_items, load_many, lookup, parse_shard, select_shard, shard_of
from elical.records import RecordError, record_id


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


PUBLISHED = [
    ("nq", {"question": "who wrote hamlet", "answer": ["William Shakespeare", "Shakespeare"]}, ["William Shakespeare", "Shakespeare"]),
    ("tq", {"question": "Q?", "answer": {"value": "Paris", "aliases": ["Paris", "City of Light"], "normalized_aliases": ["paris"]}}, ["Paris", "City of Light"]),
    ("hq", {"_id": "5a8b", "question": "Q?", "answer": "yes", "type": "comparison"}, ["yes"]),
    ("2wiki", {"_id": "x", "question": "Q?", "answer": "Małgorzata Braunek"}, ["Małgorzata Braunek"]),
    ("squad", {"id": "1", "question": "Q?", "answers": {"text": ["Denver Broncos", "Denver Broncos"], "answer_start": [1, 2]}}, ["Denver Broncos"]),
    ("wq", {"url": "u", "question": "Q?", "answers": ["Jamaican English", "Jamaican Creole"]}, ["Jamaican English", "Jamaican Creole"]),
    ("cwq", {"ID": "1", "machine_question": "Q?", "answers": [{"answer": "Ohio", "aliases": ["OH"], "answer_id": "m.1"}]}, ["Ohio", "OH"]),
    ("musique", {"id": "2hop", "question": "Q?", "answer": "1960", "answer_aliases": ["nineteen sixty"]}, ["1960", "nineteen sixty"]),
    ("popqa", {"id": 1, "question": "Q?", "obj": "politician", "possible_answers": '["politician", "political leader"]'}, ["politician", "political leader"]),
    ("pararel", {"query": "Urban V holds the position of [MASK].", "obj_label": "pope"}, ["pope"]),
]


@pytest.mark.parametrize("dataset, row, answers", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_converters_read_published_formats(tmp_path, dataset, row, answers):
    items = load_items(write_jsonl(tmp_path / f"{dataset}_dev.jsonl", [row]))
    assert len(items) == 1
    item = items[0]
    assert item.answers == answers
    assert item.dataset == dataset and item.split == "dev"
    assert item.id == record_id(dataset, item.question)


def test_aliases_find_the_right_converter():
    assert lookup("TriviaQA").name == "tq" and lookup("hotpot_qa").name == "hq" and lookup("cais/mmlu").name == "mmlu"
    assert lookup("my-own-set").name == "generic"


def test_mmlu_csv_and_hf_rows(tmp_path):
    folder = tmp_path / "dev"
    folder.mkdir()
    (folder / "anatomy_dev.csv").write_text('What is 1+1?,1,2,3,4,B\n"Comma, inside",a,b,c,d,A\n')
    items = load_items(folder)
    assert [i.answers for i in items] == [["B"], ["A"]]
    assert items[0].choices == ["1", "2", "3", "4"] and items[0].dataset == "mmlu" and items[0].split == "dev"
    assert items[0].meta["subject"] == "anatomy" and items[1].question == "Comma, inside"
    spec = lookup("mmlu")
    assert spec.converter({"question": "Q", "choices": ["w", "x", "y", "z"], "answer": 3}) == ("Q", ["D"], ["w", "x", "y", "z"])


def test_bad_rows_name_file_line_and_problem(tmp_path):
    path = write_jsonl(tmp_path / "nq_test.jsonl", [{"question": "ok?", "answer": ["a"]}, {"question": "no gold"}])
    with pytest.raises(RecordError, match=r"nq_test.jsonl:2: .*'answer'"):
        load_items(path)
    (tmp_path / "bad.jsonl").write_text('{"question": "x", "answer": ["y"]}\n{not json\n')
    with pytest.raises(RecordError, match=r"bad.jsonl:2: .*malformed JSON"):
        load_items(tmp_path / "bad.jsonl")
    (tmp_path / "mmlu_val.csv").write_text("Q,1,2,3,4,E\n")
    with pytest.raises(RecordError, match=r"mmlu_val.csv:1: .*letter"):
        load_items(tmp_path / "mmlu_val.csv")
    with pytest.raises(FileNotFoundError):
        load_items(tmp_path / "absent.jsonl")


def test_duplicate_questions_get_distinct_ids(tmp_path):
    path = write_jsonl(tmp_path / "nq_test.jsonl", [{"question": "same", "answer": ["a"]}] * 3)
    ids = [i.id for i in load_items(path)]
    assert len(set(ids)) == 3 and ids[1] == ids[0] + "-2"


def test_shards_partition_items_and_ignore_order():
    items = [QAItem(f"question {i}", ["x"], "nq") for i in range(500)]
    shards = [select_shard(items, f"{i}/4") for i in range(4)]
    ids = [it.id for s in shards for it in s]
    assert sorted(ids) == sorted(it.id for it in items)  # every item exactly once
    assert all(60 < len(s) < 190 for s in shards)  # roughly balanced
    assert {it.id for it in select_shard(list(reversed(items)), "2/4")} == {it.id for it in shards[2]}
    assert shard_of(items[0].id, 1) == 0


@pytest.mark.parametrize("spec", ["4/4", "-1/2", "1", "a/b", "0/0"])
def test_bad_shard_specs(spec):
    with pytest.raises(ValueError, match="shard"):
        parse_shard(spec)


def test_real_shared_data(shared_data):
    items = load_many([shared_data / "qa" / "nq_test.jsonl", shared_data / "qa" / "popqa_test.jsonl", shared_data / "mmlu" / "val"], limit=20)
    assert [i.dataset for i in items].count("nq") == 20 and [i.dataset for i in items].count("mmlu") == 20
    assert all(i.answers and all(a.strip() for a in i.answers) for i in items)
    assert len({i.id for i in items}) == len(items)
    assert all(len(i.choices) == 4 and i.answers[0] in "ABCD" for i in items if i.dataset == "mmlu")


def test_limit_keeps_the_first_n_of_each_dataset_in_annotate_and_honesty_eval(tmp_path):
    """`--limit N` means one thing everywhere: the first N questions of each dataset (a folder of HonestyBench
    files, a record file holding several datasets, or several files)."""
    from elical.honesty.commands import eval_items
    from elical.records import Record, write_parquet

    folder = tmp_path / "bench"
    folder.mkdir()
    for name in ("nq_test", "popqa_test"):
        write_jsonl(folder / f"{name}.jsonl", [{"question": f"{name} {i}?", "answer": ["x"]} for i in range(5)])
    datasets = [i.dataset for i in load_items(folder, limit=2)]
    assert datasets == ["nq", "nq", "popqa", "popqa"]
    assert [i.dataset for i in load_many([folder / "nq_test.jsonl", folder / "popqa_test.jsonl"], limit=3)] == \
        ["nq"] * 3 + ["popqa"] * 3
    records = [Record(question=f"{d} {i}?", answers=["x"], dataset=d, greedy_correct=1)
               for d in ("nq", "popqa", "mmlu") for i in range(4)]
    write_parquet(records, tmp_path / "records.parquet")
    honesty = tmp_path / "honesty"
    honesty.mkdir()
    write_jsonl(honesty / "puqa.jsonl", [{"question": f"unknowable {i}?", "label": "unknown"} for i in range(4)])
    picked = eval_items([tmp_path / "records.parquet"], honesty, 2)
    assert [i.dataset for i in picked] == ["nq", "nq", "popqa", "popqa", "mmlu", "mmlu", "puqa", "puqa"]
