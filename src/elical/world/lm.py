"""The world's tiny causal LM: a real HF Llama/Qwen2 built from a config, pretrained on the corpus
mixed with QA-format examples, saved as safetensors with its tokenizer and the world it learned.

``train_world_lm`` is what ``elical world train-lm`` runs; it works on a GPU at full size (minutes)
and on a CPU at a small size (tests).
"""

from __future__ import annotations

import json
import math
import random
import string
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elical.world.config import LMConfig, WorldConfig
from elical.world.corpus import corpus_sentences
from elical.world.generate import World, generate_world
from elical.world.questions import QAExample, evaluation_questions, qa_tuning_examples
from elical.world.tokenizer import build_tokenizer, chat_prompt

if TYPE_CHECKING:
    import torch

META_FILE = "world_lm.json"


def user_text(example: QAExample, lm: LMConfig) -> str:
    """The user message for a question: the QA or the multiple-choice instruction around it."""
    if example.choices:
        options = "".join(f"\n{string.ascii_uppercase[i]}.{opt}" for i, opt in enumerate(example.choices))
        return lm.mc_template.format(question=example.question, options=options)
    return lm.qa_template.format(question=example.question)


def world_tokenizer(world: World, lm: LMConfig):
    """The word-level tokenizer covering the world's corpus, questions and prompt wordings."""
    texts: list[str] = [lm.qa_template, lm.mc_template, lm.system_prompt or ""]
    texts += [" ".join(values) for values in world.pools.values()]
    texts += [p.name for p in world.people]
    from elical.world.relations import CITY_COUNTRY, MULTIHOP_QUESTIONS, PERSON_RELATIONS

    for rel in PERSON_RELATIONS + (CITY_COUNTRY,):
        texts += list(rel.statements + rel.questions + rel.paraphrases)
    texts += list(MULTIHOP_QUESTIONS) + ["A. B. C. D. E. F. G. H."]
    return build_tokenizer(texts)


def build_lm(tokenizer, lm: LMConfig):
    """A randomly initialised causal LM of the configured architecture and size."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    config_cls = {"llama": LlamaConfig, "qwen2": Qwen2Config}[lm.arch]
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=lm.hidden_size,
        intermediate_size=lm.intermediate_size,
        num_hidden_layers=lm.num_layers,
        num_attention_heads=lm.num_heads,
        num_key_value_heads=lm.num_kv_heads,
        max_position_embeddings=lm.max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(lm.seed)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def _corpus_chunks(ids: list[list[int]], seq_len: int, bos: int, rng: random.Random) -> Iterator[list[int]]:
    """Endless fixed-length chunks of the shuffled corpus (reshuffled on every pass)."""
    while True:
        order = list(range(len(ids)))
        rng.shuffle(order)
        buffer: list[int] = [bos]
        for i in order:
            buffer.extend(ids[i])
            while len(buffer) >= seq_len:
                yield buffer[:seq_len]
                buffer = [bos] + buffer[seq_len:]


def _qa_packs(examples: list[tuple[list[int], list[int]]], seq_len: int, pad: int,
              rng: random.Random) -> Iterator[tuple[list[int], list[int]]]:
    """Endless packs of whole QA conversations; the loss sees only the answers (labels -100 elsewhere)."""
    while True:
        order = list(range(len(examples)))
        rng.shuffle(order)
        ids: list[int] = []
        labels: list[int] = []
        for i in order:
            x, y = examples[i]
            if ids and len(ids) + len(x) > seq_len:
                yield ids + [pad] * (seq_len - len(ids)), labels + [-100] * (seq_len - len(labels))
                ids, labels = [], []
            ids, labels = ids + x[:seq_len], labels + y[:seq_len]


def encode_qa(tokenizer, example: QAExample, lm: LMConfig) -> tuple[list[int], list[int]]:
    """Token ids of a full QA conversation and its labels (answer tokens + end of turn only)."""
    prompt = tokenizer(chat_prompt(tokenizer, user_text(example, lm), lm.system_prompt),
                       add_special_tokens=False)["input_ids"]
    answer = tokenizer(example.answers[0], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt + answer, [-100] * len(prompt) + answer


def generate_replies(model, tokenizer, examples: list[QAExample], lm: LMConfig, k: int = 0,
                     batch_size: int = 256, max_new_tokens: int = 6) -> list[list[str]]:
    """Per example: its greedy reply, then ``k`` sampled replies (temperature 1, top_p 0.95, top_k 50)."""
    import torch

    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    tokenizer.padding_side = "left"
    out: list[list[str]] = []
    step = max(1, batch_size // max(1, k))
    for start in range(0, len(examples), step):
        chunk = examples[start:start + step]
        prompts = [chat_prompt(tokenizer, user_text(e, lm), lm.system_prompt) for e in chunk]
        enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        common = {"max_new_tokens": max_new_tokens, "pad_token_id": tokenizer.pad_token_id,
                      "eos_token_id": tokenizer.eos_token_id}
        with torch.no_grad():
            greedy = model.generate(**enc, do_sample=False, **common)
            sampled = model.generate(**enc, do_sample=True, temperature=1.0, top_p=0.95, top_k=50,
                                     num_return_sequences=k, **common) if k else None
        width = enc["input_ids"].shape[1]
        g = tokenizer.batch_decode(greedy[:, width:], skip_special_tokens=True)
        s = tokenizer.batch_decode(sampled[:, width:], skip_special_tokens=True) if sampled is not None else []
        for i, reply in enumerate(g):
            out.append([reply.strip()] + [x.strip() for x in s[i * k:(i + 1) * k]])
    model.train(was_training)
    return out


def gold_text(tokenizer, example: QAExample) -> str:
    """The gold answer as the tokenizer decodes it (word-level decoding joins words by spaces)."""
    return tokenizer.decode(tokenizer(example.answers[0], add_special_tokens=False)["input_ids"]).strip()


def greedy_accuracy(model, tokenizer, examples: list[QAExample], lm: LMConfig, batch_size: int = 256) -> list[bool]:
    """Whether the greedy reply equals the gold answer, per example (a quick training-time probe)."""
    replies = generate_replies(model, tokenizer, examples, lm, batch_size=batch_size)
    return [r[0] == gold_text(tokenizer, e) for r, e in zip(replies, examples)]


def probe(model, tokenizer, world: World, lm: LMConfig, n: int = 600) -> dict[str, Any]:
    """Greedy accuracy on in-domain test questions, overall and by corpus mentions and contested."""
    rng = random.Random(0)
    questions = [q for q in evaluation_questions(world) if q.info.get("group") == "in-domain" and q.split == "test"]
    questions = rng.sample(questions, min(n, len(questions)))
    ok = greedy_accuracy(model, tokenizer, questions, lm)
    buckets: dict[str, list[bool]] = {}
    for q, c in zip(questions, ok):
        m = q.info["mentions"]
        key = "contested" if q.info["contested"] else ("0" if m == 0 else "1" if m == 1 else "2-3" if m <= 3 else "4+")
        buckets.setdefault(key, []).append(c)
    return {"accuracy": sum(ok) / max(1, len(ok)),
            **{f"acc_{k}": round(sum(v) / len(v), 3) for k, v in sorted(buckets.items())}}


def train_world_lm(world_cfg: WorldConfig, lm: LMConfig, out_dir: str | Path, device: str | None = None,
                   log: Callable[[str], None] = print, probe_every: int = 1000,
                   time_limit: float | None = None) -> dict[str, Any]:
    """Pretrain the tiny LM on the world's corpus + QA examples and save it (safetensors) to ``out_dir``.

    ``time_limit`` (seconds) is a safety net for time-boxed machines: training stops early, saves, and
    the metadata records the step reached (the checkpoint then differs from a full run's).
    """
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    world = generate_world(world_cfg)
    tokenizer = world_tokenizer(world, lm)
    model = build_lm(tokenizer, lm).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"world {world.fingerprint()}: {len(world.people)} people; LM {lm.arch} {n_params / 1e6:.2f}M params on {device}")
    rng = random.Random(lm.seed)
    corpus, qa = _encoded_data(world, tokenizer, lm)
    chunks, packs = _corpus_chunks(corpus, lm.seq_len, tokenizer.bos_token_id, rng), _qa_packs(
        qa, lm.seq_len, tokenizer.pad_token_id, rng)
    n_qa = max(1, round(lm.batch_size * lm.qa_weight)) if qa else 0
    opt = _optimizer(model, lm)
    history: list[dict[str, Any]] = []
    model.train()
    start = time.time()
    use_bf16 = device.startswith("cuda")
    for step in range(lm.steps):
        input_ids, labels = _batch(chunks, packs, lm.batch_size - n_qa, n_qa, tokenizer.pad_token_id, device)
        for group in opt.param_groups:
            group["lr"] = lm.lr * _lr_factor(step, lm)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=use_bf16):
            loss = model(input_ids=input_ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        out_of_time = time_limit is not None and time.time() - start > time_limit
        if (step + 1) % probe_every == 0 or step + 1 == lm.steps or out_of_time:
            entry = {"step": step + 1, "loss": round(loss.item(), 4), "seconds": round(time.time() - start, 1),
                     **probe(model, tokenizer, world, lm)}
            history.append(entry)
            log(json.dumps(entry))
        if out_of_time:
            log(f"time limit {time_limit}s reached: stopped at step {step + 1} of {lm.steps}")
            break
    save_world_lm(model, tokenizer, world, lm, out_dir, history, n_params, time.time() - start, device)
    return history[-1] if history else {}


def _encoded_data(world: World, tokenizer, lm: LMConfig) -> tuple[list[list[int]], list[tuple[list[int], list[int]]]]:
    """Token ids of the corpus sentences and (ids, labels) of the QA examples; a token the world
    tokenizer lacks is a ValueError."""
    corpus = [tokenizer(s, add_special_tokens=False)["input_ids"] for s in corpus_sentences(world)]
    qa = [encode_qa(tokenizer, e, lm) for e in qa_tuning_examples(world)]
    unk = tokenizer.unk_token_id
    n_unk = sum(ids.count(unk) for ids in corpus) + sum(x.count(unk) for x, _ in qa)
    if n_unk:
        raise ValueError(f"world tokenizer misses {n_unk} token(s) of the corpus/QA data")
    return corpus, qa


def _optimizer(model, lm: LMConfig) -> torch.optim.AdamW:
    """AdamW (betas 0.9, 0.95) with weight decay on matrices only."""
    import torch

    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": lm.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lm.lr, betas=(0.9, 0.95))


def _lr_factor(step: int, lm: LMConfig) -> float:
    """Linear warm-up, then cosine decay to ``lm.min_lr_ratio`` of the peak learning rate."""
    if step < lm.warmup_steps:
        return (step + 1) / lm.warmup_steps
    progress = (step - lm.warmup_steps) / max(1, lm.steps - lm.warmup_steps)
    return lm.min_lr_ratio + (1 - lm.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def _batch(chunks: Iterator[list[int]], packs: Iterator[tuple[list[int], list[int]]], n_lm: int, n_qa: int,
           pad: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, labels) of one step: ``n_lm`` corpus chunks, then ``n_qa`` QA packs; padding is not learnt."""
    import torch

    ids = [next(chunks) for _ in range(n_lm)]
    labels = list(ids)
    for _ in range(n_qa):
        x, y = next(packs)
        ids.append(x)
        labels.append(y)
    input_ids = torch.tensor(ids, device=device)
    label_t = torch.tensor(labels, device=device)
    label_t[input_ids == pad] = -100
    return input_ids, label_t


def save_world_lm(model, tokenizer, world: World, lm: LMConfig, out_dir: str | Path,
                  history: list[dict[str, Any]], n_params: int, seconds: float, device: str) -> None:
    """Write weights (safetensors, ``lm.save_dtype``), tokenizer and a metadata file naming the world."""
    import torch
    import transformers

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = model.to("cpu").to(getattr(torch, lm.save_dtype))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    meta = {
        "world_fingerprint": world.fingerprint(),
        "world": world.config.model_dump(),
        "lm": lm.model_dump(),
        "params": n_params,
        "train_seconds": round(seconds, 1),
        "device": device if device == "cpu" else torch.cuda.get_device_name(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "history": history,
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=2))


def load_world_lm(path: str | Path, dtype: str = "float32"):
    """Load a saved world LM: (model in eval mode, tokenizer, metadata dict)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    meta_path = path / META_FILE
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path}: not a world LM folder (run `elical world train-lm` first)")
    meta = json.loads(meta_path.read_text())
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer, meta
