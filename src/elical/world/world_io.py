"""Write a generated world to a folder, for reading and for use outside elical."""

from __future__ import annotations

import json
from pathlib import Path

from elical.core.io import atomic_write
from elical.world.corpus import corpus_sentences
from elical.world.generate import World
from elical.world.questions import evaluation_questions, qa_tuning_examples


def write_world(world: World, out_dir: str | Path) -> dict[str, Path]:
    """world.json (facts and exposure), corpus.txt, qa_tuning.jsonl and questions.jsonl."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("world.json", "corpus.txt", "qa_tuning.jsonl", "questions.jsonl")}
    with atomic_write(paths["world.json"]) as tmp:
        tmp.write_text(json.dumps({"fingerprint": world.fingerprint(), **world.to_dict()}, indent=1))
    with atomic_write(paths["corpus.txt"]) as tmp:
        tmp.write_text("\n".join(corpus_sentences(world)) + "\n")
    for name, examples in (("qa_tuning.jsonl", qa_tuning_examples(world)), ("questions.jsonl", evaluation_questions(world))):
        with atomic_write(paths[name]) as tmp, open(tmp, "w", encoding="utf-8") as handle:
            for ex in examples:
                row = {"question": ex.question, "answer": ex.answers, "choices": ex.choices,
                       "dataset": ex.dataset or None, "split": ex.split, **ex.info}
                handle.write(json.dumps(row) + "\n")
    return paths
