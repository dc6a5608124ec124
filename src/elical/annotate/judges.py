"""Judges of correctness (answer vs gold aliases) and consistency (sample vs greedy answer).

One interface, :class:`Judge`, batched: ``judge_batch(queries) -> list[bool]``. The rule-based
``MatchJudge`` (alias containment, answer cores, multiple-choice letters) and ``ExactJudge`` live
here with ``CascadeJudge`` and ``CachedJudge`` (dedup of answers of one normalized form and an
on-disk cache keyed by judge name and version, question and answer pair). The authors' ``has_answer``
is :mod:`elical.annotate.paper_judge`; the model-based judges are in :mod:`elical.annotate.judge_models`.
"""

from __future__ import annotations

import abc
import hashlib
import json
import re
import sqlite3
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from elical.annotate.assertion import answers_inner_question, asserts_gold, compare_assertions
from elical.annotate.consistency import FUNCTION_WORDS, Comparison, compare_answers
from elical.annotate.judge_registry import JUDGES, VERIFIED_RULES, Task
from elical.annotate.text import (
    Token,
    alias_tokens,
    contains,
    drop_leading_article,
    key_form,
    normalize,  # noqa: F401  (re-exported: callers group aliases by it)
    tokenize,
)
from elical.data.items import CHOICE_LETTERS

if TYPE_CHECKING:
    from elical.annotate.judge_models import AnswerJudge


@dataclass(frozen=True)
class JudgeQuery:
    """Is ``answer`` right (correctness: against any gold alias) or the same answer (consistency:
    against the one reference answer) for ``question``? ``choices`` marks a multiple-choice item."""

    task: Task
    question: str
    answer: str
    references: tuple[str, ...]
    choices: tuple[str, ...] | None = None


_LETTER_PATTERNS = [
    re.compile(r"^\s*\(?([A-J])\)?\s*$"),  # "B", "(B)"
    re.compile(r"^\s*\(?([A-J])\s*[\).:]"),  # "B.", "B)", "(B)", "B:" at the start
    re.compile(r"\b(?:answer|option|choice)\s*(?:is|:)?\s*\(?([A-J])\b[\).:]?"),  # "the answer is B"
]
# the strict rules' (since match@9): a letter stated as the answer also after "is:", "Answer" in any case
# ("The correct answer is: C", "Answer: C") and a letter that starts a later line ("B.x\nD.y"), so a second
# answer offered is found
_STRICT_LETTER_PATTERNS = [
    _LETTER_PATTERNS[0],
    re.compile(r"^\s*\(?([A-J])\s*[\).:]", re.MULTILINE),  # "B." also at the start of a later line
    re.compile(r"\b(?:(?i:answer)|option|choice)\s*(?:is\s*:?|:)?\s*\(?([A-J])\b[\).:]?"),
]


# a pick its own line calls wrong: "... is incorrect", "... is not the (correct) answer", "... is wrong"
_DISOWNED = re.compile(r"\b(?:is|are|was)\s+(?:incorrect|wrong|false|not\s+(?:the\s+)?(?:correct\s+|right\s+)?answer)\b",
                       re.IGNORECASE)


def extract_choice(answer: str, choices: Sequence[str], strict: bool = True) -> str | None:
    """The option letter an answer picks: a leading/quoted letter, else the one option it names.
    ``strict`` (the rules since match@4): an answer that picks two letters ("C. ... The answer is D"),
    or a letter and the text of another option ("B. <option C's text>", whole or closer to C's words
    than to B's), picks none, and so does a pick its own line calls wrong ("C. ... is not the answer", since
    match@16); an option's text counts only on the line that states the pick, not in the explanation after it."""
    letters = CHOICE_LETTERS[: len(choices)]
    if not strict:  # the first letter pattern that matches, else the one option named anywhere
        for pattern in _LETTER_PATTERNS:
            match = pattern.search(answer)
            if match and match.group(1) in letters:
                return match.group(1)
        named = _named_options(tokenize(answer), choices)
        return named[0] if len(named) == 1 else None
    first_line = answer.strip().split("\n", 1)[0]
    if _DISOWNED.search(first_line):
        return None  # "C. differential validity is not the answer", "B. 100.5 is incorrect." (since match@16)
    line = tokenize(first_line)
    named = _named_options(line, choices)
    named = [x for x in named if not any(y != x and _inside(choices, x, y) for y in named)]
    picked = _letters_offered(answer, choices)
    if picked:
        letter = picked.pop()
        agrees = not picked and set(named) <= {letter} and not _closer_to_another(line, letter, choices)
        return letter if agrees else None
    return named[0] if len(named) == 1 else None


def _letters_offered(answer: str, choices: Sequence[str]) -> set[str]:
    """The option letters the answer states as its pick, by the strict rules' patterns."""
    letters = CHOICE_LETTERS[: len(choices)]
    return {m.group(1) for pattern in _STRICT_LETTER_PATTERNS for m in pattern.finditer(answer) if m.group(1) in letters}


def _closer_to_another(line: Sequence[Token], letter: str, choices: Sequence[str]) -> bool:
    """Whether the words beside the letter ("B. <text>") share more with another option's text than
    with the letter's own (a reworded or cut-off copy of another option; two words at least)."""
    words = {t.text for t in line if t.text not in FUNCTION_WORDS} - {letter.lower()}
    if len(words) < 2:
        return False
    shared = [len(words & {t.text for t in tokenize(option)}) for option in choices]
    own = CHOICE_LETTERS.index(letter)
    return any(n > shared[own] for i, n in enumerate(shared) if i != own)


def _named_options(text: Sequence[Token], choices: Sequence[str]) -> list[str]:
    """The letters of the options whose whole text occurs in the tokens."""
    return [CHOICE_LETTERS[i] for i, opt in enumerate(choices) if contains(text, tokenize(opt))]


def _inside(choices: Sequence[str], x: str, y: str) -> bool:
    """Whether option x's text lies inside option y's (by letter)."""
    i, j = CHOICE_LETTERS.index(x), CHOICE_LETTERS.index(y)
    return contains(tokenize(choices[j]), tokenize(choices[i]))


def choice_decision(query: JudgeQuery, strict: bool = True) -> bool | None:
    """A multiple-choice query decided by option letters; None where the answer picks no letter."""
    choices = query.choices or ()
    picked = extract_choice(query.answer, choices, strict)
    if query.task == "correctness":
        return None if picked is None else picked in query.references
    other = extract_choice(query.references[0], choices, strict) if query.references else None
    if strict and picked is None and other is None and query.references:
        # the same unclear pick ("B. <option C's text>") word for word: the same assertion, whatever it is, unless
        # a reply offers a second letter as the answer ("B. x ... The answer is A"): that one asserts none (match@10)
        texts = (query.answer, query.references[0])
        if any(len(_letters_offered(text, choices)) > 1 for text in texts):
            return None
        lines = [tokenize(text.strip().split("\n", 1)[0]) for text in texts]
        return True if lines[0] and [t.text for t in lines[0]] == [t.text for t in lines[1]] else None
    return None if picked is None or other is None else picked == other


# ---------------------------------------------------------------------------- interface


class Judge(abc.ABC):
    """Decides a batch of queries. ``name`` identifies the judge and its settings (cache key)."""

    name: str = "judge"

    @abc.abstractmethod
    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        """One decision per query, in order."""

    def answer_key(self, query: JudgeQuery) -> str:
        """What of the query's answer the judge looks at: answers with one key share a decision
        (dedup and cache). By default the text itself, trimmed; rule-based judges normalize it."""
        return query.answer.strip()

    def judge(self, question: str, answer: str, references: Sequence[str] | str, task: Task = "correctness") -> bool:
        """Decide one query (``references``: gold aliases, or the one answer to compare with)."""
        refs = (references,) if isinstance(references, str) else tuple(references)
        return self.judge_batch([JudgeQuery(task, question, answer, refs)])[0]


# The version of each judge kind's rules (declared in elical.judge_registry; bump it there when a judge's decisions
# change): it is part of the judge's name (so of every cache key) and of an annotation folder's settings record,
# so a folder labelled by the old rules is refused on resume instead of mixing two judges' labels.
JUDGE_VERSIONS = {name: spec.version for name, spec in JUDGES.items()}


def judge_version(kind: str) -> str:
    """The versioned rules of a judge kind, e.g. 'match@3'; a cascade names the judges it combines
    (its offline front: match rules for correctness, the answer judge for consistency; then the LLM), and so
    does the verified judge (the rules whose positive decisions it vetoes)."""
    version = f"{kind}@{JUDGE_VERSIONS[kind]}"
    if kind == "cascade":
        return f"{version}({'+'.join(judge_version(k) for k in ('match', 'answer', 'llm'))})"
    if kind == "verified":
        return f"{version}({'+'.join(judge_version(k) for k in VERIFIED_RULES.values())})"
    return version


def compare_query(query: JudgeQuery) -> Comparison:
    """The answer judge's rules on one consistency query: option letters for multiple choice (no
    letter picked: different); a reply that answers a nested question's inner one is the same as
    nothing (:func:`~elical.annotate.assertion.answers_inner_question`, since answer@6); else
    :func:`~elical.annotate.assertion.compare_assertions`."""
    if query.task != "consistency":
        raise ValueError("the answer judge decides consistency; correctness has the match judge")
    if query.choices:
        return Comparison(bool(choice_decision(query)))
    if not query.references or any(answers_inner_question(query.question, x) for x in (query.answer, query.references[0])):
        return Comparison(False)
    return compare_assertions(query.question, query.answer, query.references[0])


class MatchJudge(Judge):
    """Rule-based: correctness = the answer asserts a gold alias (found by DPR ``has_answer``-style
    containment, :mod:`elical.annotate.text`, where it fills the answer's slot:
    :func:`~elical.annotate.assertion.asserts_gold`); consistency = the answers' cores agree
    (:func:`~elical.annotate.consistency.compare_answers`); option letters for multiple choice."""

    name = judge_version("match")
    strict = True  # the rules since match@4: what the answer asserts, not what it mentions

    def answer_key(self, query: JudgeQuery) -> str:
        if query.task == "correctness" and not query.choices and not self.strict:
            return key_form(query.answer)  # the tokens are all that alias containment looks at
        return super().answer_key(query)

    def found(self, query: JudgeQuery) -> bool:
        """Whether a gold alias occurs in the answer (asserted or not)."""
        answer = tokenize(query.answer)
        return any(contains(answer, alias_tokens(r)) for r in query.references)

    def sure(self, query: JudgeQuery) -> bool | None:
        """True where the rules find the answer right (the same answer), False where option letters
        differ, else None (where the rules are not sure; the cascade's offline front builds on this)."""
        if query.choices:
            return choice_decision(query, self.strict)
        if query.task == "correctness":
            if self.strict:
                return True if asserts_gold(query.question, query.answer, query.references) else None
            return True if self.found(query) else None
        if not query.references:
            return None
        compare = compare_assertions if self.strict else compare_answers
        return True if compare(query.question, query.answer, query.references[0]).decision else None

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        return [bool(self.sure(q)) for q in queries]


class MentionJudge(MatchJudge):
    """The match judge's rules up to match@3, kept to compare with: a gold alias found anywhere in the
    answer is right, whether the answer asserts it or only mentions it."""

    name = judge_version("mention")
    strict = False


class ExactJudge(Judge):
    """The whole answer equals a gold alias (consistency: the reference), token for token under the
    rules of :mod:`elical.annotate.text`, a leading article aside; option letters for multiple choice."""

    name = judge_version("exact")

    def answer_key(self, query: JudgeQuery) -> str:
        return super().answer_key(query) if query.choices else key_form(query.answer)

    def decide(self, query: JudgeQuery) -> bool:
        """One query's decision."""
        if query.choices:
            return bool(choice_decision(query))
        answer = drop_leading_article(tokenize(query.answer))
        return any(
            len(ref) == len(answer) and contains(answer, ref) for ref in (alias_tokens(r) for r in query.references)
        )

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        return [self.decide(q) for q in queries]


@dataclass
class JudgeStats:
    """Where the judge calls went: asked, answered from dedup or cache, decided by a cascade's offline
    front, computed."""

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


class Front(Protocol):
    """Offline decisions in front of a slower judge: one per query, None where that judge should decide."""

    name: str

    def decide(self, queries: Sequence[JudgeQuery]) -> list[bool | None]: ...


# The offline front of the cascade judge (see elical.annotate.judge_front's docstring for its rules).
LONG_ANSWER = 12  # tokens above which a found alias goes to the LLM (the most with no error on the pair file)
BAND = 0.1  # half-width of the answer judge's uncertainty band, in cosine similarity
_MATCH = MatchJudge()


def near_spelling(answer: Sequence[str], gold: Sequence[str]) -> bool:
    """An answer word that begins with all but the last letter of a gold word of 4+ letters and is
    not that word ("African" / "Africa", "Kenyan" / "Kenya"): an inflection a match rule misses."""
    return any(len(g) >= 4 and a != g and a[: len(g) - 1] == g[: len(g) - 1] for a in answer for g in gold)


def correctness_decision(query: JudgeQuery, long_answer: int = LONG_ANSWER) -> bool | None:
    """The correctness front's decision of one query, None where the LLM should decide."""
    if query.choices:
        return bool(choice_decision(query))
    if _MATCH.sure(query):
        return None if len(tokenize(query.answer)) > long_answer else True
    answer = {t.text for t in tokenize(query.answer)}
    gold = {t.text for ref in query.references for t in alias_tokens(ref)}
    return None if answer & gold or near_spelling(sorted(answer), sorted(gold)) else False


def banded(similarity: float, low: float, high: float) -> bool | None:
    """Same (True) at or above ``high``, different (False) at or below ``low``, None in between."""
    return True if similarity >= high else False if similarity <= low else None


class OfflineFront:
    """Decides what it can offline (see the module docstring); ``name`` records its rules and settings."""

    def __init__(self, answer: AnswerJudge | None = None, long_answer: int = LONG_ANSWER, band: float = BAND):
        if long_answer < 1 or not 0.0 <= band <= 1.0:
            raise ValueError(f"long_answer must be at least 1 and band within [0, 1], got {long_answer} and {band}")
        self.answer = answer
        self.long_answer = long_answer
        self.band = band
        consistency = f"{answer.name},band={band:g}" if answer is not None else "answer-rules"
        self.name = f"{MatchJudge.name},long={long_answer}+{consistency}"

    def edges(self) -> tuple[float, float] | None:
        """The band's (low, high) similarity edges; None without an embedding model."""
        if self.answer is None:
            return None
        return self.answer.threshold - self.band, self.answer.threshold + self.band

    def decide(self, queries: Sequence[JudgeQuery]) -> list[bool | None]:
        """One decision per query, None where the LLM should decide."""
        out: list[bool | None] = [None] * len(queries)
        consistency = [i for i, q in enumerate(queries) if q.task == "consistency"]
        for i, q in enumerate(queries):
            if q.task == "correctness":
                out[i] = correctness_decision(q, self.long_answer)
        found = [compare_query(queries[i]) for i in consistency]
        edges = self.edges()
        sims = self.answer.open_similarities(found) if self.answer is not None else [None] * len(found)
        for i, comparison, sim in zip(consistency, found, sims):
            if comparison.decision is not None:
                out[i] = comparison.decision
            elif sim is not None and edges is not None:
                out[i] = banded(sim, *edges)
        return out


class CascadeJudge(Judge):
    """An offline front decides what it can (by default :class:`OfflineFront`
    without embeddings); the (LLM) judge behind it decides the rest."""

    def __init__(self, fallback: Judge, front: Front | None = None):
        if front is None:
            front = OfflineFront()
        self.front = front
        self.fallback = fallback
        self.name = f"cascade@{JUDGE_VERSIONS['cascade']}({front.name}+{fallback.name})"
        self.stats = JudgeStats()

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        decided = self.front.decide(queries)
        rest = [i for i, d in enumerate(decided) if d is None]
        self.stats.requested += len(queries)
        self.stats.cascade_saved += len(queries) - len(rest)
        self.stats.computed += len(rest)
        if rest:
            for i, value in zip(rest, self.fallback.judge_batch([queries[i] for i in rest])):
                decided[i] = value
        return [bool(d) for d in decided]


def _write(db: sqlite3.Connection, lock: threading.Lock, pending: dict[str, bool]) -> None:
    """Move ``pending`` judgements to disk in one transaction (sorted: neighbouring keys share B-tree pages)."""
    with lock:
        if pending:
            db.executemany("INSERT OR REPLACE INTO judgements VALUES (?, ?)", sorted((k, int(v)) for k, v in pending.items()))
            db.commit()
            pending.clear()


class JudgeCache:
    """Judgements on disk (SQLite), keyed by :func:`query_key`. With ``flush_at`` above 0, new judgements
    gather in memory (where :meth:`get_many` finds them) and go to disk ``flush_at`` at a time, on
    :meth:`flush`, and when the process exits: every transaction rewrites the B-tree pages its random keys
    land on, so one per batch made a long annotation's writes grow with the file (1.1 M keys, 8,400 per batch, on
    a 2-core VM: 30.7 s one transaction per batch, 12.6 s 50,000 per transaction; benchmarks/bench_judge_cache.py,
    benchmarks/results/bench_judge_cache_cpu.txt). A kill loses only what waits in memory: judgements a resumed
    run can make again."""

    def __init__(self, path: str | Path, flush_at: int = 0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_at = flush_at
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
        self._db.execute("CREATE TABLE IF NOT EXISTS judgements (key TEXT PRIMARY KEY, value INTEGER)")
        self._db.commit()
        self._pending: dict[str, bool] = {}
        self._at_exit = weakref.finalize(self, _write, self._db, self._lock, self._pending)

    def get_many(self, keys: Sequence[str]) -> dict[str, bool]:
        out: dict[str, bool] = {}
        with self._lock:
            out.update((k, self._pending[k]) for k in keys if k in self._pending)
            rest = [k for k in keys if k not in out]
            for start in range(0, len(rest), 500):
                chunk = rest[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, value in self._db.execute(f"SELECT key, value FROM judgements WHERE key IN ({marks})", chunk):
                    out[key] = bool(value)
        return out

    def put_many(self, items: dict[str, bool]) -> None:
        with self._lock:
            self._pending.update(items)
            due = len(self._pending) >= self.flush_at
        if due:
            self.flush()

    def flush(self) -> None:
        """Write the judgements waiting in memory."""
        _write(self._db, self._lock, self._pending)

    def close(self) -> None:
        self.flush()
        self._at_exit.detach()
        self._db.close()


def query_key(judge: Judge, query: JudgeQuery) -> str:
    """Cache/dedup key: the judge's name (with its version or settings), the task, the question, the
    judge's :meth:`~Judge.answer_key` of the answer and the references verbatim."""
    refs = sorted(set(query.references)) if query.task == "correctness" else list(query.references)
    payload = [judge.name, query.task, query.question, judge.answer_key(query), refs, list(query.choices or [])]
    return hashlib.sha1(_KEY_JSON.encode(payload).encode()).hexdigest()


_KEY_JSON = json.JSONEncoder(ensure_ascii=False)  # json.dumps(..., ensure_ascii=False), without a new encoder per key


class CachedJudge(Judge):
    """Wraps any judge: judges each distinct normalized query once, and remembers it on disk."""

    def __init__(self, inner: Judge, cache: JudgeCache | None = None):
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.stats = JudgeStats()

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        keys = [query_key(self.inner, q) for q in queries]
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

    def flush(self) -> None:
        """Write the judgements the cache holds in memory (:class:`JudgeCache` ``flush_at``)."""
        if self.cache is not None:
            self.cache.flush()

    def all_stats(self) -> dict[str, int]:
        """Dedup/cache counters plus the cascade's, when the wrapped judge is a cascade."""
        out = self.stats.as_dict()
        if isinstance(self.inner, CascadeJudge):
            out["cascade_saved"] = self.inner.stats.cascade_saved
            out["computed"] = self.inner.stats.computed
        return out


@dataclass
class Judges:
    """The judge of correctness (answer vs gold) and of consistency (sample vs greedy answer)."""

    correctness: Judge
    consistency: Judge

    def flush(self) -> None:
        """Write what the judges' disk caches hold in memory."""
        for judge in (self.correctness, self.consistency):
            if isinstance(judge, CachedJudge):
                judge.flush()

    def stats(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for task, judge in (("correctness", self.correctness), ("consistency", self.consistency)):
            stats = getattr(judge, "stats", None)
            if isinstance(judge, CachedJudge):
                out[task] = judge.all_stats()
            elif isinstance(stats, JudgeStats):
                out[task] = stats.as_dict()
        return out
