"""Label selection (issue 26): each strategy's order on constructed confidences and features, nesting, seeding,
no labels read, the trainer taking a strategy's order, and `elical select-labels` on a tiny model."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from elical.core.inputs import InputError
from elical.records import Record
from elical.train.budgets import budget_order, budget_subset
from elical.train.label_selection import (
    STRATEGIES,
    LabelOrder,
    _van_der_corput,
    check_budget,
    check_strategy,
    label_order,
    selection_order,
    uncertainty_weight,
)


def pool(sizes: dict[str, int], labelled: bool = True) -> list[Record]:
    """Records named d-i, with labels (sample and greedy correctness, consistency) unless ``labelled`` is False."""
    out = []
    for d, n in sizes.items():
        for i in range(n):
            labels = {"samples": ["s"] * 2, "sample_consistent": [1, i % 2], "sample_correct": [i % 2, 1],
                      "greedy_correct": i % 2} if labelled else {}
            out.append(Record(question=f"{d} question {i}", answers=["a"], dataset=d, id=f"{d}-{i}", **labels))
    return out


def test_random_is_the_budget_draw_exactly():
    records = pool({"nq": 50, "tq": 30, "hq": 7})
    for seed in (0, 1, 7):
        assert selection_order("random", records, seed) == budget_order(records, seed)
        assert selection_order("random", records, seed)[:40] == budget_subset(records, 40, seed)


def test_uncertainty_puts_the_confidences_nearest_a_half_first():
    records = pool({"a": 5})
    confidence = [0.1, 0.45, 0.9, 0.52, 0.7]
    for seed in range(5):
        order = selection_order("uncertainty", records, seed, confidence)
        assert order[:3] == [3, 1, 4] and set(order[3:]) == {0, 2}  # 0.1 and 0.9 tie at 0.4: the seed orders them
    assert {tuple(selection_order("uncertainty", records, s, confidence)[3:]) for s in range(10)} == {(0, 2), (2, 0)}


def test_van_der_corput_points():
    assert [_van_der_corput(i) for i in range(6)] == [0.0, 0.5, 0.25, 0.75, 0.125, 0.625]


def test_stratified_confidence_covers_the_range_not_the_density():
    records = pool({"a": 11})
    confidence = [0.0] * 10 + [1.0]  # ten questions at 0, one at 1
    for seed in range(10):  # the two first targets lie half the range apart: one is nearer 1 than 0
        assert 10 in selection_order("stratified-confidence", records, seed, confidence)[:2]
    dense = pool({"a": 110})
    values = list(np.linspace(0.0, 0.1, 100)) + list(np.linspace(0.2, 1.0, 10))  # 100 below 0.1, 10 spread above
    for seed in range(5):
        first = selection_order("stratified-confidence", dense, seed, values)[:10]
        assert sum(i >= 100 for i in first) >= 7  # a random draw of 10 holds about one of them


def test_diverse_is_k_center_greedy():
    records = pool({"a": 4})
    features = np.array([[0.0], [1.0], [3.0], [10.0]])
    # after a seeded first question, always the one farthest from those picked
    expected = {0: [0, 3, 2, 1], 1: [1, 3, 2, 0], 2: [2, 3, 0, 1], 3: [3, 0, 2, 1]}
    firsts = set()
    for seed in range(20):
        order = selection_order("diverse", records, seed, [0.5] * 4, features)
        assert order == expected[order[0]]
        firsts.add(order[0])
    assert len(firsts) > 1  # the first question depends on the seed


def test_uncertain_diverse_weighs_distance_by_uncertainty():
    records = pool({"a": 3})
    features = np.array([[0.0], [10.0], [5.0]])
    confidence = [0.5, 0.99, 0.5]  # the far question is one stage 1 is sure of
    assert uncertainty_weight(np.array(confidence)) == pytest.approx([1.0, 0.02, 1.0])
    seen = set()
    for seed in range(20):
        plain = selection_order("diverse", records, seed, confidence, features)
        weighted = selection_order("uncertain-diverse", records, seed, confidence, features)
        assert plain[0] == weighted[0]  # the same seeded first question
        if plain[0] == 0:
            assert plain[1] == 1 and weighted[1] == 2  # farthest (10) vs far and unsure (5 at 0.5)
        if weighted[0] != 1:
            assert weighted[-1] == 1  # a sure question comes last
        seen.add(plain[0])
    assert 0 in seen


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_keeps_dataset_shares_nests_and_is_seeded(strategy):
    sizes = {"nq": 60, "tq": 30, "hq": 10}
    records = pool(sizes)
    rng = np.random.default_rng(0)
    confidence, features = rng.random(100), rng.normal(size=(100, 4))
    order = label_order(strategy, records, 3, confidence, features)
    assert sorted(order.ids) == sorted(r.id for r in records)  # an order of the whole pool
    assert label_order(strategy, records, 3, confidence, features) == order  # seeded
    small, large = order.prefix(20), order.prefix(50)
    assert small == large[:20]  # nested
    for budget in (5, 20, 37, 50):
        counts = Counter(i.split("-")[0] for i in order.prefix(budget))
        for dataset, n in sizes.items():
            assert abs(counts[dataset] - budget * n / 100) <= 1, (budget, counts)
    if strategy != "uncertainty":  # uncertainty's order is the confidences' (the seed breaks ties only)
        assert label_order(strategy, records, 4, confidence, features).ids != order.ids
    # file order does not matter
    shuffled = records[::-1]
    assert label_order(strategy, shuffled, 3, confidence[::-1], features[::-1]).ids == order.ids


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_no_label_is_read(strategy):
    rng = np.random.default_rng(1)
    confidence, features = rng.random(30), rng.normal(size=(30, 3))
    with_labels = label_order(strategy, pool({"a": 20, "b": 10}), 0, confidence, features)
    without = label_order(strategy, pool({"a": 20, "b": 10}, labelled=False), 0, confidence, features)
    assert with_labels.ids == without.ids


def test_bad_strategy_and_budget_are_clear_errors():
    with pytest.raises(InputError, match="unknown label selection strategy 'smart'; expected one of random, "):
        check_strategy("smart")
    with pytest.raises(InputError, match="--budget 31 exceeds the pool's 30 questions"):
        check_budget(31, 30)
    with pytest.raises(InputError, match="--budget must be a positive"):
        check_budget(0, 30)
    with pytest.raises(ValueError, match="needs one stage-1 confidence per record"):
        selection_order("uncertainty", pool({"a": 3}), 0)
    with pytest.raises(ValueError, match="needs one hidden state per record"):
        selection_order("diverse", pool({"a": 3}), 0, [0.5] * 3)


def test_the_record_names_strategy_seed_order_and_chosen_ids():
    order = label_order("uncertainty", pool({"a": 4}), 2, [0.1, 0.5, 0.3, 0.9], model="m")
    record = order.record(2)
    assert record == {"strategy": "uncertainty", "seed": 2, "model": "m", "order": order.digest, "budget": 2,
                      "pool_size": 4, "chosen": ["a-1", "a-2"]}
    assert order.settings() == {"strategy": "uncertainty", "order": order.digest}
    assert order.record(1, labelled={"a-0", "a-2"})["chosen"] == ["a-2"]  # the first with a label
    other = label_order("uncertainty", pool({"a": 4}), 2, [0.1, 0.5, 0.9, 0.3])
    assert other.digest != order.digest


def test_the_trainer_labels_the_prefix_of_a_strategys_order():
    from elical.train.config import TrainConfig
    from elical.train.trainer import plan_run, plan_stages

    records = pool({"a": 30, "b": 10})
    records[5].sample_correct = None  # a question without a label is passed over
    cfg = TrainConfig(model="tiny", mode="cal-only", budget=12, seed=1, val_fraction=0.25)
    random_plan = plan_stages(records, cfg)["cal"]
    labelled = [i for i, r in enumerate(records) if r.sample_correct is not None]
    drawn = [labelled[i] for i in budget_subset([records[i] for i in labelled], 12, 1)]
    assert sorted(random_plan.train + random_plan.val) == sorted(drawn)  # no order: today's draw
    confidence = [abs(i - 20) / 20 for i in range(40)]
    order = label_order("uncertainty", records, 1, confidence)
    plan = plan_stages(records, cfg, order)["cal"]
    position = {r.id: i for i, r in enumerate(records)}
    expected = [position[i] for i in order.ids if position[i] != 5][:12]
    assert sorted(plan.train + plan.val) == sorted(expected)
    # the random draw records nothing new (models trained before strategies existed keep their digests)
    plain = plan_run(cfg, plan_stages(records, cfg), records)[0].settings
    chosen = plan_run(cfg, plan_stages(records, cfg, order), records, order)[0].settings
    assert "label_selection" not in plain and chosen["label_selection"] == order.settings()
    with pytest.raises(ValueError, match="exceeds the 39 records available with labels"):
        plan_stages(records, cfg.model_copy(update={"budget": 40}), order)
    with pytest.raises(ValueError, match="its order covers 3 questions, the pool has 40"):
        plan_stages(records, cfg, LabelOrder("random", 0, ("a-0", "a-1", "a-2")))


def test_a_training_records_its_selection_and_refuses_another(model_dir, trained_model_dir, records_file, tmp_path):
    from test_train import config

    from elical.core.fingerprint import SettingsMismatch
    from elical.records import read_records
    from elical.train.label_selection import cached_label_order
    from elical.train.trainer import train

    records = read_records([records_file])
    cache = tmp_path / "cache.json"
    order = cached_label_order(records, trained_model_dir, strategy="uncertainty", seed=0, cache=cache, device="cpu")
    assert cached_label_order(records, trained_model_dir, strategy="uncertainty", seed=0, cache=cache) == order
    cfg = config(model_dir, tmp_path / "out", mode="cal-only", budget=16, epochs_stage2=1)
    result = train(cfg, [records_file], show_progress=False, label_order=order)
    saved = json.loads((tmp_path / "out" / "selection.json").read_text())
    assert saved["strategy"] == "uncertainty" and saved["chosen"] == list(order.ids[:16])
    assert result.stages[0]["train_size"] + result.stages[0]["val_size"] == 16
    recorded = json.loads((tmp_path / "out" / "cal-only" / "settings" / "cal-only.json").read_text())["settings"]
    assert recorded["label_selection"] == {"strategy": "uncertainty", "order": order.digest}
    with pytest.raises(SettingsMismatch, match="label_selection"):
        train(cfg, [records_file], show_progress=False)  # the random draw now: refused


def test_select_labels_command(trained_model_dir, records_file, tmp_path):
    import dataclasses

    from typer.testing import CliRunner

    from elical.cli import app
    from elical.records import read_records, write_jsonl

    def select(pool, *options: str) -> tuple[int, str, list[dict]]:
        out = tmp_path / "labels.jsonl"
        out.unlink(missing_ok=True)
        result = CliRunner().invoke(app, ["select-labels", str(pool), "--model", str(trained_model_dir), "--device",
                                          "cpu", "-o", str(out), *options])
        lines = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        return result.exit_code, result.output, lines

    code, output, lines = select(records_file, "--budget", "10", "--strategy", "diverse", "--seed", "1")
    assert code == 0, output
    assert [line["rank"] for line in lines] == list(range(1, 11)) and len({line["id"] for line in lines}) == 10
    assert lines[0]["config"]["strategy"] == "diverse" and lines[0]["config"]["seed"] == 1
    assert all(0.0 <= line["confidence"] <= 1.0 for line in lines)
    # no label is read: the same pool without correctness or consistency gives the same questions
    bare = [dataclasses.replace(r, greedy_correct=None, sample_correct=None, sample_consistent=None)
            for r in read_records([records_file])]
    write_jsonl(bare, tmp_path / "bare.jsonl")
    assert [line["id"] for line in select(tmp_path / "bare.jsonl", "--budget", "10", "--strategy", "diverse",
                                          "--seed", "1")[2]] == [line["id"] for line in lines]
    small = select(records_file, "--budget", "4", "--strategy", "diverse", "--seed", "1")[2]
    assert [line["id"] for line in small] == [line["id"] for line in lines[:4]]  # nested
    # bad input: one line each, exit 2, nothing written
    for options, message in [(["--budget", "5", "--strategy", "smart"], "unknown label selection strategy 'smart'"),
                             (["--budget", "41"], "--budget 41 exceeds the pool's 40 questions")]:
        code, output, written = select(records_file, *options)
        assert code == 2 and message in output and len(output.strip().splitlines()) == 1 and not written, output
    result = CliRunner().invoke(app, ["select-labels", str(records_file), "--model", str(tmp_path / "nowhere"),
                                      "--budget", "5", "-o", str(tmp_path / "x.jsonl")])
    assert result.exit_code == 2 and "no such folder" in result.output and len(result.output.strip().splitlines()) == 1


def _selection_file(path, ids, config=None):
    """A selection file as select-labels writes it (rank, id, dataset, confidence, config) for ``ids``, in order."""
    config = config or {"strategy": "uncertainty", "seed": 3, "budget": len(ids), "model": "m"}
    path.write_text("".join(json.dumps({"rank": i, "id": rid, "dataset": "a", "confidence": 0.5, "config": config})
                            + "\n" for i, rid in enumerate(ids, 1)))
    return path


def test_a_selection_file_is_read_in_file_order_with_clear_errors(tmp_path):
    from elical.train.config import TrainConfig
    from elical.train.label_selection import read_selection
    from elical.train.trainer import plan_stages

    records = pool({"a": 30, "b": 10})
    chosen = ["b-3", "a-7", "a-0", "b-9", "a-21", "a-2"]
    path = _selection_file(tmp_path / "labels.jsonl", chosen)
    order = read_selection(path, records, 4)
    assert order.ids == tuple(chosen[:4]) and not order.complete
    assert (order.strategy, order.seed, order.model, order.source) == ("uncertainty", 3, "m", str(path))
    assert read_selection(path, records, None).ids == tuple(chosen)  # no budget: the whole file
    assert order.record(4)["file"] == str(path) and order.record(4)["chosen"] == chosen[:4]
    # the calibration stage labels exactly those questions, whatever the seed's draw would have been
    cfg = TrainConfig(model="tiny", mode="cal-only", budget=4, seed=1, val_fraction=0.25)
    plan = plan_stages(records, cfg, order)["cal"]
    position = {r.id: i for i, r in enumerate(records)}
    assert sorted(plan.train + plan.val) == sorted(position[i] for i in chosen[:4])
    records[position["a-7"]].sample_correct = None  # a chosen question the user did not label
    with pytest.raises(ValueError, match="1 chosen question\\(s\\) have no calibration label \\(first: 'a-7'\\)"):
        plan_stages(records, cfg, order)
    # bad files: one line each, naming the file and the line
    (tmp_path / "bad.jsonl").write_text('{"id": "a-1"}\n\n{"id": "zz-9"}\n')
    (tmp_path / "twice.jsonl").write_text('{"id": "a-1"}\n{"id": "a-1"}\n')
    (tmp_path / "junk.jsonl").write_text('{"id": "a-1"}\nnot json\n')
    (tmp_path / "latin1.jsonl").write_bytes('{"id": "a-1"}\n{"id": "caf\u00e9"}\n'.encode("latin-1"))
    for file, budget, message in [
            (tmp_path / "nowhere.jsonl", 4, "no such file (elical select-labels writes one)"),
            (tmp_path / "bad.jsonl", 1, "bad.jsonl, line 3: question 'zz-9' is not in the training pool"),
            (tmp_path / "twice.jsonl", 1, "twice.jsonl, line 2: question 'a-1' is chosen twice (first on line 1)"),
            (tmp_path / "junk.jsonl", 1, "junk.jsonl, line 2: not a JSON object with a string \"id\""),
            (tmp_path / "latin1.jsonl", 1, "latin1.jsonl:2: not UTF-8 text (byte 0xe9"),
            (path, 7, "--budget 7 exceeds the 6 questions chosen in")]:
        with pytest.raises(InputError) as err:
            read_selection(file, records, budget)
        assert message in str(err.value) and "\n" not in str(err.value)


def test_train_with_selection_trains_on_the_chosen_questions(model_dir, records_file, tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app
    from elical.records import read_records

    ids = [r.id for r in read_records([records_file])]
    chosen = ids[::-3][:14]  # not the seeded draw: every third question from the end
    path = _selection_file(tmp_path / "labels.jsonl", chosen)
    (tmp_path / "c.yaml").write_text(f"model: {model_dir}\nbatch_size: 8\nepochs_stage2: 1\nrow_length: 128\n")
    runner = CliRunner()
    out = tmp_path / "run"

    def train(selection, *options: str):
        return runner.invoke(app, ["train", str(records_file), "-c", str(tmp_path / "c.yaml"), "--mode", "cal-only",
                                   "-o", str(out), "--selection", str(selection), *options])

    result = train(path, "--budget", "12")
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "selection.json").read_text())
    assert saved["chosen"] == chosen[:12] and saved["file"] == str(path) and saved["strategy"] == "uncertainty"
    stage = json.loads((out / "cal-only" / "done.json").read_text())
    assert stage["train_size"] + stage["val_size"] == 12
    assert train(path, "--budget", "12").exit_code == 0  # the same file resumes
    # another file (other questions first) is refused: the stage's settings record the chosen questions
    _selection_file(tmp_path / "other.jsonl", list(reversed(chosen)))
    refused = train(tmp_path / "other.jsonl", "--budget", "12")
    assert refused.exit_code == 2 and "label_selection" in refused.output and "--overwrite" in refused.output
    for selection, options, message in [
            (tmp_path / "nowhere.jsonl", ["--budget", "4"], "no such file"),
            (path, ["--budget", "15"], "--budget 15 exceeds the 14 questions chosen in"),
            (path, ["--budget", "4", "--mode", "eli-only"], "mode eli-only has none")]:
        result = train(selection, *options)
        assert result.exit_code == 2 and message in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
    (tmp_path / "stranger.jsonl").write_text(json.dumps({"id": chosen[0]}) + "\n" + json.dumps({"id": "nope"}) + "\n")
    result = train(tmp_path / "stranger.jsonl")
    assert result.exit_code == 2 and "stranger.jsonl, line 2: question 'nope' is not in the training pool" in result.output
