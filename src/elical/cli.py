"""The `elical` command line: one thin command per pipeline step, plus `run` for the whole job."""

from __future__ import annotations

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


if __name__ == "__main__":
    app()
