"""Tiny real Hugging Face models for tests, and records a tiny model can learn from: a byte-level BPE tokenizer trained here, random weights.

Nothing is downloaded: the tokenizer is trained on a few sentences with the `tokenizers` library
and wrapped as a `PreTrainedTokenizerFast` with a ChatML chat template, like SmolLM2's and Qwen's.
"""

from __future__ import annotations

import random

from elical.records import Record

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

CORPUS = [
    "Answer the following question.",
    "Question: What is the capital of France? Paris is the capital of France.",
    "Who wrote Hamlet? William Shakespeare wrote Hamlet.",
    "You are a helpful assistant.",
    "The quick brown fox jumps over the lazy dog 0 1 2 3 4 5 6 7 8 9.",
    "Judge whether you can provide a correct answer for the given question.",
    "Which river flows through Egypt? The Nile. In which year did it happen? 1969.",
]
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<pad>"]


def build_tokenizer(vocab_size: int = 400):
    """Train a byte-level BPE tokenizer on CORPUS and wrap it for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        unk_token="<|endoftext|>",
    )
    wrapped.chat_template = CHATML_TEMPLATE
    return wrapped


def build_model(tokenizer, arch: str = "llama", seed: int = 0, hidden: int = 32, layers: int = 2, tied: bool = False):
    """A tiny causal LM of a real architecture ('llama' or 'qwen2') with seeded random weights; ``tied``: its
    output layer is its input embedding, as in SmolLM2 and the world LM."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    config_cls = {"llama": LlamaConfig, "qwen2": Qwen2Config}[arch]
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=tied,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return model.eval()


GOOD_WORDS = ["capital", "France", "Paris", "Egypt", "Nile"]
BAD_WORDS = ["fox", "dog", "lazy", "quick", "brown"]


def learnable_records(n: int = 40, k: int = 4, seed: int = 0) -> list[Record]:
    """Questions about capitals are answered consistently and correctly; those about foxes are not."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        good = i % 2 == 0
        words = GOOD_WORDS if good else BAD_WORDS
        question = " ".join(rng.choice(words) for _ in range(rng.randint(3, 6)))
        labels = [int(good)] * k
        records.append(Record(question=f"{i} {question}", answers=["x"], dataset="ab"[i % 4 // 2],
                              samples=["s"] * k, sample_consistent=labels, sample_correct=labels,
                              greedy_correct=int(good)))
    return records
