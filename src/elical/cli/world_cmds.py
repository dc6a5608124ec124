"""`elical world generate` and `world train-lm`: the synthetic world and its tiny LM."""

from __future__ import annotations

from pathlib import Path

import typer

from elical.cli.common import _Typer, _user_errors, app

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

    from elical.core.inputs import check_output
    from elical.world.config import WorldConfig, from_dict, load_world_configs
    from elical.world.generate import generate_world
    from elical.world.world_io import write_world

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

    from elical.core.inputs import check_device, check_output
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
