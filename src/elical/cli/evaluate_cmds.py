"""`elical evaluate`: score baselines and prediction files per dataset and group."""

from __future__ import annotations

from pathlib import Path

import typer

from elical.cli.common import _split_assignment, _split_pair, _user_errors, app
from elical.core.choices import (
    BinStrategy,
    Convention,
)


@app.command()
def evaluate(
    records: list[Path] = typer.Argument(..., help="Record files (HonestyBench JSONL or Parquet) or folders of them."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for metrics.csv, table.md, figures/ and evaluation.json."),
    predictions: list[Path] = typer.Option([], "--predictions", "-p", help="Prediction files of trained models (id, confidence)."),
    methods: str = typer.Option(None, help="Comma-separated baselines (default: every one the records support)."),
    resamples: int = typer.Option(200, help="Bootstrap resamples for the confidence intervals."),
    seed: int = typer.Option(0, help="Seed for bootstrap and alignment splits."),
    ece_bins: int = typer.Option(10, help="Number of ECE bins (1 to 10,000)."),
    ece_strategy: BinStrategy = typer.Option("uniform", help="ECE binning: uniform (equal width) or quantile (equal mass)."),
    alignment_repeats: int = typer.Option(10, help="Random 20/80 threshold splits averaged for alignment."),
    convention: Convention = typer.Option("elical", help="'paper' reproduces the authors' ECE and alignment choices."),
    group: list[str] = typer.Option([], help="Assign a dataset to a group, e.g. --group mydata=ood."),
    compare: list[str] = typer.Option([], help="Also report A - B with a paired interval, e.g. --compare elical:cal-only."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip malformed rows (reported) instead of stopping."),
) -> None:
    """Score every baseline and prediction file per dataset and in-domain / OOD group, with plots."""
    from rich.console import Console

    from elical.core.folder_lock import folder_lock
    from elical.core.inputs import check_output
    from elical.evaluation.evaluate import EvalConfig
    from elical.evaluation.evaluate import evaluate as run_evaluation
    from elical.model.predictions import read_predictions, unmatched_note
    from elical.records import read_records
    from elical.report import render_rich, write_evaluation

    console = Console()
    groups = dict(_split_assignment(item, "--group") for item in group)
    with _user_errors(console):
        check_output(out, "folder")
        config = EvalConfig(
            methods=[m.strip() for m in methods.split(",")] if methods else None,
            n_resamples=resamples, seed=seed, ece_bins=ece_bins, ece_strategy=ece_strategy,
            alignment_repeats=alignment_repeats, convention=convention, groups=groups,
            compare=[_split_pair(item, "--compare") for item in compare],
        )
        loaded = read_records(records, skip_invalid=skip_invalid, require=("greedy_correctness",))
        preds = [read_predictions(p) for p in predictions]
        ids = {r.id for r in loaded}
        with folder_lock(out), console.status(f"Evaluating {len(loaded)} records ..."):  # one writer per folder
            evaluation = run_evaluation(loaded, preds, config)
            evaluation.notes[:0] = [note for p in preds if (note := unmatched_note(p, ids))]
            written = write_evaluation(evaluation, out, {"records": [str(p) for p in records],
                                                         "predictions": [str(p) for p in predictions]})
    console.print(render_rich(evaluation.table, "auroc"))
    for metric in (config.ece_name, "alignment"):
        console.print(render_rich(evaluation.table, metric))
    for note in evaluation.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"Wrote {written.metrics_csv}, {written.differences_csv}, {written.table_md}, "
                  f"{written.table_html} (one file, figures embedded) and {len(written.figures)} figures.")
