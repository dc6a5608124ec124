"""The questions a run asks, per subject: the synthetic world (default) or real geography facts."""

from __future__ import annotations

import json
from pathlib import Path

from elical.run.config import RunConfig
from elical.run.subjects.subject import Subject, subsample  # importable here too


def world_subject(cfg: RunConfig) -> Subject:
    """The synthetic world's questions, answered by the world LM (packaged unless ``cfg.model``)."""
    from elical.world import default_lm_path
    from elical.world.config import WorldConfig, from_dict
    from elical.world.generate import generate_world
    from elical.world.lm import META_FILE
    from elical.world.questions import evaluation_questions

    lm_path = Path(cfg.model) if cfg.model else default_lm_path()
    meta_file = lm_path / META_FILE
    if not meta_file.exists():
        raise FileNotFoundError(f"{meta_file}: no world LM there; train one with `elical world train-lm --out {lm_path}`")
    meta = json.loads(meta_file.read_text())
    world_data = {**meta["world"], **cfg.world_overrides()}
    world = generate_world(from_dict(WorldConfig, world_data, "run config: world"))
    if not cfg.world_overrides() and world.fingerprint() != meta["world_fingerprint"]:
        raise ValueError(
            f"{lm_path} was trained on world {meta['world_fingerprint']}, but its config now generates "
            f"{world.fingerprint()} (world code changed?); retrain with `elical world train-lm`"
        )
    examples = evaluation_questions(world)
    items = [ex.to_item() for ex in examples]
    groups = {ex.dataset: ex.info["group"] for ex in examples}
    q = cfg.questions
    items = subsample(items, q.max_train, q.max_eval_per_dataset, q.seed)
    lm = meta["lm"]
    prompts = {"system": lm.get("system_prompt") or "", "qa": lm["qa_template"], "mmlu": lm["mc_template"]}
    info = {"world_fingerprint": world.fingerprint(), "lm_path": str(lm_path), "lm_params": meta.get("params"),
            "lm_train_seconds": meta.get("train_seconds"), "lm_device": meta.get("device")}
    return Subject(model=str(lm_path), items=items, groups=groups, prompts=prompts, info=info)


def build_subject(cfg: RunConfig) -> Subject:
    """The subject the config names."""
    if cfg.subject == "world":
        return world_subject(cfg)
    if cfg.subject == "qa":
        from elical.run.subjects.qa import qa_subject

        return qa_subject(cfg)
    from elical.run.subjects.geo import geo_subject

    return geo_subject(cfg)
