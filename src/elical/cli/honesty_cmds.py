"""`elical honesty-tune` and `honesty-eval`: Alignment for Honesty."""

from __future__ import annotations

from pathlib import Path

import typer

from elical.cli.common import HonestyMethod, _on_interrupt, _user_errors, app


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

    from elical.core.inputs import check_output
    from elical.honesty.commands import load_config, tune_from_files
    from elical.model.loading import resolve_model

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

    from elical.core.inputs import check_output
    from elical.honesty.commands import eval_from_files, load_config
    from elical.model.loading import resolve_model

    console = Console()
    saved = adapter.parent / "honesty.yaml"
    with _user_errors(console):
        check_output(out, "folder")
        resolve_model(model)
        cfg = load_config(config or (saved if saved.exists() else None), max_new_tokens=max_new_tokens, device=device)
        table = eval_from_files(model, adapter, out=out, config=cfg, records=records, honesty_data=honesty_data,
                                limit=limit, predictions=predictions, val_records=val_records)
    from elical.honesty.scoring import markdown_table

    console.print(markdown_table(table))
    console.print(f"Wrote {out / 'honesty.csv'} and {out / 'answers.parquet'}")
