"""Training of the confidence model (EliCal): targets, nested budgets, stages, prediction.

Usage::

    elical train records/train.parquet --model Qwen/Qwen2.5-7B-Instruct --mode elical --budget 1000 -o runs/m
    elical predict runs/m/model records/eval.parquet -o scores/elical-1000-0.parquet
    # EliCal from an Eli-Only training's finished stage 1 (same stage-1 settings, checked):
    elical train records/train.parquet --model ... --mode eli-only -o runs/eli
    elical train records/train.parquet --model ... --budget 100 --init-from runs/eli -o runs/elical-100
    # several GPUs / machines (DDP), or FSDP for backbones larger than one GPU:
    accelerate launch --config_file src/elical/train/accelerate/ddp.yaml -m elical.cli train ...

Every setting lives in :class:`elical.train.config.TrainConfig` (YAML via ``-c``, ``--set key=value``).
Outputs: ``train_config.yaml`` and ``run.json`` (config, seed, versions), ``settings/train.json`` (mode
and stages), one folder per stage with its ``best/`` model (selected on a validation split carved from the
training pool, see :mod:`elical.train.selection`), ``history.json`` (validation MSE and AUROC per epoch,
epoch 0 = the starting point), ``settings/<stage>.json`` (what decides its output; a rerun with other
settings is refused), a resumable ``checkpoint/`` (safetensors + JSON) and ``done.json``;
``training_log.csv`` and ``train_summary.json`` gather the stages; ``model/`` is the final model (a
standard peft adapter with the head, plus ``elical_model.json``).
"""
