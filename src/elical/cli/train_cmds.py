"""`elical train`, `predict` and `gate`: the confidence model."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from elical.cli.common import TrainMode, _on_interrupt, _split_assignment, _user_errors, _yaml_value, app


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
    selection: Path = typer.Option(None, "--selection", help="Cal-Only, EliCal: calibrate on the questions of this file (elical select-labels' JSONL), in file order, the first --budget (default: all of them), instead of the random draw."),
) -> None:
    """Train a confidence model (LoRA + head); works under `accelerate launch` (DDP, FSDP)."""
    from rich.console import Console

    from elical.core.inputs import check_output
    from elical.model.loading import resolve_model
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
        label_order = None
        if selection is not None:
            from elical.core.inputs import InputError
            from elical.records import read_records
            from elical.train.label_selection import read_selection

            if cfg.mode not in ("cal-only", "elical"):
                raise InputError(f"--selection chooses the calibration labels: mode {cfg.mode} has none (use cal-only "
                                 "or elical)")
            label_order = read_selection(selection, read_records([str(p) for p in records]), cfg.budget)
            if cfg.budget is None:  # all the file's questions: recorded as the budget
                cfg = cfg.model_copy(update={"budget": len(label_order.ids)})
        if out is None and os.environ.get("RANK", "0") == "0":  # one line under accelerate launch too
            default = cfg.output_dir == TrainConfig.model_fields["output_dir"].default
            console.print(f"Writing to {cfg.output_dir} ({'the default' if default else 'from --config'}; -o sets it)")
        try:
            with _on_interrupt(f"the finished stages and the last checkpoint are kept in {cfg.output_dir}"):
                result = run_training(cfg, [str(p) for p in records], overwrite=overwrite, init_from=init_from,
                                      label_order=label_order)
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

    from elical.core.inputs import check_device, check_output
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


@app.command("select-labels")
def select_labels(
    pool: list[Path] = typer.Argument(..., help="The training pool: record files (JSONL/Parquet) or folders of them; no correctness label is read."),
    model: Path = typer.Option(..., "--model", help="The stage-1 (Eli-Only) model: elical train's <out>/model or <out> (an EliCal training's <out>/stage1-eli/best too)."),
    budget: int = typer.Option(..., help="Questions to choose: the first BUDGET of the strategy's order (a smaller budget's lie inside a larger one's)."),
    strategy: str = typer.Option("random", help="random (the trainer's seeded draw), stratified-confidence, uncertainty, diverse or uncertain-diverse."),
    seed: int = typer.Option(0, help="Seed of the order (the random draw, the first k-center pick, ties)."),
    out: Path = typer.Option(..., "--out", "-o", help="JSONL file: one line per chosen question (rank, id, dataset, stage-1 confidence, config)."),
    device: str = typer.Option("auto", help="cpu, cuda, cuda:1 ... (auto: GPU if any)."),
) -> None:
    """Choose which pool questions to label, with the stage-1 model's confidences and hidden states."""
    from rich.console import Console

    from elical.core.inputs import InputError, check_device, check_output
    from elical.model.model_folder import find_model_folder, read_saved
    from elical.records import read_records
    from elical.train.label_selection import check_budget, check_strategy, write_selection
    from elical.train.label_selection import select_labels as choose

    console = Console()
    with _user_errors(console):
        check_strategy(strategy)
        check_output(out, "file", suffixes=(".jsonl",))
        check_device(device, "--device")
        if not model.is_dir():
            raise InputError(f"--model {model}: no such folder (give the stage-1 model: elical train's <out>/model)")
        read_saved(find_model_folder(model))  # a folder without a model says so before the pool is read
        records = read_records([str(p) for p in pool])
        check_budget(budget, len(records))
        order = choose(records, model, strategy=strategy, seed=seed, device=device)
        count = write_selection(out, order, budget=budget, records=records, config={"pool": [str(p) for p in pool]})
    console.print(f"Wrote the {count} questions to label ({strategy}, seed {seed}) to {out}")


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

    from elical.core.inputs import check_device
    from elical.model.gate import parse_objective
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
