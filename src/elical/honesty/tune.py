"""LoRA supervised fine-tuning of the generator on Alignment-for-Honesty examples.

The prompt is rendered exactly as the generation backend renders it (chat template, generation
prompt), the completion follows it token for token and ends with the end-of-turn token; the loss
covers the completion tokens only. The result is a peft adapter folder plus the config, the
training examples and a meta file saying what produced it.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from elical.honesty.builders import SFTExample, summarize
from elical.honesty.config import HonestyConfig

IGNORE = -100


@dataclass
class TuneResult:
    """The tuned (peft) model, where its adapter was saved, and how training went."""

    model: Any
    adapter_dir: Path | None
    steps: int
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    skipped: int = 0


def render_prompt(model: Any, tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The text the generation backend feeds the model for these messages."""
    from elical.annotate.backends.hf import HFBackend

    return HFBackend(model, tokenizer).render(messages)


def encode_examples(
    examples: Sequence[SFTExample], model: Any, tokenizer: Any, config: HonestyConfig
) -> tuple[list[tuple[list[int], list[int]]], int]:
    """(input ids, labels) per example, prompt tokens masked; examples longer than max_length are
    left out and counted (the count is returned and warned about)."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no eos token to end the completions with")
    encoded, skipped = [], 0
    unk = tokenizer.unk_token_id if tokenizer.unk_token_id not in (None, eos, tokenizer.bos_token_id) else None
    for ex in examples:
        prompt = render_prompt(model, tokenizer, config.messages(ex.question))
        templated = bool(getattr(tokenizer, "chat_template", None))
        p_ids = tokenizer(prompt, add_special_tokens=not templated)["input_ids"]
        c_ids = tokenizer(ex.completion, add_special_tokens=False)["input_ids"] + [eos]
        if unk is not None and unk in c_ids:
            missing = [w for w in ex.completion.split() if unk in tokenizer(w, add_special_tokens=False)["input_ids"]]
            raise ValueError(
                f"the tokenizer cannot spell the training completion {ex.completion!r} (unknown: {missing}); "
                "add elical.honesty.builders.honesty_texts(config) to its vocabulary or change the wordings"
            )
        if len(p_ids) + len(c_ids) > config.tune.max_length:
            skipped += 1
            continue
        encoded.append((p_ids + c_ids, [IGNORE] * len(p_ids) + c_ids))
    if skipped:
        warnings.warn(
            f"left out {skipped} of {len(examples)} training examples longer than max_length={config.tune.max_length}",
            stacklevel=2,
        )
    if not encoded:
        raise ValueError("no training example fits max_length; raise tune.max_length")
    return encoded, skipped


def _collate(rows: Sequence[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch; padding is masked out of attention and loss."""
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (seq, lab) in enumerate(rows):
        ids[i, : len(seq)] = torch.tensor(seq)
        labels[i, : len(lab)] = torch.tensor(lab)
        mask[i, : len(seq)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def lora_model(model: Any, config: HonestyConfig) -> Any:
    """Wrap the generator with trainable LoRA adapters on the configured linear layers present in it."""
    from peft import LoraConfig, get_peft_model

    names = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    targets = [t for t in config.tune.target_modules if t in names]
    if not targets:
        raise ValueError(f"none of the LoRA target modules {config.tune.target_modules} exist in the model (has {sorted(names)})")
    lora = LoraConfig(
        task_type="CAUSAL_LM",
        r=config.tune.lora_r,
        lora_alpha=config.tune.lora_alpha,
        lora_dropout=config.tune.lora_dropout,
        target_modules=targets,
    )
    return get_peft_model(model, lora)


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def tune(
    examples: Sequence[SFTExample],
    model: Any,
    tokenizer: Any,
    config: HonestyConfig | None = None,
    out_dir: str | os.PathLike | None = None,
    progress: bool = True,
    base_name: str | None = None,
) -> TuneResult:
    """Fine-tune LoRA adapters of ``model`` on ``examples``; save them to ``out_dir/adapter`` when given.

    ``model`` is changed in place (wrapped by peft); the returned model generates as the aligned one.
    """
    config = config or HonestyConfig()
    if not examples:
        raise ValueError("no training examples")
    tc = config.tune
    torch.manual_seed(config.seed)
    encoded, skipped = encode_examples(examples, model, tokenizer, config)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = _device(tc.device)
    peft_model = lora_model(model, config).to(device)
    steps = tc.max_steps or max(1, math.ceil(len(encoded) * tc.epochs / (tc.batch_size * tc.grad_accumulation)))
    start = time.perf_counter()
    losses = _train_steps(peft_model, encoded, pad_id, config, steps, device, examples[0].method, progress)
    seconds = time.perf_counter() - start
    adapter_dir = None
    if out_dir is not None:
        base = base_name or getattr(model.config, "_name_or_path", "") or type(model).__name__
        meta = {"data": {**summarize(examples), "skipped_too_long": skipped}, "steps": steps, "seconds": round(seconds, 2)}
        adapter_dir = _save_tuned(peft_model, examples, config, Path(out_dir), base, meta, losses)
    return TuneResult(peft_model, adapter_dir, steps, losses, seconds, skipped)


def _batches(n: int, size: int, rng: random.Random) -> Iterator[list[int]]:
    """Endless batches of example indices: seeded shuffles of all examples back to back (a batch may span two)."""
    order: list[int] = []
    while True:
        if len(order) < size:
            fresh = list(range(n))
            rng.shuffle(fresh)
            order.extend(fresh)
        batch, order = order[:size], order[size:]
        yield batch


def _train_steps(peft_model: Any, encoded: Sequence[tuple[list[int], list[int]]], pad_id: int, config: HonestyConfig,
                 steps: int, device: torch.device, method: str, progress: bool) -> list[float]:
    """``steps`` AdamW steps (linear warm-up and decay, gradient clipping at 1) over seeded shuffled batches,
    leaving the model in eval mode; returns the loss of each step."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    from transformers import get_linear_schedule_with_warmup

    tc = config.tune
    peft_model.train()
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=tc.learning_rate, weight_decay=tc.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(tc.warmup_ratio * steps), steps)
    batches = _batches(len(encoded), tc.batch_size, random.Random(config.seed))
    losses: list[float] = []
    columns = [TextColumn("tuning {task.fields[method]}"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"),
               TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn()]
    with Progress(*columns, disable=not progress, transient=True) as bar:
        task = bar.add_task("tune", total=steps, method=method, loss="-")
        for _ in range(steps):
            step_loss = 0.0
            for _ in range(tc.grad_accumulation):
                batch = {k: v.to(device) for k, v in _collate([encoded[i] for i in next(batches)], pad_id).items()}
                loss = peft_model(**batch).loss / tc.grad_accumulation
                loss.backward()
                step_loss += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(step_loss)
            bar.update(task, advance=1, loss=f"{step_loss:.4f}")
    peft_model.eval()
    return losses


def _save_tuned(peft_model: Any, examples: Sequence[SFTExample], config: HonestyConfig, out: Path, base_name: str,
                meta: dict[str, Any], losses: list[float]) -> Path:
    """Write the adapter (``out/adapter``, returned), the config, the examples and ``tune_meta.json``
    (provenance, method, base model, ``meta`` and the losses)."""
    from elical.core.offline import hub_offline
    from elical.core.provenance import provenance

    adapter_dir = out / "adapter"
    with hub_offline():  # peft would ask the Hub whether the base model's vocabulary was resized
        peft_model.save_pretrained(adapter_dir)
    config.to_yaml(out / "honesty.yaml")
    write_examples(examples, out / "examples.jsonl")
    full = {**provenance(), "method": examples[0].method, "base_model": base_name, **meta, "first_loss": losses[0],
            "last_loss": losses[-1], "losses": [round(v, 5) for v in losses]}
    (out / "tune_meta.json").write_text(json.dumps(full, indent=2), encoding="utf-8")
    return adapter_dir


def write_examples(examples: Sequence[SFTExample], path: str | Path) -> None:
    """The training examples as JSONL (what the adapter was trained on)."""
    from dataclasses import asdict

    from elical.core.io import atomic_write

    with atomic_write(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(asdict(ex), ensure_ascii=False) + "\n" for ex in examples)
