"""LLM-judge calls saved by offline judges in front of the LLM judge, and the agreement with the labels.

On the labelled pair files (tests/data/judge_pairs_*.jsonl), per task:

- today's cascade: ``match`` decides where it finds an alias (``MatchJudge.sure``), the LLM the rest;
- the offline front measured here: the offline judge decides every pair it is sure of, the LLM only
  the uncertain ones. Correctness (``match``): uncertain where no alias is found but the answer shares a
  word with a gold alias or spells one nearly (``Africa`` / ``African``), or where an alias is found in an
  answer longer than ``--long-answer`` tokens (it may name the alias while answering something else).
  Consistency (``answer``): uncertain where its rules leave the pair open (the embeddings would decide);
  the fully offline ``answer`` judge is shown too.

Printed per task: pairs, share sent to the LLM (today and now), agreement of the offline decisions with
the labels on the pairs they decide, the agreement if the LLM were always right on the rest (a ceiling),
and with ``--llm-model`` (e.g. smollm2) the agreement with that LLM judge deciding the rest.

    python benchmarks/judge_savings.py [--llm-model smollm2] [--long-answer 12]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from elical.annotate.judge_check import Pair, read_pairs
from elical.annotate.judge_models import AnswerJudge
from elical.annotate.judges import Judge, JudgeQuery, MatchJudge
from elical.annotate.text import alias_tokens, tokenize

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"


def near_spelling(answer: Sequence[str], gold: Sequence[str]) -> bool:
    """A gold word of 4+ letters that an answer word extends or shortens by its last letter (Africa/African)."""
    return any(len(g) >= 4 and a != g and a[: len(g) - 1] == g[: len(g) - 1] for a in answer for g in gold)


def correctness_front(match: MatchJudge, long_answer: int) -> Callable[[JudgeQuery], bool | None]:
    """The match judge's decision where it is sure, None where the LLM should decide."""

    def decide(query: JudgeQuery) -> bool | None:
        sure = match.sure(query)
        if query.choices:
            return bool(sure)
        answer = [t.text for t in tokenize(query.answer)]
        if sure:
            return None if len(answer) > long_answer else True
        gold = [t.text for ref in query.references for t in alias_tokens(ref)]
        return None if set(answer) & set(gold) or near_spelling(answer, gold) else False

    return decide


def consistency_front(judge: AnswerJudge) -> Callable[[JudgeQuery], bool | None]:
    """The answer judge's rules where they decide, None where its embeddings would."""
    return lambda query: judge.comparisons([query])[0].decision


def measure(pairs: Sequence[Pair], front: Callable[[JudgeQuery], bool | None], offline: Judge,
            llm: Judge | None) -> dict[str, float | int | None]:
    """Counts and agreements of one task's pairs (see the module docstring)."""
    match = MatchJudge()
    decided = [front(p.query) for p in pairs]
    sent = [i for i, d in enumerate(decided) if d is None]
    kept = [i for i, d in enumerate(decided) if d is not None]
    alone = offline.judge_batch([p.query for p in pairs])
    out: dict[str, float | int | None] = {
        "pairs": len(pairs),
        "today_sent": sum(match.sure(p.query) is None for p in pairs),
        "sent": len(sent),
        "decided_agreement": sum(decided[i] == pairs[i].label for i in kept) / len(kept) if kept else None,
        "ceiling_agreement": sum(decided[i] == pairs[i].label for i in kept) / len(pairs) + len(sent) / len(pairs),
        "offline_alone_agreement": sum(a == p.label for a, p in zip(alone, pairs)) / len(pairs),
        "llm_agreement": None,
    }
    if llm is not None and sent:
        verdicts = llm.judge_batch([pairs[i].query for i in sent])
        right = sum(decided[i] == pairs[i].label for i in kept) + sum(v == pairs[i].label for i, v in zip(sent, verdicts))
        out["llm_agreement"] = right / len(pairs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llm-model", default=None, help="LLM judge model (alias, folder, .gguf); none: ceiling only")
    parser.add_argument("--long-answer", type=int, default=12, help="tokens above which a found alias is uncertain")
    args = parser.parse_args()
    llm = None
    if args.llm_model:
        from elical.annotate.config import AnnotateConfig, JudgeConfig
        from elical.annotate.judge_factory import judge_maker

        config = AnnotateConfig(device="cpu", judges=JudgeConfig(llm_model=args.llm_model, batch_size=8))
        llm = judge_maker(config)("llm")
    answer = AnswerJudge()
    tasks = {
        "correctness": (DATA / "judge_pairs_correctness.jsonl", correctness_front(MatchJudge(), args.long_answer), MatchJudge()),
        "consistency": (DATA / "judge_pairs_consistency.jsonl", consistency_front(answer), answer),
    }
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}; LLM judge: "
          f"{llm.name if llm else 'none (ceiling: the LLM always right)'}; --long-answer {args.long_answer}")
    print("| task | pairs | to LLM today | to LLM now | saved now | offline agreement on what it decides | "
          "agreement, LLM always right | agreement, this LLM | offline judge alone |")
    print("|---|---|---|---|---|---|---|---|---|")
    for task, (path, front, offline) in tasks.items():
        start = time.perf_counter()
        m = measure(read_pairs(path), front, offline, llm)
        pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"
        n = int(m["pairs"] or 0)
        print(f"| {task} | {n} | {m['today_sent']} ({pct((m['today_sent'] or 0) / n)}) | {m['sent']} | "
              f"{pct(1 - (m['sent'] or 0) / n)} | {pct(m['decided_agreement'])} | {pct(m['ceiling_agreement'])} | "
              f"{pct(m['llm_agreement'])} | {pct(m['offline_alone_agreement'])} |  ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
