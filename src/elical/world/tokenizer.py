"""The world's tokenizer: word-level, built here with `tokenizers`, ChatML chat template.

Every word of the world (corpus, questions, prompt wordings) is one token, so the tiny LM spends no
capacity on spelling. The chat template is ChatML, as in SmolLM2 and Qwen, so prompts go through
``apply_chat_template`` exactly as they do for a real model.
"""

from __future__ import annotations

from collections.abc import Iterable

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<pad>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]
CHAT_WORDS = ["system", "user", "assistant", "You", "are", "a", "helpful", "assistant", "."]
DIGITS = list("0123456789")


def build_tokenizer(texts: Iterable[str]):
    """A word-level PreTrainedTokenizerFast covering every word of ``texts`` (plus digits, chat roles)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    splitter = Whitespace()
    words: dict[str, None] = {}
    for text in list(texts) + [" ".join(CHAT_WORDS + DIGITS)]:
        for word, _ in splitter.pre_tokenize_str(text):
            words.setdefault(word, None)
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for word in sorted(words):
        vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([Whitespace()])
    tok.add_special_tokens(SPECIAL_TOKENS)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        unk_token="<unk>",
    )
    wrapped.chat_template = CHATML_TEMPLATE
    return wrapped


def chat_prompt(tokenizer, user_text: str, system_prompt: str | None = None) -> str:
    """The chat-templated prompt text that the model answers from (generation prompt added)."""
    messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
        {"role": "user", "content": user_text}
    ]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
