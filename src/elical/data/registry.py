"""Converters from the published formats of the HonestyBench datasets (and MMLU) to QA items.

Each converter turns one row (a dict, as read from the dataset's usual JSON/JSONL files or its
Hugging Face `datasets` version) into ``(question, answers, choices)``. A generic converter covers
the plain ``{question, answer}`` form used by ../shared/data and the EliCal authors' files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from elical.core.strict_json import JsonError, describe, loads

Converted = tuple[str, list[str], "list[str] | None"]
Converter = Callable[[dict[str, Any]], Converted]


class ConversionError(ValueError):
    """A row lacks the fields its dataset format needs; the message says which."""


def _as_list(value: Any, field: str) -> list[str]:
    """Gold aliases: a string, a list of strings (CWQ: also ``{answer, aliases}`` objects) or, as PopQA
    stores them, JSON text of such a list. Anything else (null, a number, a boolean, a nested list) is a
    ConversionError: it is never turned into text."""
    if value is None:
        raise ConversionError(f"field '{field}' is missing")
    if isinstance(value, str):
        if not value.strip().startswith("["):
            return [value]
        try:
            value = loads(value)
        except JsonError:
            return [value]
    if not isinstance(value, list):
        raise ConversionError(f"field '{field}': expected a string or a list of strings, got {describe(value)}")
    out: list[str] = []
    for i, v in enumerate(value):
        if isinstance(v, dict):  # CWQ: [{"answer": ..., "aliases": [...]}]
            out.extend(_as_list(v.get("answer"), f"{field}[{i}].answer"))
            out.extend(_strings(v.get("aliases"), f"{field}[{i}].aliases"))
        elif isinstance(v, str):
            out.append(v)
        else:
            raise ConversionError(f"field '{field}': expected a list of strings, got {describe(v)} at position {i}")
    return out


def _strings(value: Any, field: str) -> list[str]:
    """An optional list of extra aliases: absent or null is none, a string is one."""
    return [] if value is None else _as_list(value, field)


def _question(row: dict[str, Any], *keys: str) -> str:
    for key in keys or ("question",):
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
    raise ConversionError(f"expected a non-empty question in field(s) {', '.join(keys or ('question',))}")


def _dedupe(values: list[str]) -> list[str]:
    out = [v for v in dict.fromkeys(v.strip() for v in values) if v]
    if not out:
        raise ConversionError("no non-empty gold answer")
    return out


def convert_generic(row: dict[str, Any]) -> Converted:
    """``{question, answer|answers: str | [str]}`` (../shared/data, the authors' files, NQ-open)."""
    key = next((k for k in ("answer", "answers", "possible_answers") if k in row), None)
    if key is None:
        raise ConversionError("expected a field 'answer' (or 'answers') holding the gold aliases")
    value = row[key]
    if isinstance(value, dict):  # SQuAD/TriviaQA-style nested answers
        return convert_squad({"question": row.get("question"), "answers": value}) if "text" in value else convert_triviaqa(row)
    return _question(row), _dedupe(_as_list(value, key)), None


def convert_triviaqa(row: dict[str, Any]) -> Converted:
    """TriviaQA (HF ``trivia_qa``): ``answer: {value, aliases, normalized_aliases}``."""
    answer = row.get("answer") or row.get("Answer")
    if not isinstance(answer, dict):
        return convert_generic(row)
    value = answer.get("value", answer.get("Value"))
    aliases = answer.get("aliases", answer.get("Aliases"))
    return _question(row, "question", "Question"), _dedupe(_strings(value, "answer.value") + _strings(aliases, "answer.aliases")), None


def convert_squad(row: dict[str, Any]) -> Converted:
    """SQuAD (HF ``squad``): ``answers: {text: [...], answer_start: [...]}``."""
    answers = row.get("answers")
    if isinstance(answers, dict):
        return _question(row), _dedupe(_as_list(answers.get("text"), "answers.text")), None
    return convert_generic(row)


def convert_musique(row: dict[str, Any]) -> Converted:
    """MuSiQue: ``answer`` plus ``answer_aliases``."""
    values = _as_list(row.get("answer"), "answer") + _strings(row.get("answer_aliases"), "answer_aliases")
    return _question(row), _dedupe(values), None


def convert_popqa(row: dict[str, Any]) -> Converted:
    """PopQA (``akariasai/PopQA``): ``possible_answers`` is a JSON-encoded list."""
    if "possible_answers" in row:
        return _question(row), _dedupe(_as_list(row["possible_answers"], "possible_answers")), None
    return convert_generic(row)


def convert_cwq(row: dict[str, Any]) -> Converted:
    """ComplexWebQuestions: ``answers: [{answer, aliases}]``; question or machine_question."""
    key = "answers" if "answers" in row else "answer"
    return _question(row, "question", "machine_question"), _dedupe(_as_list(row.get(key), key)), None


def convert_pararel(row: dict[str, Any]) -> Converted:
    """ParaRel as released by the authors: ``{question, answer}``, or a cloze ``{query, obj_label}``."""
    if "question" in row:
        return convert_generic(row)
    return _question(row, "query", "prompt"), _dedupe(_as_list(row.get("obj_label") or row.get("answer"), "obj_label")), None


def convert_mmlu(row: dict[str, Any]) -> Converted:
    """MMLU: HF ``cais/mmlu`` (``choices`` + integer ``answer``) or CSV rows (``A``..``D`` + letter)."""
    from elical.data.items import CHOICE_LETTERS

    choices = _options(row)
    answer = row.get("answer")
    if (isinstance(answer, int) and not isinstance(answer, bool)) or (isinstance(answer, str) and answer.strip().isdigit()):
        index = int(answer)
    elif isinstance(answer, str) and answer.strip().upper() in CHOICE_LETTERS[: len(choices)]:
        index = CHOICE_LETTERS.index(answer.strip().upper())
    else:
        raise ConversionError(f"field 'answer': expected a letter A-{CHOICE_LETTERS[len(choices) - 1]} or an index, got {answer!r}")
    if not 0 <= index < len(choices):
        raise ConversionError(f"field 'answer': index {index} out of range for {len(choices)} options")
    return _question(row), [CHOICE_LETTERS[index]], choices


def _options(row: dict[str, Any]) -> list[str]:
    """A multiple-choice row's options: a ``choices`` list, or columns A, B, C, ... from A on without a gap;
    each a non-empty string, at least two."""
    from elical.data.items import CHOICE_LETTERS

    if "choices" in row:
        choices = row["choices"]
        if not isinstance(choices, list):
            raise ConversionError(f"field 'choices': expected a list of options, got {describe(choices)}")
        names = [f"choices[{i}]" for i in range(len(choices))]
    else:
        count = next((i for i, letter in enumerate(CHOICE_LETTERS) if letter not in row), len(CHOICE_LETTERS))
        if any(letter in row for letter in CHOICE_LETTERS[count:]):
            raise ConversionError(f"field '{CHOICE_LETTERS[count]}' is missing (the options run from A without a gap)")
        names = list(CHOICE_LETTERS[:count])
        choices = [row[letter] for letter in names]
    for name, option in zip(names, choices):
        if not isinstance(option, str) or not option.strip():
            raise ConversionError(f"field '{name}': expected an option (non-empty text), got {describe(option)}")
    if len(choices) < 2:
        raise ConversionError("expected at least two options in 'choices' or in columns A, B, C, D")
    return choices


Group = Literal["in-domain", "ood", "mc", "other"]  # evaluation groups, after the paper's HonestyBench split
GROUP_ORDER: tuple[Group, ...] = ("in-domain", "ood", "mc", "other")


@dataclass(frozen=True)
class DatasetSpec:
    """A known dataset, declared once: its canonical name, converter, the names it goes by in file names, its
    evaluation group (the paper's split; ``other``: none of its groups) and its name in tables (``display``;
    empty: the name as given)."""

    name: str
    converter: Converter
    aliases: tuple[str, ...] = ()
    multiple_choice: bool = False
    group: Group = "other"
    display: str = ""


REGISTRY: dict[str, DatasetSpec] = {}


def register(spec: DatasetSpec) -> DatasetSpec:
    """Add a dataset (or replace one) in the registry, under its name and aliases."""
    for key in (spec.name, *spec.aliases):
        REGISTRY[key.lower()] = spec
    return spec


# In the paper's order (Table 2's columns), which tables keep.
for _spec in (
    DatasetSpec("nq", convert_generic, ("natural_questions", "nq_open", "nq-open"), group="in-domain", display="NQ"),
    DatasetSpec("tq", convert_triviaqa, ("triviaqa", "trivia_qa", "tqa"), group="in-domain", display="TQ"),
    DatasetSpec("hq", convert_generic, ("hotpotqa", "hotpot_qa", "hotpot"), group="in-domain", display="HQ"),
    DatasetSpec("2wiki", convert_generic, ("2wikimultihopqa", "2wikimqa", "wiki2"), group="in-domain",
                display="2Wiki"),
    DatasetSpec("pararel", convert_pararel, ("para_rel",), group="in-domain", display="ParaRel"),
    DatasetSpec("squad", convert_squad, ("squad_v1", "squad1"), group="ood", display="SQuAD"),
    DatasetSpec("wq", convert_generic, ("webquestions", "web_questions", "webq"), group="ood", display="WQ"),
    DatasetSpec("cwq", convert_cwq, ("complexwebquestions", "complex_web_questions"), group="ood", display="CWQ"),
    DatasetSpec("musique", convert_musique, ("musique_ans",), group="ood", display="MuSiQue"),
    DatasetSpec("popqa", convert_popqa, ("pop_qa",), group="ood", display="PopQA"),
    DatasetSpec("mmlu", convert_mmlu, ("cais/mmlu", "hendrycks_test"), multiple_choice=True, group="mc",
                display="MMLU"),
    DatasetSpec("nonambigqa", convert_generic, group="ood", display="NonAmbigQA"),
):
    register(_spec)

GENERIC = DatasetSpec("generic", convert_generic)


def lookup(name: str) -> DatasetSpec:
    """The spec of a dataset name (case-insensitive); unknown names get the generic converter."""
    return REGISTRY.get(name.lower(), GENERIC)


def dataset_group(name: str) -> Group:
    """The evaluation group of a dataset name (case-insensitive; ``other`` for a dataset not registered)."""
    return lookup(name).group


def display_name(name: str) -> str:
    """A dataset's name in tables (NQ, TQ, ...); an unregistered name as given."""
    spec = REGISTRY.get(name.lower())
    return spec.display if spec is not None and spec.display else name


def paper_position(name: str) -> tuple[int, int]:
    """Where a dataset goes in tables: (its registration order, 0 for the canonical name, then its aliases in
    order); after every registered one for a name not registered."""
    order = list(dict.fromkeys(spec.name for spec in REGISTRY.values()))
    spec = REGISTRY.get(name.lower())
    if spec is None:
        return len(order), 0
    names = [spec.name, *spec.aliases]
    return order.index(spec.name), names.index(name.lower()) if name.lower() in names else len(names)
