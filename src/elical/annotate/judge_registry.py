"""The judges, each declared once: its name, the version of its rules, the tasks it decides, whether
``elical judge-check`` scores it by default, and what it does (a leaf module: no judge is imported).

Everything else derives from :data:`JUDGES`: the judge settings' and options' allowed values
(:data:`CorrectnessJudgeKind`, :data:`ConsistencyJudgeKind`, ``elical judge-check --judge``), the versions
in judge names and cache keys (``elical.annotate.judges.JUDGE_VERSIONS``), each task's default judge and
judge-check's default set. The code that builds a judge is ``elical.annotate.judge_factory.BUILDERS``
(one builder per entry here; tests/test_registries.py checks both lists agree). A new judge is one entry
here plus its builder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

Task = Literal["correctness", "consistency"]
BOTH: tuple[Task, ...] = ("correctness", "consistency")


@dataclass(frozen=True)
class JudgeSpec:
    """One judge: ``name`` is what settings and options call it, ``version`` the version of its rules (bump it
    when its decisions change: ``name@version`` is part of the judge's cache key and of an annotation folder's
    settings, so labels of the old rules are never mixed in), ``tasks`` what it decides, ``checked`` the tasks
    whose default ``judge-check`` scores it (offline judges: no model to load)."""

    name: str
    version: int
    tasks: tuple[Task, ...]
    checked: tuple[Task, ...]
    description: str


JUDGES: dict[str, JudgeSpec] = {spec.name: spec for spec in (
    JudgeSpec("match", 17, BOTH, BOTH,
              "rules: the answer asserts a gold alias (DPR has_answer-style containment where it fills the "
              "answer's slot); consistency: the answers' cores agree"),
    JudgeSpec("mention", 3, BOTH, ("correctness",),
              "the match rules up to match@3, kept to compare with: a gold alias found anywhere in the answer"),
    JudgeSpec("exact", 5, BOTH, BOTH, "the whole answer equals a gold alias (or the other answer), token for token"),
    JudgeSpec("paper", 1, ("correctness",), ("correctness",), "the EliCal authors' has_answer, flaws included"),
    JudgeSpec("answer", 16, ("consistency",), ("consistency",),
              "answer cores compared by rules, then embeddings of what differs (all-MiniLM-L6-v2)"),
    JudgeSpec("embedding", 2, BOTH, BOTH, "cosine of the whole texts' embeddings (all-MiniLM-L6-v2)"),
    JudgeSpec("llm", 1, BOTH, (), "an LLM's likelihood of the two allowed replies"),
    JudgeSpec("verified", 1, BOTH, (),
              "the match rules (correctness) and the answer judge (consistency), then a learned veto on their positive "
              "decisions: a logistic model over sentence embeddings fitted on hand-labelled real outputs (bump the "
              "version when the packaged verifiers are refitted)"),
    JudgeSpec("cascade", 15, BOTH, (),
              "the offline front (match rules; the answer judge for consistency), then the LLM judge for what it "
              "leaves open"),
)}

DEFAULT_JUDGE: dict[Task, str] = {"correctness": "verified", "consistency": "verified"}
VERIFIED_RULES: dict[Task, str] = {"correctness": "match", "consistency": "answer"}  # whose decisions `verified` vetoes


def judge_names(task: Task | None = None) -> tuple[str, ...]:
    """Every judge's name (``task`` None), or those that decide ``task``, its default first."""
    if task is None:
        return tuple(JUDGES)
    names = [name for name, spec in JUDGES.items() if task in spec.tasks]
    return (DEFAULT_JUDGE[task], *(n for n in names if n != DEFAULT_JUDGE[task]))


def checked_judges(task: Task) -> tuple[str, ...]:
    """The judges ``elical judge-check`` scores on a task's pairs when none is named, its default first."""
    return tuple(n for n in judge_names(task) if task in JUDGES[n].checked)


# The allowed values of the judge settings, as Literal types built from the registry (pydantic and typer check
# them and name the allowed values). A type checker cannot read a Literal built at run time: it sees str.
if TYPE_CHECKING:
    CorrectnessJudgeKind = str
    ConsistencyJudgeKind = str
else:
    CorrectnessJudgeKind = Literal[judge_names("correctness")]
    ConsistencyJudgeKind = Literal[judge_names("consistency")]
