"""The confidence gate: thresholds chosen by each objective on known values, the decision rule,
gate.json round trips, `elical gate` on a tiny trained model, and the server's choice of gate."""

from __future__ import annotations

import itertools
import json
import shutil

import numpy as np
import pytest

from elical.core.inputs import InputError
from elical.model.gate import Gate, choose_gate, load_gate, parse_objective, save_gate

CONF, CORRECT = [0.1, 0.4, 0.6, 0.9], [0, 1, 0, 1]


def test_alignment_is_the_accuracy_of_answering_from_tau_and_ties_answer_more():
    gate = choose_gate(CONF, CORRECT, "alignment")
    # tau 0.4 and 0.9 both get 3 of 4 decisions right; the lower one answers more
    assert (gate.tau, gate.validation_score, gate.n_validation, gate.retrieve_below) == (0.4, 0.75, 4, None)
    assert choose_gate([0.2, 0.8], [0, 0]).tau == np.inf  # nothing right: never answer
    assert choose_gate([0.2, 0.8], [1, 1]).tau == 0.2


def test_alignment_matches_the_brute_force_count_on_random_data():
    rng = np.random.default_rng(0)
    for _ in range(200):
        conf = np.round(rng.random(15), 1)
        ok = rng.random(15) < 0.5
        candidates = np.r_[np.unique(conf), np.inf]
        accuracy = [((conf >= t) == ok).mean() for t in candidates]
        gate = choose_gate(conf, ok, "alignment")
        assert gate.validation_score == pytest.approx(max(accuracy))
        assert gate.tau == candidates[int(np.argmax(accuracy))]


def test_precision_picks_the_lowest_tau_reaching_the_target_or_says_it_cannot():
    assert choose_gate(CONF, CORRECT, "precision:0.6").tau == 0.4  # answers 3, 2 right
    gate = choose_gate(CONF, CORRECT, "precision:1")
    assert (gate.tau, gate.validation_score) == (0.9, 1.0)
    with pytest.raises(InputError, match=r"no threshold reaches precision 0.9 on the 3 validation questions \(best 0.333, answering 3 at tau=0.1\)"):
        choose_gate([0.1, 0.5, 0.9], [1, 0, 0], "precision:0.9")


def test_costs_price_wrong_answers_abstentions_and_retrievals():
    conf, right, after = [0.2, 0.5, 0.8], [0, 0, 1], [0, 1, 1]
    costs = "costs:wrong=1,abstain=0.3,retrieve=0.1"
    # answer 0.8 (right, 0), retrieve 0.5 (0.1, then right), abstain 0.2 (0.3 < 0.1 + a wrong answer)
    gate = choose_gate(conf, right, costs, retrieved_correct=after)
    assert (gate.tau, gate.retrieve_below, gate.validation_score) == (0.8, 0.5, pytest.approx(0.4 / 3))
    # without the correctness after retrieval there is no band: abstain on 0.5 and 0.2
    alone = choose_gate(conf, right, costs)
    assert (alone.tau, alone.retrieve_below, alone.validation_score) == (0.8, None, pytest.approx(0.2))
    # wrong answers cost nothing: answer everything
    assert choose_gate(conf, right, "costs:abstain=1").tau == 0.2


def test_costs_match_the_brute_force_minimum_over_both_thresholds():
    rng = np.random.default_rng(1)
    w, a, r = 1.0, 0.4, 0.15
    for _ in range(100):
        conf = np.round(rng.random(12), 1)
        ok, after = rng.random(12) < 0.5, rng.random(12) < 0.7
        candidates = np.r_[np.unique(conf), np.inf]
        best = min(
            (np.where(conf >= t, w * ~ok, np.where(conf >= b, r + w * ~after, a)).mean(), t, b)
            for b, t in itertools.combinations_with_replacement(candidates, 2))
        gate = choose_gate(conf, ok, f"costs:wrong={w},abstain={a},retrieve={r}", after)
        assert gate.validation_score == pytest.approx(best[0])
        band = np.inf if gate.retrieve_below is None else gate.retrieve_below
        chosen = np.where(conf >= gate.tau, w * ~ok, np.where(conf >= band, r + w * ~after, a)).mean()
        assert chosen == pytest.approx(best[0])


def test_decision_rule():
    gate = Gate(tau=0.7, objective="alignment", validation_score=0.8, n_validation=10, retrieve_below=0.4)
    assert [gate.decide(c) for c in (0.9, 0.7, 0.5, 0.4, 0.1)] == ["answer", "answer", "retrieve", "retrieve", "abstain"]
    assert gate.decide(0.5, can_retrieve=False) == "abstain"  # no corpus: no retrieval
    assert Gate(0.7, "alignment", 0.8, 10).decide(0.5) == "abstain"
    with pytest.raises(ValueError, match="retrieve_below <= tau"):
        Gate(0.3, "alignment", 0.8, 10, retrieve_below=0.5)


@pytest.mark.parametrize("text, message", [
    ("auroc", "unknown gate objective 'auroc'; expected alignment, honesty, precision:P"),
    ("precision:1.5", r"target precision must be a number in \(0, 1\]"),
    ("precision:x", "target precision"),
    ("costs:wrong=x", "the cost of wrong must be a number, got 'x'"),
    ("costs:oops=1", "NAME one of wrong, abstain, retrieve; got 'oops=1'"),
    ("costs:wrong=-1", "non-negative"),
    ("costs:", "not all 0"),
])
def test_bad_objectives_say_what_is_expected(text, message):
    with pytest.raises(InputError, match=message):
        parse_objective(text)


def test_gate_file_round_trips_with_an_infinite_tau(tmp_path):
    gate = Gate(float("inf"), "precision:0.9", 1.0, 12)
    save_gate(gate, tmp_path)
    saved = json.loads((tmp_path / "gate.json").read_text())
    assert saved["metric"] == "precision" and saved["elical_version"] and saved["n_validation"] == 12
    assert load_gate(tmp_path) == gate
    assert load_gate(tmp_path / "none") is None
    (tmp_path / "gate.json").write_text('{"tau": "high", "objective": "alignment"}')
    with pytest.raises(InputError, match=r"gate.json: not a valid gate file: .*tau"):
        load_gate(tmp_path)


def test_one_gate_file_format_and_the_older_files_still_read(tmp_path):
    gate = Gate(0.4, "honesty", 0.75, 8)
    save_gate(gate, tmp_path, name="elical-gate")  # the honesty step's: the same format, with the gate's name
    saved = json.loads((tmp_path / "gate.json").read_text())
    assert saved["name"] == "elical-gate" and saved["metric"] == "honesty" and load_gate(tmp_path) == gate
    # the honesty step's gate.json before the one format: name and four fields, or null without a gate
    (tmp_path / "gate.json").write_text(json.dumps({"name": "elical-gate", "tau": 0.4, "objective": "honesty",
                                                    "validation_score": 0.75, "n_validation": 8}))
    assert load_gate(tmp_path) == gate
    (tmp_path / "gate.json").write_text("null")
    assert load_gate(tmp_path) is None


def test_cli_gate_saves_the_threshold_that_serve_then_uses(trained_model_dir, records_file, tmp_path):
    from typer.testing import CliRunner

    from elical.cli import app
    from elical.model.network import ConfidenceModel
    from elical.records import read_records

    pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
    from elical.serve.setup import resolve_gate

    folder = shutil.copytree(trained_model_dir, tmp_path / "model")
    runner = CliRunner()
    result = runner.invoke(app, ["gate", str(folder), str(records_file), "--objective", "alignment", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    saved = json.loads((folder / "gate.json").read_text())
    records = read_records([records_file])
    model = ConfidenceModel.from_pretrained(folder, device="cpu")
    assert model.gate == load_gate(folder) and model.gate is not None  # from_pretrained picks up gate.json
    conf = model.confidence([r.question for r in records])
    expected = choose_gate(conf, [bool(r.greedy_correct) for r in records], "alignment")
    assert saved["tau"] == pytest.approx(expected.tau) and saved["n_validation"] == 40
    assert saved["validation_score"] == pytest.approx(expected.validation_score) and saved["metric"] == "alignment"
    assert f"on 40 validation questions; wrote {folder / 'gate.json'}" in " ".join(result.output.split())
    # serve: gate.json by default, --tau over it, and a corpus without a band retrieves everything below tau
    assert resolve_gate(folder, None, None, False) == load_gate(folder)
    assert resolve_gate(folder, 0.3, None, True).tau == 0.3 and resolve_gate(folder, 0.3, None, True).retrieve_below == 0.0
    with pytest.raises(InputError, match="--retrieve-below needs --corpus"):
        resolve_gate(folder, 0.3, 0.1, False)
    bad = runner.invoke(app, ["gate", str(folder), str(records_file), "--objective", "precision:2"])
    assert bad.exit_code == 2 and "target precision" in bad.output
