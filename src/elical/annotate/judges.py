"""Judges of correctness (answer vs gold aliases) and consistency (sample vs greedy answer).

One interface, :class:`Judge`, batched: ``judge_batch(queries) -> list[bool]``. ``MatchJudge``
(SQuAD normalization, exact match and alias containment on word boundaries, multiple-choice letters)
lives here with ``CascadeJudge`` and ``CachedJudge`` (dedup of identical normalized answers and an
on-disk cache keyed by judge, question and answer pair). The model-based judges are in
:mod:`elical.annotate.judge_models`.
"""

from __future__ import annotations

import abc
import hashlib
import json
import re
import sqlite3
import string
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from elical.data.items import CHOICE_LETTERS

Task = Literal["correctness", "consistency"]


@dataclass(frozen=True)
class JudgeQuery:
    """Is ``answer`` right (correctness: against any gold alias) or the same answer (consistency:
    against the one reference answer) for ``question``? ``choices`` marks a multiple-choice item."""

    task: Task
    question: str
    answer: str
    references: tuple[str, ...]
    choices: tuple[str, ...] | None = None


# ---------------------------------------------------------------------------- normalization

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation) | {"‘", "’", "“", "”", "–", "—"}


def normalize(text: str) -> str:
    """SQuAD normalization: lower case, no punctuation, no articles, single spaces.

    Where that leaves nothing (the answer *is* an article or punctuation, e.g. the MMLU letter "A"),
    the text is kept without removing articles, so it never becomes "" and matches everything.
    """
    lowered = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    squad = " ".join(_ARTICLES.sub(" ", lowered).split())
    return squad or " ".join(lowered.split())


def contains_words(haystack: str, needle: str) -> bool:
    """Whether the words of ``needle`` occur contiguously in ``haystack`` (both normalized, non-empty)."""
    if not needle or not haystack:
        return False
    return f" {needle} " in f" {haystack} "


_LETTER_PATTERNS = [
    re.compile(r"^\s*\(?([A-J])\)?\s*$"),  # "B", "(B)"
    re.compile(r"^\s*\(?([A-J])\s*[\).:]"),  # "B.", "B)", "(B)", "B:" at the start
    re.compile(r"\b(?:answer|option|choice)\s*(?:is|:)?\s*\(?([A-J])\b[\).:]?"),  # "the answer is B"
]


def extract_choice(answer: str, choices: Sequence[str]) -> str | None:
    """The option letter an answer picks: a leading/quoted letter, else the one option it names."""
    letters = CHOICE_LETTERS[: len(choices)]
    for pattern in _LETTER_PATTERNS:
        match = pattern.search(answer)
        if match and match.group(1) in letters:
            return match.group(1)
    text = normalize(answer)
    named = [letters[i] for i, opt in enumerate(choices) if contains_words(text, normalize(opt))]
    return named[0] if len(named) == 1 else None


# ---------------------------------------------------------------------------- interface


class Judge(abc.ABC):
    """Decides a batch of queries. ``name`` identifies the judge and its settings (cache key)."""

    name: str = "judge"

    @abc.abstractmethod
    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        """One decision per query, in order."""

    def judge(self, question: str, answer: str, references: Sequence[str] | str, task: Task = "correctness") -> bool:
        """Decide one query (``references``: gold aliases, or the one answer to compare with)."""
        refs = (references,) if isinstance(references, str) else tuple(references)
        return self.judge_batch([JudgeQuery(task, question, answer, refs)])[0]


class MatchJudge(Judge):
    """Exact match or alias containment after SQuAD normalization; option letters for multiple choice."""

    name = "match"

    def sure(self, query: JudgeQuery) -> bool | None:
        """The decision where string matching is reliable, else None (the cascade asks the LLM)."""
        if query.choices:
            picked = extract_choice(query.answer, query.choices)
            if query.task == "correctness":
                return None if picked is None else picked in query.references
            other = extract_choice(query.references[0], query.choices) if query.references else None
            return None if picked is None or other is None else picked == other
        answer = normalize(query.answer)
        refs = [normalize(r) for r in query.references]
        if query.task == "correctness":
            return True if any(contains_words(answer, r) for r in refs) else None
        if answer and any(answer == r or contains_words(answer, r) or contains_words(r, answer) for r in refs):
            return True
        return None

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        return [bool(self.sure(q)) for q in queries]


@dataclass
class JudgeStats:
    """Where the judge calls went: asked, answered from dedup or cache, decided by match, computed."""

    requested: int = 0
    dedup_saved: int = 0
    cache_hits: int = 0
    cascade_saved: int = 0
    computed: int = 0

    def add(self, other: JudgeStats) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


class CascadeJudge(Judge):
    """Match decides where it is sure; the (LLM) judge behind it decides the rest."""

    def __init__(self, fallback: Judge, match: MatchJudge | None = None):
        self.match = match or MatchJudge()
        self.fallback = fallback
        self.name = f"cascade({fallback.name})"
        self.stats = JudgeStats()

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        decided = [self.match.sure(q) for q in queries]
        rest = [i for i, d in enumerate(decided) if d is None]
        self.stats.requested += len(queries)
        self.stats.cascade_saved += len(queries) - len(rest)
        self.stats.computed += len(rest)
        if rest:
            for i, value in zip(rest, self.fallback.judge_batch([queries[i] for i in rest])):
                decided[i] = value
        return [bool(d) for d in decided]


class JudgeCache:
    """Judgements on disk (SQLite), keyed by judge name, task, question and the normalized pair."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
        self._db.execute("CREATE TABLE IF NOT EXISTS judgements (key TEXT PRIMARY KEY, value INTEGER)")
        self._db.commit()

    def get_many(self, keys: Sequence[str]) -> dict[str, bool]:
        out: dict[str, bool] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                for key, value in self._db.execute(f"SELECT key, value FROM judgements WHERE key IN ({marks})", chunk):
                    out[key] = bool(value)
        return out

    def put_many(self, items: dict[str, bool]) -> None:
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO judgements VALUES (?, ?)", [(k, int(v)) for k, v in items.items()])
            self._db.commit()

    def close(self) -> None:
        self._db.close()


def query_key(judge_name: str, query: JudgeQuery) -> str:
    """Cache/dedup key: identical normalized answers (and references) share one judgement."""
    refs = sorted({normalize(r) for r in query.references}) if query.task == "correctness" else [normalize(r) for r in query.references]
    payload = [judge_name, query.task, query.question, normalize(query.answer), refs, list(query.choices or [])]
    return hashlib.sha1(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


class CachedJudge(Judge):
    """Wraps any judge: judges each distinct normalized query once, and remembers it on disk."""

    def __init__(self, inner: Judge, cache: JudgeCache | None = None):
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.stats = JudgeStats()

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        keys = [query_key(self.inner.name, q) for q in queries]
        unique: dict[str, JudgeQuery] = {}
        for key, query in zip(keys, queries):
            unique.setdefault(key, query)
        self.stats.requested += len(queries)
        self.stats.dedup_saved += len(queries) - len(unique)
        known = self.cache.get_many(list(unique)) if self.cache else {}
        self.stats.cache_hits += len(known)
        todo = [k for k in unique if k not in known]
        if todo:
            fresh = dict(zip(todo, self.inner.judge_batch([unique[k] for k in todo])))
            self.stats.computed += len(todo)
            if self.cache:
                self.cache.put_many(fresh)
            known.update(fresh)
        return [known[k] for k in keys]

    def all_stats(self) -> dict[str, int]:
        """Dedup/cache counters plus the cascade's, when the wrapped judge is a cascade."""
        out = self.stats.as_dict()
        if isinstance(self.inner, CascadeJudge):
            out["cascade_saved"] = self.inner.stats.cascade_saved
            out["computed"] = self.inner.stats.computed
        return out
