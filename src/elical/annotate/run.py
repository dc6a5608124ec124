"""Entry points that build everything from an AnnotateConfig: backend, items, judges, run, summary."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elical.annotate.backends.base import Backend
from elical.annotate.config import AnnotateConfig
from elical.records import Record


def build_backend(config: AnnotateConfig) -> Backend:
    """The generation backend the config names (HF loads the model; openai needs base_url)."""
    if config.backend == "hf":
        from elical.annotate.backends.hf import HFBackend

        return HFBackend.from_pretrained(
            config.model, dtype=config.dtype, device=config.device, batch_size=config.batch_size, shared_prefix=config.shared_prefix
        )
    if config.backend == "openai":
        from elical.annotate.backends.openai import OpenAIBackend

        if not config.base_url:
            raise ValueError("the openai backend needs base_url (e.g. http://127.0.0.1:8000/v1)")
        return OpenAIBackend(config.base_url, config.model)
    from elical.annotate.backends.vllm import VLLMBackend

    return VLLMBackend.from_pretrained(config.model, dtype=config.dtype)


def annotate_sources(
    sources: Sequence[str | Path], config: AnnotateConfig, out_dir: str | Path, limit_per_source: int | None = None
) -> list[Record]:
    """Load the QA sources, build the backend and judges, and run (or resume) the annotation."""
    from elical.annotate.pipeline import annotate
    from elical.data import load_many

    items = load_many(sources, limit_per_source=limit_per_source)
    backend = build_backend(config)
    return annotate(items, backend, None, config, out_dir)


def summarize(records: Sequence[Record]) -> list[dict[str, Any]]:
    """Per dataset: questions, failures, greedy accuracy, mean consistency, and the AUROC of
    Consis-Sem (mean consistency) and N-Prob (exp mean token log-prob) against greedy correctness."""
    import math

    from sklearn.metrics import roc_auc_score

    rows = []
    by_dataset: dict[str, list[Record]] = {}
    for rec in records:
        by_dataset.setdefault(rec.dataset, []).append(rec)
    for name, recs in [*sorted(by_dataset.items()), ("ALL", list(records))]:
        ok = [r for r in recs if not r.failed and r.greedy_correct is not None]
        labels = [r.greedy_correct for r in ok]
        consis = [sum(r.sample_consistent or []) / max(1, r.k) for r in ok]
        nprob = [math.exp(sum(r.greedy_logprobs) / len(r.greedy_logprobs)) if r.greedy_logprobs else 0.0 for r in ok]

        def auc(scores: list[float], labels: list[int] = labels) -> float | None:
            return float(roc_auc_score(labels, scores)) if 0 < sum(labels) < len(labels) else None

        rows.append(
            {
                "dataset": name,
                "questions": len(recs),
                "failed": len(recs) - len(ok),
                "accuracy": sum(labels) / len(ok) if ok else None,
                "consistency": sum(consis) / len(ok) if ok else None,
                "auroc_consis_sem": auc(consis) if ok else None,
                "auroc_nprob": auc(nprob) if ok else None,
            }
        )
    return rows
