"""Entry points that build everything from an AnnotateConfig: backend, items, judges, run, summary."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elical.annotate.backends.build import api_key, build_backend
from elical.annotate.config import AnnotateConfig
from elical.records import Record


def annotate_sources(
    sources: Sequence[str | Path], config: AnnotateConfig, out_dir: str | Path, *, limit: int | None = None,
    overwrite: bool = False,
) -> list[Record]:
    """Load the QA sources (``limit``: the first n questions of each dataset), build the backend and judges,
    and run (or resume) the annotation, here or on Ray workers (``config.engine``); ``overwrite`` discards
    the folder's earlier annotation (which a change of settings otherwise refuses)."""
    from elical.annotate.decoding import resolve_decoding, settled_decoding, worker_decoding
    from elical.annotate.folder import step_outputs
    from elical.annotate.pipeline import annotate, annotation_fingerprint
    from elical.core.fingerprint import check_or_write_settings
    from elical.core.folder_lock import folder_lock
    from elical.data import load_many
    from elical.model.loading import model_version, resolve_model

    out = Path(out_dir)
    if config.backend == "hf":
        resolve_model(config.model)  # an unknown model stops here, before the output folder is touched
    if config.backend == "openai":
        api_key(config)
    versions = {"model": model_version(config.model)} if config.backend != "openai" else {}
    items = load_many(sources, limit=limit)  # bad input stops here, before any lock or file
    with folder_lock(out):  # a second process or other settings stop here, before the model loads
        # the decoding path (decoding.resolve_decoding): forced, or a resumed folder's, is known now; auto on a
        # fresh folder needs the model, and a fresh folder's settings check cannot fail, so it waits for the model
        decoding = settled_decoding(config, None if overwrite else out)
        if decoding is None and config.engine == "ray":  # its workers load the model after the settings are recorded
            decoding = worker_decoding(config)
        if decoding is not None:
            check_or_write_settings(out, annotation_fingerprint(config, versions, decoding.fast), overwrite, "annotate",
                                    step_outputs(out))
        if config.engine == "ray":
            from elical.annotate.ray_engine import annotate_on_ray

            return annotate_on_ray(items, config, out)  # its workers follow the folder's path
        backend = build_backend(config)
        if decoding is None:
            decoding = resolve_decoding(config, backend, None)
            check_or_write_settings(out, annotation_fingerprint(config, versions, decoding.fast), overwrite, "annotate",
                                    step_outputs(out))
        return annotate(items, backend, None, config, out, versions=versions)


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
        labels = [r.greedy_correct for r in ok if r.greedy_correct is not None]  # all of ok
        sampled = [r for r in ok if r.sample_consistent]  # none when k = 0: consistency is n/a, not 0
        consis = [sum(r.sample_consistent or []) / max(1, r.k) for r in sampled]
        sampled_labels = [r.greedy_correct for r in sampled if r.greedy_correct is not None]  # all of sampled
        nprob = [math.exp(sum(r.greedy_logprobs) / len(r.greedy_logprobs)) if r.greedy_logprobs else 0.0 for r in ok]

        def auc(scores: list[float], labels: list[int] = labels) -> float | None:
            return float(roc_auc_score(labels, scores)) if 0 < sum(labels) < len(labels) else None

        rows.append(
            {
                "dataset": name,
                "questions": len(recs),
                "failed": len(recs) - len(ok),
                "accuracy": sum(labels) / len(ok) if ok else None,
                "consistency": sum(consis) / len(sampled) if sampled else None,
                "auroc_consis_sem": auc(consis, sampled_labels) if sampled else None,
                "auroc_nprob": auc(nprob) if ok else None,
            }
        )
    return rows
