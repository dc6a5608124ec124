"""The paper's prompts (reference.md section 4), as a configurable object, and prompt builders."""

from __future__ import annotations

import string
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, field_validator

from elical.annotate.backends.base import Message
from elical.core.wordings import (
    JUDGE_CONSISTENCY_TEMPLATE,
    JUDGE_CORRECTNESS_TEMPLATE,
    JUDGE_NO,
    JUDGE_YES,
    MC_TEMPLATE,
    QA_STYLES,
    QA_TEMPLATE,
    SYSTEM_PROMPT,
    VERBAL_TEMPLATE,
)
from elical.data.items import CHOICE_LETTERS, QAItem


class PromptConfig(BaseModel):
    """Every prompt wording of an annotation run; defaults are the authors' (elical.core.wordings; keep them to
    compare with the paper)."""

    model_config = ConfigDict(extra="forbid")

    system: str = SYSTEM_PROMPT
    qa: str = QA_TEMPLATE
    mmlu: str = MC_TEMPLATE
    verbal: str = VERBAL_TEMPLATE
    judge_correctness: str = JUDGE_CORRECTNESS_TEMPLATE
    judge_consistency: str = JUDGE_CONSISTENCY_TEMPLATE
    judge_yes: str = JUDGE_YES
    judge_no: str = JUDGE_NO

    @field_validator("qa", mode="before")
    @classmethod
    def _named_style(cls, value: object) -> object:
        """A style name ('paper', 'short': :data:`elical.core.wordings.QA_STYLES`) stands for its template."""
        return QA_STYLES.get(value, value) if isinstance(value, str) else value

    @field_validator("qa", "verbal")
    @classmethod
    def _question_placeholder(cls, value: str) -> str:
        """A question template holds ``{question}`` and no other placeholder (a misspelt one is an error)."""
        fields = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        if fields != {"question"}:
            other = sorted(fields - {"question"})
            raise ValueError(
                f"a question template needs the placeholder {{question}} and no other (styles: {', '.join(QA_STYLES)})"
                + (f"; found {{{'}, {'.join(other)}}}" if other else "")
            )
        return value


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
