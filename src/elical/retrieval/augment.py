"""Retrieval-augmented prompts: the retrieved passages put before the question's own answering prompt."""

from __future__ import annotations

from collections.abc import Sequence

from elical.annotate.backends.base import Message
from elical.annotate.prompts import PromptConfig, qa_prompt
from elical.core.wordings import RETRIEVAL_TEMPLATE
from elical.data.items import QAItem
from elical.records import Record
from elical.retrieval.passages import Passage


def record_item(record: Record) -> QAItem:
    """The question of an annotation record as a QA item (options kept for multiple choice)."""
    choices = record.extra.get("choices")
    return QAItem(record.question, list(record.answers), dataset=record.dataset, split=record.split,
                  choices=list(choices) if choices else None, id=record.id)


def passages_text(passages: Sequence[Passage]) -> str:
    """The passages one per line, each after its title when it has one not already at its start."""
    lines = []
    for p in passages:
        lines.append(f"{p.title}: {p.text}" if p.title and not p.text.startswith(p.title) else p.text)
    return "\n".join(lines)


def augmented_prompt(item: QAItem, passages: Sequence[Passage], prompts: PromptConfig | None = None) -> list[Message]:
    """The item's answering prompt (same system prompt and wording as without retrieval) with the passages
    before it (:data:`elical.core.wordings.RETRIEVAL_TEMPLATE`)."""
    messages = qa_prompt(item, prompts)
    user = messages[-1]
    text = RETRIEVAL_TEMPLATE.format(passages=passages_text(passages), prompt=user["content"])
    return messages[:-1] + [{**user, "content": text}]
