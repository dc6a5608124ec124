"""The `elical` command line: one thin command per pipeline step, plus `run` for the whole job."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import typer

app = typer.Typer(
    name="elical",
    help="Calibrated confidence for LLMs: annotate, score, train, evaluate, report.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


@app.command()
def version() -> None:
    """Print the elical version."""
    from elical import __version__

    typer.echo(__version__)


@app.command()
def evaluate(
    records: list[Path] = typer.Argument(..., help="Record files (HonestyBench JSONL or Parquet) or folders of them."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for metrics.csv, table.md, figures/ and evaluation.json."),
    predictions: list[Path] = typer.Option([], "--predictions", "-p", help="Prediction files of trained models (id, confidence)."),
    methods: str = typer.Option(None, help="Comma-separated baselines (default: every one the records support)."),
    resamples: int = typer.Option(200, help="Bootstrap resamples for the confidence intervals."),
    seed: int = typer.Option(0, help="Seed for bootstrap and alignment splits."),
    ece_bins: int = typer.Option(10, help="Number of ECE bins."),
    ece_strategy: str = typer.Option("uniform", help="ECE binning: uniform (equal width) or quantile (equal mass)."),
    alignment_repeats: int = typer.Option(10, help="Random 20/80 threshold splits averaged for alignment."),
    convention: str = typer.Option("elical", help="'paper' reproduces the authors' ECE and alignment choices."),
    group: list[str] = typer.Option([], help="Assign a dataset to a group, e.g. --group mydata=ood."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip malformed rows (reported) instead of stopping."),
) -> None:
    """Score every baseline and prediction file per dataset and in-domain / OOD group, with plots."""
    from rich.console import Console

    from elical.evaluate import EvalConfig
    from elical.evaluate import evaluate as run_evaluation
    from elical.predictions import read_predictions
    from elical.records import read_records
    from elical.report import render_rich, write_evaluation

    console = Console()
    groups = dict(_split_assignment(item, "--group") for item in group)
    config = EvalConfig(
        methods=[m.strip() for m in methods.split(",")] if methods else None,
        n_resamples=resamples, seed=seed, ece_bins=ece_bins, ece_strategy=ece_strategy,
        alignment_repeats=alignment_repeats, convention=convention, groups=groups,
    )
    with _user_errors(console):
        loaded = read_records(records, skip_invalid=skip_invalid)
        preds = [read_predictions(p) for p in predictions]
        with console.status(f"Evaluating {len(loaded)} records ..."):
            evaluation = run_evaluation(loaded, preds, config)
            written = write_evaluation(evaluation, out, {"records": [str(p) for p in records],
                                                         "predictions": [str(p) for p in predictions]})
    console.print(render_rich(evaluation.table, "auroc"))
    for metric in (config.ece_name, "alignment"):
        console.print(render_rich(evaluation.table, metric))
    for note in evaluation.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(f"Wrote {written.metrics_csv}, {written.table_md} and {len(written.figures)} figures.")


def _split_assignment(item: str, option: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key or not value:
        raise typer.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint=option)
    return key, value


@contextmanager
def _user_errors(console):
    """Show bad-input errors as one clear line and exit 2, instead of a traceback."""
    from elical.confidence import MissingFieldError
    from elical.records import RecordError

    try:
        yield
    except (RecordError, MissingFieldError, FileNotFoundError, KeyError, ValueError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        console.print(f"[red]error:[/red] {message}")
        raise typer.Exit(2) from None


if __name__ == "__main__":
    app()
