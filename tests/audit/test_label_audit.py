"""`elical label-audit`: a stratified, seeded, nested sheet drawn from a run's judged items; labels read back and
scored (known values, errors naming file:line:field); the command end to end on a tiny run with its report's
"Label quality" section; and the blind labelling page in a real headless browser."""

from __future__ import annotations

import json
import math
import random
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from elical.audit.audit_report import NO_AUDIT, label_quality_blocks
from elical.audit.commands import (
    SHEET,
    audited_run,
    draw_audit,
    read_labels,
    read_sheet,
    score_audit,
)
from elical.audit.sample import candidates, draw
from elical.audit.score import agreement
from elical.cli import app
from elical.core.inputs import InputError
from elical.records import Record, write_parquet, write_records
from elical.report.document import Document, to_markdown
from extras import BROWSER_ARGS, CHROMIUM, browser_api

JUDGES = {"correctness": "match@5", "consistency": "answer@4(secret-threshold)"}


def _records(per_dataset: int = 24, seed: int = 0, judges: dict[str, str] = JUDGES) -> list[Record]:
    """Judged records of three datasets (one multiple choice), half pool and half evaluated, with rarer positives."""
    rng = random.Random(seed)
    out = []
    for dataset, rate in (("nq", 0.3), ("popqa", 0.2), ("mc_capital", 0.5)):
        for i in range(per_dataset):
            correct = int(rng.random() < rate)
            extra = {"choices": ["Paris", "Lyon", "Nice", "Lille"]} if dataset.startswith("mc") else {}
            out.append(Record(
                question=f"{dataset} question {i}?", answers=[f"answer {i}", f"alias {i}"], dataset=dataset,
                split="train" if i % 2 else "test", greedy_response=f"reply {i}", greedy_logprobs=[-rng.random()],
                samples=[f"sample {i}.{j}" for j in range(3)], greedy_correct=correct,
                sample_consistent=[int(rng.random() < 0.6) for _ in range(3)], generation={"judges": dict(judges)},
                extra=extra))
    return out


def _record_file(tmp_path: Path, records: list[Record] | None = None) -> Path:
    path = tmp_path / "records.parquet"
    write_records(records if records is not None else _records(), path)
    return path


def _run_folder(tmp_path: Path, records: list[Record] | None = None) -> Path:
    """A run folder as `elical run` leaves it for the audit: the pool and evaluated records."""
    records = records if records is not None else _records()
    run = tmp_path / "run"
    write_parquet([r for r in records if r.split == "train"], run / "records" / "train.parquet")
    write_parquet([r for r in records if r.split != "train"], run / "records" / "eval.parquet")
    return run


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- drawing


def test_a_sheet_draws_every_stratum_and_its_weights_add_up_to_the_stratum(tmp_path):
    records = _records()
    drawn = draw_audit(_record_file(tmp_path, records), tmp_path / "audit", per_stratum=4, seed=1)
    rows = _rows(drawn.sheet)
    assert (tmp_path / "audit" / "label.html").is_file() and (tmp_path / "audit" / "audit.json").is_file()
    sizes = Counter(c.stratum for c in candidates(records))
    by_stratum: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_stratum[row["stratum"]].append(row)
    assert set(by_stratum) == set(sizes) and len(sizes) == 12  # 2 tasks x 3 datasets x 2 decisions
    for name, members in by_stratum.items():
        assert len(members) == min(4, sizes[name])
        assert sum(r["weight"] for r in members) == pytest.approx(sizes[name], abs=1e-4)
        assert {f"{r['task']}/{r['dataset']}/{r['decision']}" for r in members} == {name}
    assert {r["judge"] for r in rows if r["task"] == "consistency"} == {JUDGES["consistency"]}
    mc = next(r for r in rows if r["dataset"] == "mc_capital")
    assert mc["choices"] == ["Paris", "Lyon", "Nice", "Lille"]
    # the page's order: correctness first, strata interleaved, each stratum in the draw's own (nested) order
    tasks = [r["task"] for r in rows]
    assert tasks == sorted(tasks, key=("correctness", "consistency").index)
    assert len({r["stratum"] for r in rows[:4]}) > 1
    expected = defaultdict(list)
    for cand, _ in draw(candidates(records), 4, 1):
        expected[cand.stratum].append(cand.item)
    assert {name: [r["item"] for r in members] for name, members in by_stratum.items()} == expected


def test_a_draw_is_seeded_and_a_smaller_one_is_part_of_a_larger_one(tmp_path):
    source = _record_file(tmp_path)
    small = draw_audit(source, tmp_path / "small", per_stratum=3, seed=7)
    large = draw_audit(source, tmp_path / "large", per_stratum=6, seed=7)
    again = draw_audit(source, tmp_path / "again", per_stratum=6, seed=7)
    other = draw_audit(source, tmp_path / "other", per_stratum=6, seed=8)
    items = {name: {r["item"] for r in d.rows} for name, d in
             (("small", small), ("large", large), ("other", other))}
    assert items["small"] < items["large"] and items["large"] != items["other"]
    assert again.sheet.read_bytes() == large.sheet.read_bytes()
    assert (tmp_path / "again" / "label.html").read_bytes() == (tmp_path / "large" / "label.html").read_bytes()
    only = draw_audit(source, tmp_path / "corr", per_stratum=3, seed=7, tasks=["correctness"])
    assert {r["task"] for r in only.rows} == {"correctness"}
    assert {r["item"] for r in only.rows} == {r["item"] for r in small.rows if r["task"] == "correctness"}


def test_a_labelled_sheet_is_kept_unless_overwritten(tmp_path):
    source, out = _record_file(tmp_path), tmp_path / "audit"
    draw_audit(source, out, per_stratum=2)
    draw_audit(source, out, per_stratum=2)  # nothing labelled yet: drawn again
    rows = _rows(out / SHEET)
    rows[0]["label"] = 1
    _write_jsonl(out / SHEET, rows)
    with pytest.raises(InputError, match=r"sheet.jsonl: the existing sheet holds 1 labels; .*--overwrite"):
        draw_audit(source, out, per_stratum=3)
    assert _rows(out / SHEET) == rows
    score_audit(out, out / SHEET, n_resamples=10)
    assert (out / "quality.json").is_file()
    draw_audit(source, out, per_stratum=3, overwrite=True)
    assert not (out / "quality.json").exists() and not (out / "quality.md").exists()
    # labels scored from a file of their own, the sheet itself unlabelled: kept all the same
    score_audit(out, _write_jsonl(tmp_path / "l.jsonl", [{"item": rows[0]["item"], "label": 0}]), n_resamples=5)
    with pytest.raises(InputError, match=r"the existing sheet was scored \(quality.json\)"):
        draw_audit(source, out, per_stratum=3)


def test_bad_draws_are_refused_before_anything_is_written(tmp_path):
    mixed = _records(4)
    for rec in mixed[:3]:
        rec.generation = {"judges": {**JUDGES, "correctness": "llm@1"}}
    with pytest.raises(InputError, match=r"several correctness judges: match@5 \(9 records\), llm@1 \(3 records\)"):
        draw_audit(_record_file(tmp_path, mixed), tmp_path / "a")
    unjudged = [Record(question=f"q{i}", answers=["a"], dataset="nq") for i in range(3)]
    with pytest.raises(InputError, match="no judged correctness or consistency decisions"):
        draw_audit(_record_file(tmp_path, unjudged), tmp_path / "a")
    with pytest.raises(InputError, match=r"--out: give the audit folder"):
        draw_audit(_record_file(tmp_path), None)
    with pytest.raises(InputError, match="--per-stratum: must be at least 1"):
        draw_audit(_record_file(tmp_path), tmp_path / "a", per_stratum=0)
    with pytest.raises(InputError, match="--task: unknown task 'correct'"):
        draw_audit(_record_file(tmp_path), tmp_path / "a", tasks=["correct"])
    with pytest.raises(FileNotFoundError, match="nowhere: no such run folder or record file"):
        draw_audit(tmp_path / "nowhere", tmp_path / "a")
    assert not (tmp_path / "a").exists()
    run = _run_folder(tmp_path)
    drawn = draw_audit(run, per_stratum=2)
    assert drawn.out_dir == run / "audit" and drawn.run == run
    with pytest.raises(InputError, match="is an audit folder"):
        draw_audit(run / "audit", tmp_path / "b")


# --------------------------------------------------------------------------- scoring


def _sheet_row(item: str, dataset: str, decision: int, weight: float, split: str = "test") -> dict:
    return {"item": f"corr:{item}", "task": "correctness", "record_id": item, "dataset": dataset, "split": split,
            "question": f"{item}?", "answer": "x", "gold": ["y"], "judge": "match@5", "decision": decision,
            "stratum": f"correctness/{dataset}/{decision}", "weight": weight, "label": None, "category": None}


def test_scores_weight_each_label_by_its_stratum(tmp_path):
    # dataset a: 10 items judged right (2 drawn, weight 5), 30 judged wrong (3 drawn, weight 10);
    # dataset b: 8 judged right (2 drawn), none labelled
    rows = ([_sheet_row(f"p{i}", "a", 1, 5.0) for i in range(2)] + [_sheet_row(f"n{i}", "a", 0, 10.0) for i in range(3)]
            + [_sheet_row(f"b{i}", "b", 1, 4.0) for i in range(2)])
    sheet = _write_jsonl(tmp_path / SHEET, rows)
    # of the judged-right items one is right, one wrong; the judged-wrong ones are wrong (2 of 3 labelled)
    labels = _write_jsonl(tmp_path / "labels.jsonl", [
        {"item": "corr:p0", "label": 1, "category": "plain"}, {"item": "corr:p1", "label": 0, "category": "alias"},
        {"item": "corr:n0", "label": 0, "category": None}, {"item": "corr:n2", "label": 0, "category": "plain"}])
    scored = score_audit(sheet, labels, n_resamples=50)
    task = scored.summary["tasks"]["correctness"]
    assert (task["labelled"], task["drawn"], task["population"]) == (4, 7, 40)
    overall = task["rows"][0]
    # weights: p0, p1 stand for 5 items each; n0, n2 for 30 / 2 = 15 each
    assert overall["group"] == "all" and overall["n"] == 4
    assert overall["error"] == pytest.approx(5 / 40)  # p1: judged right, labelled wrong
    assert overall["precision"] == pytest.approx(5 / 10) and overall["recall"] == pytest.approx(5 / 5)
    assert overall["judged_positive"] == pytest.approx(10 / 40)
    assert overall["labelled_positive"] == pytest.approx(5 / 40)
    assert overall["error_low"] <= overall["error"] <= overall["error_high"]
    groups = {(r["group"], r["value"]): r for r in task["rows"]}
    assert groups[("category", "plain")]["error"] == pytest.approx(0.0)
    assert groups[("category", "alias")]["error"] == pytest.approx(1.0)
    assert groups[("category", "none")]["n"] == 1
    assert any("no labels in the stratum of b items judged positive (8 of the run's items)" in n
               for n in scored.summary["notes"])
    assert scored.summary["auroc"]["rows"] == [] and "not estimated" in scored.markdown
    md = (tmp_path / "quality.md").read_text()
    assert "| all | 4 | 12.5 [" in md and "| category: alias | 1 | 100.0" in md
    assert json.loads((tmp_path / "quality.json").read_text())["tasks"]["correctness"]["rows"][0]["n"] == 4
    assert "<table>" in (tmp_path / "quality.html").read_text()
    # a sheet with its labels filled in is a labels file too; rows left null are unlabelled
    filled = [r | {"label": {"p0": 1, "p1": 0, "n0": 0, "n2": 0}.get(r["record_id"])} for r in rows]
    again = score_audit(sheet, _write_jsonl(tmp_path / "filled.jsonl", filled), n_resamples=50)
    assert again.summary["tasks"]["correctness"]["rows"][0]["error"] == pytest.approx(5 / 40)


def test_two_labellers_agreement_on_known_values():
    # 4 items: both 1, both 0, first 1 / second 0, both 0 -> agree 3/4; the first labels 1 half the time, the second
    # a quarter: chance agreement 0.5 * 0.25 + 0.5 * 0.75 = 0.5, kappa (0.75 - 0.5) / (1 - 0.5) = 0.5
    found = agreement([1, 0, 1, 0], [1, 0, 0, 0])
    assert found == {"n": 4, "agree": 0.75, "kappa": pytest.approx(0.5), "first_1_second_0": 1, "first_0_second_1": 0}
    assert math.isnan(agreement([1, 1], [1, 1])["kappa"]) and agreement([1, 1], [1, 1])["agree"] == 1.0
    with pytest.raises(ValueError, match="the same items labelled twice"):
        agreement([1], [])


def test_a_second_labeller_is_scored_for_agreement_and_the_first_for_the_judge(tmp_path):
    rows = [_sheet_row(f"p{i}", "a", 1, 5.0) for i in range(3)] + [_sheet_row(f"n{i}", "a", 0, 10.0) for i in range(3)]
    sheet = _write_jsonl(tmp_path / SHEET, rows)
    first = _write_jsonl(tmp_path / "first.jsonl", [{"item": r["item"], "label": r["decision"]} for r in rows])
    second = _write_jsonl(tmp_path / "second.jsonl", [  # four of the six again; disagrees on p1
        {"item": "corr:p0", "label": 1}, {"item": "corr:p1", "label": 0}, {"item": "corr:n0", "label": 0},
        {"item": "corr:n1", "label": 0}])
    scored = score_audit(sheet, first, n_resamples=10, second_labels=second)
    found = scored.summary["agreement"]["correctness"]
    assert (found["n"], found["agree"], found["first_1_second_0"], found["disagreements"]) == (4, 0.75, 1, ["corr:p1"])
    assert found["kappa"] == pytest.approx(0.5)
    assert scored.summary["tasks"]["correctness"]["rows"][0]["error"] == 0.0  # the first labels score the judge
    md = (tmp_path / "quality.md").read_text()
    assert "Agreement of two labellers" in md and "| correctness | 4 | 75.0 | 0.50 | 1 | 0 |" in md
    elsewhere = _write_jsonl(tmp_path / "elsewhere.jsonl", [{"item": "corr:n2", "label": 0}])
    partial = _write_jsonl(tmp_path / "partial.jsonl", [{"item": "corr:p0", "label": 1}])
    with pytest.raises(InputError, match="labels no item that .*partial.jsonl labels"):
        score_audit(sheet, partial, n_resamples=10, second_labels=elsewhere)
    runner = CliRunner()
    refused = runner.invoke(app, ["label-audit", str(tmp_path), "--second-labels", str(second)])
    assert refused.exit_code == 2 and refused.output.startswith("error: --second-labels: used with --labels")
    command = runner.invoke(app, ["label-audit", str(tmp_path), "--labels", str(first), "--second-labels", str(second),
                                  "--resamples", "5"])
    assert command.exit_code == 0, command.output
    assert "Agreement of two labellers" in command.output and "| correctness | 4 | 75.0 | 0.50 | 1 | 0 |" in command.output


@pytest.mark.parametrize("line, field, message", [
    ({"item": "corr:p0", "label": 2}, "label", "must be 0 or 1, got 2"),
    ({"item": "corr:p0", "label": "1"}, "label", "must be 0 or 1, got '1'"),
    ({"item": "corr:p0"}, "label", "missing"),
    ({"item": "corr:zz", "label": 1}, "item", "'corr:zz' is not an item of the sheet"),
    ({"label": 1}, "item", "missing or not a string"),
    ({"item": "corr:p0", "label": 1, "category": "typo"}, "category", "unknown category 'typo'"),
    ({"item": "corr:n0", "label": 1}, "item", "'corr:n0' labelled twice (also at line 1)"),
])
def test_bad_labels_name_the_file_line_and_field(tmp_path, line, field, message):
    sheet = _write_jsonl(tmp_path / SHEET, [_sheet_row("p0", "a", 1, 1.0), _sheet_row("n0", "a", 0, 1.0)])
    labels = _write_jsonl(tmp_path / "labels.jsonl", [{"item": "corr:n0", "label": 0}, line])
    with pytest.raises(InputError) as caught:
        score_audit(sheet, labels)
    assert str(caught.value).startswith(f"{labels}:2: field '{field}': {message}")
    assert not (tmp_path / "quality.json").exists()


def test_unreadable_labels_and_sheets_are_errors(tmp_path):
    sheet = _write_jsonl(tmp_path / SHEET, [_sheet_row("p0", "a", 1, 1.0)])
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"item": "corr:p0", "label": 1}\n{"item": \n')
    with pytest.raises(ValueError, match=r"broken.jsonl:2: malformed JSON"):
        read_labels(broken, {"corr:p0": {}})
    with pytest.raises(InputError, match=r"no labelled items"):
        read_labels(_write_jsonl(tmp_path / "none.jsonl", [{"item": "corr:p0", "label": None}]), {"corr:p0": {}})
    bad = _write_jsonl(tmp_path / "bad_sheet.jsonl", [_sheet_row("p0", "a", 1, 1.0) | {"decision": "yes"}])
    with pytest.raises(InputError, match=r"bad_sheet.jsonl:1: field 'decision': must be 0 or 1"):
        read_sheet(bad)
    with pytest.raises(FileNotFoundError, match="no sheet here"):
        score_audit(tmp_path / "nowhere", sheet)
    result = CliRunner().invoke(app, ["label-audit", str(tmp_path), "--labels", str(broken)])
    assert result.exit_code == 2 and result.output.startswith("error: ") and "broken.jsonl:2" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_auroc_effect_compares_each_method_on_hand_and_judge_labels(tmp_path):
    from sklearn.metrics import roc_auc_score

    from elical.model.key import ModelKey
    from elical.model.predictions import write_predictions

    records = _records(8)
    run = _run_folder(tmp_path, records)
    evaluated = [r for r in records if r.split != "train"]
    confidence = {r.id: (i % 7) / 7 for i, r in enumerate(evaluated)}
    key = ModelKey("elical", 4, 0)
    write_predictions(run / "scores" / f"{key.name}.parquet", list(confidence), list(confidence.values()), key.name,
                      key=key)
    drawn = draw_audit(run, per_stratum=100)  # every item: weights 1
    assert {r["weight"] for r in drawn.rows} == {1.0}
    truth = {r.id: int(r.greedy_correct if i % 3 else 1 - r.greedy_correct) for i, r in enumerate(evaluated)}
    labels = [{"item": row["item"], "label": truth.get(row["record_id"], row["decision"])} for row in drawn.rows]
    scored = score_audit(run / "audit", _write_jsonl(tmp_path / "labels.jsonl", labels), n_resamples=20)
    assert scored.run == run and audited_run(run / "audit", {}) == run
    effect = scored.summary["auroc"]
    assert effect["n"] == len(evaluated)
    rows = {row["method"]: row for row in effect["rows"]}
    assert {"Consis-Sem", "Prob", "elical-4-s0"} <= set(rows) and rows["elical-4-s0"]["kind"] == "trained"
    ids = list(confidence)
    judged = roc_auc_score([next(r.greedy_correct for r in evaluated if r.id == i) for i in ids], [confidence[i] for i in ids])
    hand = roc_auc_score([truth[i] for i in ids], [confidence[i] for i in ids])
    assert rows["elical-4-s0"]["auroc_judge"] == pytest.approx(judged)
    assert rows["elical-4-s0"]["auroc_hand"] == pytest.approx(hand)
    assert rows["elical-4-s0"]["difference"] == pytest.approx(hand - judged)
    assert "estimate on the 12 audited correctness items" in scored.markdown


# --------------------------------------------------------------------------- the command and the run report


def _tiny_run(tmp_path: Path) -> Path:
    """`elical run` of already-judged records (subject qa, one Eli-Only model of the world LM trained for an
    epoch): a real run folder in seconds."""
    from elical.world import default_lm_path

    records = _records(10)
    for rec in records:
        rec.extra = {}
    write_records([r for r in records if r.split == "train"], tmp_path / "pool_train.jsonl")
    write_records([r for r in records if r.split != "train"], tmp_path / "nq_test.jsonl")
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({
        "name": "audit-tiny", "subject": "qa", "model": str(default_lm_path()), "honesty": None, "torch_threads": 1,
        "qa": {"records": [str(tmp_path / "pool_train.jsonl"), str(tmp_path / "nq_test.jsonl")],
               "groups": {"nq": "in-domain", "popqa": "ood", "mc_capital": "mc"}},
        "questions": {"max_train": None, "max_eval_per_dataset": None},
        "train": {"methods": ["eli-only"], "budgets": ["all"], "seeds": [0], "stage2_passes": None,
                  "settings": {"epochs_stage1": 1, "batch_size": 8, "max_length": 64, "tokens_per_batch": 512,
                               "row_length": 128, "save_steps": 0, "dtype": "float32", "mixed_precision": "no"}},
        "evaluate": {"n_resamples": 5, "alignment_repeats": 2}}))
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--config", str(config), "--out", str(run)])
    assert result.exit_code == 0, result.output
    return run


def test_label_audit_end_to_end_on_a_run_and_its_report(tmp_path):
    run = _tiny_run(tmp_path)
    md, page = (run / "report.md").read_text(), (run / "report.html").read_text()
    assert "## Label quality" in md and NO_AUDIT in md and ">Label quality</h2>" in page
    assert "No label audit: the correctness and consistency labels of this run were not checked by hand." in page

    runner = CliRunner()
    drawn = runner.invoke(app, ["label-audit", str(run), "--per-stratum", "3", "--seed", "2"])
    assert drawn.exit_code == 0, drawn.output
    sheet, html_page = run / "audit" / "sheet.jsonl", run / "audit" / "label.html"
    assert f"page:  {html_page}" in drawn.output and "--labels labels.jsonl" in drawn.output
    assert "press 1" in drawn.output and "Download labels" in drawn.output
    rows = _rows(sheet)
    labels = [{"item": r["item"], "label": r["decision"] if i % 5 else 1 - r["decision"],
               "category": "plain" if i % 2 else None} for i, r in enumerate(rows)]
    labels_file = _write_jsonl(tmp_path / "labels.jsonl", labels)

    refused = runner.invoke(app, ["label-audit", str(run), "--labels", str(labels_file), "--seed", "3"])
    assert refused.exit_code == 2 and refused.output.startswith("error: --seed: sets how a sheet is drawn")
    scored = runner.invoke(app, ["label-audit", str(run), "--labels", str(labels_file), "--resamples", "50"])
    assert scored.exit_code == 0, scored.output
    assert "**Correctness judge `match@5`" in scored.output and "| all | " in scored.output
    assert "Estimated effect of the judge's errors on AUROC" in scored.output and "| Consis-Sem |" in scored.output
    quality = (run / "audit" / "quality.md").read_text()
    assert quality.startswith("# Label audit: run") and "| group | n | error | precision | recall |" in quality
    summary = json.loads((run / "audit" / "quality.json").read_text())
    assert summary["settings"]["seed"] == 2 and summary["settings"]["per_stratum"] == 3
    assert summary["settings"]["judges"] == JUDGES and summary["labelled"] == len(rows)
    assert f"elical run --config {run / 'config.yaml'} --out {run}" in scored.output

    # the next `elical run` of the folder (nothing redone) shows the audit in both report pages
    again = runner.invoke(app, ["run", "--config", str(run / "config.yaml"), "--out", str(run)])
    assert again.exit_code == 0, again.output
    md, page = (run / "report.md").read_text(), (run / "report.html").read_text()
    section = md[md.index("## Label quality"):md.index("## Notes")]
    assert NO_AUDIT not in section and "| all | " in section and "Correctness judge `match@5`" in section
    assert "| Consis-Sem | training-free |" in section
    html_section = page[page.index(">Label quality</h2>"):page.index(">Notes</h2>")]
    assert html_section.count("<table>") == 3 and "<td>all</td>" in html_section


def test_the_report_section_says_when_the_audit_is_stale_or_unreadable(tmp_path):
    run = _run_folder(tmp_path)
    records = _records()
    assert [type(b).__name__ for b in label_quality_blocks(run, records)] == ["Heading", "Paragraph"]
    draw_audit(run, per_stratum=2)
    shown = to_markdown(Document("r", label_quality_blocks(run, records)))
    assert NO_AUDIT in shown and "A sheet is drawn (`audit/label.html`)" in shown
    rows = _rows(run / "audit" / SHEET)
    score_audit(run / "audit", _write_jsonl(tmp_path / "l.jsonl", [{"item": rows[0]["item"], "label": 1}]),
                n_resamples=5)
    for rec in records:
        rec.generation = {"judges": {**JUDGES, "correctness": "llm@2"}}
    stale = to_markdown(Document("r", label_quality_blocks(run, records)))
    assert "**The audit is stale**" in stale and "correctness: audited `match@5`, the run's records now `llm@2`" in stale
    (run / "audit" / "quality.json").write_text("{not json")
    broken = to_markdown(Document("r", label_quality_blocks(run, records)))
    assert "`audit/quality.json` could not be read" in broken


def test_label_audit_of_record_files_needs_an_out_folder(tmp_path):
    source = _record_file(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["label-audit", str(source)])
    assert result.exit_code == 2 and result.output.startswith("error: --out: give the audit folder")
    result = runner.invoke(app, ["label-audit", str(source), "--out", str(tmp_path / "audit"), "--task", "consistency",
                                 "--per-stratum", "2"])
    assert result.exit_code == 0, result.output
    assert {r["task"] for r in _rows(tmp_path / "audit" / SHEET)} == {"consistency"}
    help_text = runner.invoke(app, ["label-audit", "--help"], env={"COLUMNS": "300"}).output
    for option in ("--out", "--per-stratum", "--seed", "--task", "--labels", "--resamples", "--overwrite"):
        assert option in help_text
    assert "correctness|consistency" in " ".join(help_text.replace("│", " ").split())


# --------------------------------------------------------------------------- the page, in a real browser




def test_the_labelling_page_in_a_headless_browser(tmp_path):
    sync_api = browser_api()
    drawn = draw_audit(_record_file(tmp_path, _records(6)), tmp_path / "audit", per_stratum=2, seed=3)
    rows, page_path = drawn.rows, drawn.page
    source = page_path.read_text(encoding="utf-8")
    for secret in ("secret-threshold", "match@5", '"decision"', '"stratum"', '"weight"', '"judge"'):
        assert secret not in source, secret  # labelling is blind: nothing of the judges is on the page
    assert "<script src" not in source and "<link" not in source and "http" not in source
    with sync_api.sync_playwright() as play:
        browser = play.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        try:
            context = browser.new_context(accept_downloads=True)
            page = context.new_page()
            page.goto(page_path.resolve().as_uri())
            text = page.inner_text("body")
            assert "match@5" not in text and "secret" not in text
            n = len(rows)
            assert page.inner_text("#progress") == f"0 labelled of {n}"
            assert page.inner_text("#position") == f"item 1 of {n}" and rows[0]["question"] in text
            page.keyboard.press("1")  # item 1: right, moves on
            page.keyboard.press("c")  # item 2: category comparison, then wrong
            page.keyboard.press("0")
            assert page.inner_text("#progress") == f"2 labelled of {n}"
            assert page.inner_text("#position") == f"item 3 of {n}"
            page.keyboard.press("j")
            page.keyboard.press("ArrowRight")
            page.keyboard.press("1")  # item 5
            page.keyboard.press("k")
            page.keyboard.press("k")  # back to item 4, unlabelled
            assert page.inner_text("#status") == "Not labelled yet"
            assert page.inner_text("#progress") == f"3 labelled of {n}"

            page.reload()  # the labels are kept by the browser: the page resumes at the first unlabelled item
            assert page.inner_text("#progress") == f"3 labelled of {n}"
            assert page.inner_text("#position") == f"item 3 of {n}"
            page.keyboard.press("ArrowLeft")
            assert page.inner_text("#status") == "Labelled: wrong \u00b7 category: comparison"

            with page.expect_download() as caught:
                page.click("#download")
            download = caught.value
            assert download.suggested_filename == "labels.jsonl"
            saved = tmp_path / "labels.jsonl"
            download.save_as(saved)
        finally:
            browser.close()
    lines = [json.loads(line) for line in saved.read_text().splitlines()]
    assert lines == [{"item": rows[0]["item"], "label": 1, "category": None},
                     {"item": rows[1]["item"], "label": 0, "category": "comparison"},
                     {"item": rows[4]["item"], "label": 1, "category": None}]
    scored = score_audit(tmp_path / "audit", saved, n_resamples=10)  # the page's file is what --labels reads
    assert scored.summary["labelled"] == 3


def test_the_page_shows_both_replies_and_the_options(tmp_path):
    sync_api = browser_api()
    rows = draw_audit(_record_file(tmp_path, _records(4)), tmp_path / "audit", per_stratum=1, seed=0).rows
    with sync_api.sync_playwright() as play:
        browser = play.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        try:
            page = browser.new_page()
            page.goto((tmp_path / "audit" / "label.html").resolve().as_uri())
            seen = {}
            for row in rows:
                seen[row["item"]] = (page.inner_text("#card"), page.is_visible("#choices-box"))
                page.keyboard.press("ArrowRight")
        finally:
            browser.close()
    for row in rows:
        card, options = seen[row["item"]]
        if row["task"] == "consistency":
            assert row["a"] in card and row["b"] in card and "Do the two replies give the same answer" in card
        else:
            assert row["answer"] in card and all(g in card for g in row["gold"])
        assert options == ("choices" in row) and all(c in card for c in row.get("choices", []))
