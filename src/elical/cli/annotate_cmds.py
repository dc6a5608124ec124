"""`elical annotate`, `relabel`, `annotate-merge`, `judge-check`, `label-audit` and `judge-fit`: records and their labels."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from elical.cli.common import (
    Backend,
    ConsistencyJudge,
    CorrectnessJudge,
    JudgeName,
    QAPrompt,
    _on_interrupt,
    _user_errors,
    app,
)
from elical.core.choices import Engine
from elical.core.wordings import QA_STYLES

if TYPE_CHECKING:
    from rich.console import Console

    from elical.annotate.config import AnnotateConfig
    from elical.records import Record


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
                                     help="hf backend: elical's decoding loop instead of generate (2-3x faster on a GPU); "
                                          "default: auto (on with the model on a GPU or a CPU where it applies, else generate; "
                                          "a resumed folder keeps its path); --no-fast-decode: generate."),
    pipeline: bool = typer.Option(None, "--pipeline/--no-pipeline",
                                  help="Judge each batch while the next is generated (default: on with a GPU or a server, off on a CPU; same records)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Discard the folder's earlier annotation and start over (needed when settings changed)."),
) -> None:
    """Generate greedy answers and k samples, judge them, and write HonestyBench records (resumable)."""
    from rich.console import Console

    from elical.annotate.run import annotate_sources
    from elical.core.inputs import check_output

    console = Console(width=140)
    overrides = dict(
        model=model, backend=backend, base_url=(base_url[0] if len(base_url) == 1 else base_url) or None,
        api_key_env=api_key_env, concurrency=concurrency, engine=engine,
        connect_timeout=connect_timeout, read_timeout=read_timeout, k=k, max_new_tokens=max_new_tokens, repetition_penalty=repetition_penalty,
        batch_size=batch_size, chunk_size=chunk_size, chunk_seconds=chunk_seconds, shard=shard, seed=seed, device=device, dtype=dtype,
        shared_prefix=shared_prefix, fast_decode=fast_decode, pipeline=pipeline, verbal=verbal or None, verbal_examples=verbal_examples,
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


@app.command("relabel")
def relabel(
    source: Path = typer.Argument(..., help="A finished annotation folder (the --out of elical annotate)."),
    out: Path = typer.Option(..., "--out", "-o", help="The new annotation folder, as elical annotate would write it with these judges."),
    judge: CorrectnessJudge | None = typer.Option(None, help="Correctness judge (default: the source's, in its current version)."),
    consistency_judge: ConsistencyJudge | None = typer.Option(None, help="Consistency judge (default: the source's, in its current version)."),
    judge_model: str = typer.Option(None, help="Model of the llm/cascade judge."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the annotation the --out folder holds."),
) -> None:
    """Judge a finished annotation's answers again, with other judges or its own in their current versions, into a
    new folder; nothing is generated again, and the source folder is left as it is."""
    from rich.console import Console

    from elical.annotate.relabel import relabel as relabel_folder
    from elical.core.inputs import check_output

    console = Console()
    judges = {key: value for key, value in (("correctness", judge), ("consistency", consistency_judge), ("llm_model", judge_model)) if value}
    with _user_errors(console):
        check_output(out, "folder")
        records = relabel_folder(source, out, judges, overwrite=overwrite)
    _print_annotation_summary(console, records, out)


@app.command("annotate-merge")
def annotate_merge(
    folders: list[Path] = typer.Argument(..., help="Annotation folders whose shards/ to merge."),
    out: Path = typer.Option(..., "--out", "-o", help="Merged record file (.parquet or .jsonl)."),
    allow_missing: bool = typer.Option(False, "--allow-missing", help="Write even when questions are missing."),
) -> None:
    """Merge annotation shards into one record file, failing on missing or duplicated questions."""
    from rich.console import Console

    from elical.annotate.merge import merge_shards
    from elical.core.inputs import check_output

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
    second_labels: Path = typer.Option(None, "--second-labels",
                                       help="A second labeller's labels of some of the items, made blind to --labels': "
                                            "reports how often the two agree (Cohen's kappa)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Draw a new sheet over one that already has labels "
                                                              "(they no longer apply)."),
) -> None:
    """Check the run's judges by hand: draw a labelling sheet and page of its judged items; with --labels, report
    each judge's error, precision and recall, and what its errors do to AUROC."""
    from rich.console import Console

    from elical.audit.commands import audit_folder_of, draw_audit, score_audit
    from elical.core.inputs import InputError
    from elical.run.folder import RunFolder

    console = Console()
    with _user_errors(console):
        if labels is None:
            for name, value in (("--resamples", resamples), ("--second-labels", second_labels)):
                if value is not None:
                    raise InputError(f"{name}: used with --labels (scoring) only")
            drawn = draw_audit(source, out, per_stratum=20 if per_stratum is None else per_stratum,
                               seed=0 if seed is None else seed,
                               tasks=[t.value for t in task] or ("correctness", "consistency"), overwrite=overwrite)
        else:
            given = [name for name, value in (("--per-stratum", per_stratum), ("--seed", seed), ("--task", task or None),
                                               ("--overwrite", overwrite or None)) if value is not None]
            if given:
                raise InputError(f"{given[0]}: sets how a sheet is drawn; with --labels the drawn sheet is scored as it is")
            scored = score_audit(audit_folder_of(source, out), labels,
                                 n_resamples=1000 if resamples is None else resamples, second_labels=second_labels)
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


@app.command("judge-fit")
def judge_fit(
    source: list[Path] = typer.Argument(..., metavar="LABELLED",
                                        help="Labelled sheets (JSONL rows of a label-audit sheet with 'label' 0/1 filled "
                                             "in) or label-audit folders (sheet.jsonl and the page's labels.jsonl)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for correctness.safetensors and consistency.safetensors."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace vetoes already in --out."),
) -> None:
    """Fit the verified judge's vetoes on your own hand labels (the packaged ones learned SmolLM2's open-QA replies);
    use them with annotate.judges.verifiers: OUT."""
    from rich.console import Console

    from elical.annotate.judge_registry import BOTH
    from elical.annotate.verifier import VERIFIER_DIR, verifier_path
    from elical.audit.fit import fit_verifiers
    from elical.core.inputs import InputError

    console = Console()
    with _user_errors(console):
        if not overwrite and any(verifier_path(task, out).exists() for task in BOTH):
            raise InputError(f"{out}: already holds vetoes; pass --overwrite to replace them")
        fitted = fit_verifiers(source)
        for task, verifier in fitted.items():
            path = verifier.save(verifier_path(task, out))
            typer.echo(f"{path}: {task} veto {verifier.digest}, fitted on {verifier.meta['items']} positive decisions "
                       f"of {verifier.meta['rules']} ({verifier.meta['right']} labelled right)")
        missing = [task for task in BOTH if task not in fitted]
        if missing:
            typer.echo(f"No labels of {' or '.join(missing)}: the verified judge needs both files, so copy the packaged "
                       f"one(s) from {VERIFIER_DIR} or label that task too.")
    typer.echo(f"Use them: annotate: {{judges: {{correctness: verified, consistency: verified, verifiers: {out}}}}}")
