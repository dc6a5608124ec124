"""The paper's prompts (reference.md section 4), as a configurable object, and prompt builders."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from elical.annotate.backends.base import Message
from elical.data.items import CHOICE_LETTERS, QAItem


class PromptConfig(BaseModel):
    """Every prompt wording in one place; defaults are the authors' (keep them to compare with the paper)."""

    model_config = ConfigDict(extra="forbid")

    system: str = "You are a helpful assistant."
    qa: str = "Answer the following question.\nQuestion: {question}"
    mmlu: str = "Select the correct answer to the following question based on your internal knowledge.\nQuestion: {question}{options}"
    verbal: str = (
        "Judge whether you can provide a correct answer for the given question. Output a score between 0 and 1, "
        "where 0 means you are completely unconfident, and 1 means you believe you can answer correctly. "
        "Just give your score without any other words.\nQuestion: {question}"
    )
    judge_correctness: str = (
        "Determine whether the generated answer to the question means the same as any of the expected answers.\n"
        "Question: {question}\nExpected answers: {references}\nGenerated answer: {answer}\n"
        'If the generated answer is correct, reply "certain"; otherwise reply "uncertain". Reply with one word only.'
    )
    judge_consistency: str = (
        "Determine whether the two answers to the question are semantically equivalent.\n"
        "Question: {question}\nAnswer 1: {reference}\nAnswer 2: {answer}\n"
        'If they mean the same, reply "certain"; otherwise reply "uncertain". Reply with one word only.'
    )
    judge_yes: str = "certain"
    judge_no: str = "uncertain"


def options_text(choices: Sequence[str]) -> str:
    """MMLU options appended as ``\\nA.{opt}\\nB.{opt}...`` (the authors' layout)."""
    return "".join(f"\n{CHOICE_LETTERS[i]}.{opt}" for i, opt in enumerate(choices))


def chat(system: str | None, user: str) -> list[Message]:
    """Messages for one user turn, with the system prompt when there is one."""
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": "user", "content": user}]


def qa_prompt(item: QAItem, prompts: PromptConfig | None = None) -> list[Message]:
    """The answering prompt for an item (the MMLU wording for multiple-choice items)."""
    prompts = prompts or PromptConfig()
    if item.is_multiple_choice:
        user = prompts.mmlu.format(question=item.question, options=options_text(item.choices or []))
    else:
        user = prompts.qa.format(question=item.question)
    return chat(prompts.system, user)


def verbal_prompt(
    item: QAItem, prompts: PromptConfig | None = None, examples: Sequence[tuple[QAItem, float]] = ()
) -> list[Message]:
    """Verbal-0 (no examples) or Verbal-k: k solved examples (prompt + ``\\n{confidence}``) first."""
    prompts = prompts or PromptConfig()

    def one(x: QAItem) -> str:
        question = x.question + (options_text(x.choices) if x.choices else "")
        return prompts.verbal.format(question=question)

    shots = "".join(f"{one(x)}\n{confidence:g}\n\n" for x, confidence in examples)
    return chat(prompts.system, shots + one(item))
