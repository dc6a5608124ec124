"""The run report's "Where it transfers": each trained model's AUROC per evaluated dataset against
Eli-Only's, the drops of more than 0.05 in bold, and the best training-free method named per dataset."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from elical.report.document import Document, Paragraph, Table, to_markdown
from elical.run.report import transfer_blocks
from elical.run.results import transfer_matrix

VALUES = {  # (method, budget): AUROC on (in-domain/nq, ood/popqa)
    ("N-Prob", 0): (0.70, 0.90), ("Consis-Sem", 0): (0.80, 0.60), ("Eli-Only", 0): (0.75, 0.85),
    ("EliCal", 100): (0.78, 0.70), ("Cal-Only", 100): (0.74, 0.84),
}


def summary(values=VALUES) -> pd.DataFrame:
    rows = [{"method": m, "budget": b, "split": split, "metric": "auroc", "mean": v, "std": 0.0, "n": 1}
            for (m, b), pair in values.items() for split, v in zip(("in-domain/nq", "ood/popqa"), pair)]
    rows.append({"method": "EliCal", "budget": 100, "split": "in-domain", "metric": "auroc", "mean": 0.78, "std": 0.0, "n": 1})
    return pd.DataFrame(rows)


def numbers(frame: pd.DataFrame) -> SimpleNamespace:
    """What transfer_blocks reads of RunNumbers (a run of one stage-2 recipe: no selection)."""
    return SimpleNamespace(summary=frame, evaluation=SimpleNamespace(baselines=["N-Prob", "Consis-Sem"]),
                           stage2_selection=None)


def test_matrix_holds_trained_models_per_dataset_and_names_the_best_training_free():
    trained, best = transfer_matrix(summary(), ["N-Prob", "Consis-Sem"])
    assert set(trained.index) == {("Eli-Only", 0), ("EliCal", 100), ("Cal-Only", 100)}
    assert list(trained.columns) == ["in-domain/nq", "ood/popqa"]  # group averages left out
    assert best.to_dict() == {"in-domain/nq": "Consis-Sem", "ood/popqa": "N-Prob"}


def test_report_marks_the_datasets_where_labels_hurt():
    blocks = transfer_blocks(numbers(summary()))
    table = next(b for b in blocks if isinstance(b, Table))
    rows = {row[("", "model")]: row for _, row in table.frame.iterrows()}
    assert rows["EliCal (100)"][("ood", "popqa")] == "0.700 (-0.150)"
    assert rows["best training-free"][("in-domain", "nq")] == "0.800 Consis-Sem"
    bold = {label: flags for label, (_, flags) in zip(rows, table.bold.iterrows())}
    assert bool(bold["EliCal (100)"][("ood", "popqa")]) and not bold["Cal-Only (100)"][("ood", "popqa")]  # -0.01
    assert "**0.700 (-0.150)**" in to_markdown(Document("t", blocks))


def test_without_eli_only_the_section_says_why():
    values = {k: v for k, v in VALUES.items() if k[0] != "Eli-Only"}
    blocks = transfer_blocks(numbers(summary(values)))
    assert isinstance(blocks[-1], Paragraph) and "No Eli-Only model" in blocks[-1].text


ONE_RECIPE = """| model | in-domain: nq | ood: popqa |
|---|---|---|
| best training-free | 0.800 Consis-Sem | 0.900 N-Prob |
| Eli-Only | 0.750 | 0.850 |
| EliCal (100) | 0.780 (+0.030) | **0.700 (-0.150)** |
| Cal-Only (100) | 0.740 (-0.010) | 0.840 (-0.010) |"""


def test_a_run_of_one_recipe_shows_the_table_as_before():
    """The markdown the section had before recipe candidates were shown (code of 522c9c8)."""
    md = to_markdown(Document("t", transfer_blocks(numbers(summary()))))
    assert ONE_RECIPE in md and "stage-2 recipe" not in md


def test_every_stage2_candidate_gets_a_row_and_the_chosen_one_is_marked():
    from elical.run.stage2_selection import AUROC_COLUMNS, choose_recipe

    def row(recipe, budget, seed, dataset, group, auroc):
        return dict(zip(AUROC_COLUMNS, (recipe, budget, seed, dataset, group, 20, auroc)))

    aurocs = pd.DataFrame([  # popqa: reported; sport: held out (chose the recipe, never reported)
        row("full", 100, 0, "sport", "ood", 0.70), row("full", 100, 0, "popqa", "ood", 0.70),
        row("full", 100, 0, "nq", "in-domain", 0.78),
        row("platt", 100, 0, "sport", "ood", 0.60), row("platt", 100, 0, "popqa", "ood", 0.84),
        row("platt", 100, 1, "popqa", "ood", 0.88),  # two seeds: their mean, 0.86
        row("l2sp", 100, 0, "sport", "ood", 0.65), row("l2sp", 100, 0, "popqa", "ood", 0.80),
        row("l2sp", 100, 0, "nq", "in-domain", 0.79),
        row("eli-only", None, 0, "sport", "ood", 0.9), row("eli-only", None, 0, "popqa", "ood", 0.85)],
        columns=AUROC_COLUMNS)
    selection = choose_recipe(aurocs, ["full", "platt", "l2sp"], ["sport"])
    assert selection.winner == "full"
    shown = SimpleNamespace(**{**vars(numbers(summary())), "stage2_selection": selection}, pool_size=1000)
    blocks = transfer_blocks(shown)
    table = next(b for b in blocks if isinstance(b, Table))
    rows = {row[("", "model")]: row for _, row in table.frame.iterrows()}
    assert list(rows) == ["best training-free", "Eli-Only", "EliCal (100) full (chosen)", "EliCal (100) platt",
                          "EliCal (100) l2sp", "Cal-Only (100)"]
    assert rows["EliCal (100) full (chosen)"][("ood", "popqa")] == "0.700 (-0.150)"  # Table 2's EliCal, as before
    assert rows["EliCal (100) platt"][("ood", "popqa")] == "0.860 (+0.010)"
    assert rows["EliCal (100) platt"][("in-domain", "nq")] == "-"  # no AUROC there
    assert rows["EliCal (100) l2sp"][("in-domain", "nq")] == "0.790 (+0.040)"
    assert ("ood", "sport") not in table.frame.columns  # the held-out dataset stays out
    bold = {label: flags for label, (_, flags) in zip(rows, table.bold.iterrows())}
    assert bool(bold["EliCal (100) full (chosen)"][("ood", "popqa")]) and not bold["EliCal (100) platt"][("ood", "popqa")]
    md = to_markdown(Document("t", blocks))
    assert "| EliCal (100) l2sp | 0.790 (+0.040) | 0.800 (-0.050) |" in md
    assert "once per stage-2 recipe (full, platt, l2sp)" in md and "the chosen one (full" in md
