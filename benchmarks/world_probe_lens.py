"""What the world LM's last prompt token holds, read by frozen probes (issue 23, item 5).

    python benchmarks/world_probe_lens.py --run runs/world-default

On a finished world run's records (its pool and its in-domain evaluated questions), with the packaged
world LM frozen: in-domain AUROC for greedy correctness of
  - the LM's next-token distribution at the last prompt token (its largest probability, its entropy),
    next to self-consistency and N-Prob from the records;
  - a logistic-regression probe on the hidden state at that token, per layer (fitted on the pool's
    correctness labels), and an MLP on the last layer;
  - a logistic regression on the two next-token numbers alone ("lens") and on hidden state + lens, fitted
    on the first n pool questions of a seeded shuffle.
A probe that cannot reach the next-token distribution's AUROC with every label is limited by how it reads
the hidden state, not by what the state holds; that is what `train.settings.lens` gives the head.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import numpy as np


def last_token_features(model, tokenizer, prompts: list[str], batch: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Hidden states of every layer at the last prompt token (questions x layers+1 x hidden), and the
    next-token summary there (questions x 2: log of the largest probability, entropy)."""
    import torch

    layers, lens = [], []
    for start in range(0, len(prompts), batch):
        enc = tokenizer(prompts[start:start + batch], return_tensors="pt", padding=True, padding_side="left",
                        add_special_tokens=False)
        with torch.no_grad():
            out = model(**enc, output_hidden_states=True)
        layers.append(torch.stack([h[:, -1] for h in out.hidden_states], 1).numpy())
        logprobs = out.logits[:, -1].log_softmax(-1)
        lens.append(torch.stack([logprobs.max(-1).values, -(logprobs.exp() * logprobs).sum(-1)], -1).numpy())
    return np.concatenate(layers), np.concatenate(lens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--model", default=str(Path(__file__).resolve().parents[1] / "src/elical/world/assets/world-lm"))
    args = parser.parse_args()
    import torch
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from elical.records import read_parquet

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    pool = read_parquet(args.run / "records" / "train.parquet")
    evaluated = [r for r in read_parquet(args.run / "records" / "eval.parquet") if r.extra.get("group") == "in-domain"]
    hp, lp = last_token_features(model, tokenizer, [r.prompt for r in pool])
    he, le = last_token_features(model, tokenizer, [r.prompt for r in evaluated])
    y_pool = np.array([float(r.greedy_correct) for r in pool])
    y = np.array([float(r.greedy_correct) for r in evaluated])
    consistency = np.array([np.mean(r.sample_consistent) for r in evaluated])
    n_prob = np.array([np.exp(np.mean(r.greedy_logprobs)) for r in evaluated])
    print(f"machine: {platform.machine()}, {platform.platform()}; run {args.run}; torch {torch.__version__}")
    print(f"pool {len(pool)} questions (accuracy {y_pool.mean():.3f}); in-domain evaluated {len(y)} (accuracy {y.mean():.3f})")
    print("\n| confidence (in-domain AUROC) | value |\n|---|---|")
    rows = [("next token: largest probability (pre-generation)", le[:, 0]), ("next token: minus entropy", -le[:, 1]),
            ("self-consistency (k samples, records)", consistency), ("N-Prob (greedy answer, records)", n_prob)]
    for name, score in rows:
        print(f"| {name} | {roc_auc_score(y, score):.3f} |")
    print("\n| probe on the frozen hidden state (fitted on all pool labels) | in-domain AUROC | on its pool |\n|---|---|---|")
    for layer in range(1, hp.shape[1]):
        scale = StandardScaler().fit(hp[:, layer])
        probe = LogisticRegression(C=1.0, max_iter=3000).fit(scale.transform(hp[:, layer]), y_pool)
        print(f"| logistic, layer {layer} of {hp.shape[1] - 1} | {roc_auc_score(y, probe.decision_function(scale.transform(he[:, layer]))):.3f} | "
              f"{roc_auc_score(y_pool, probe.decision_function(scale.transform(hp[:, layer]))):.3f} |")
    scale = StandardScaler().fit(hp[:, -1])
    mlp = MLPClassifier(hidden_layer_sizes=(256,), alpha=1e-2, max_iter=500, random_state=0, early_stopping=True)
    mlp.fit(scale.transform(hp[:, -1]), y_pool)
    print(f"| MLP (256), last layer | {roc_auc_score(y, mlp.predict_proba(scale.transform(he[:, -1]))[:, 1]):.3f} | "
          f"{roc_auc_score(y_pool, mlp.predict_proba(scale.transform(hp[:, -1]))[:, 1]):.3f} |")
    print("\n| labels (first n of a seeded shuffle of the pool) | lens only | hidden state + lens |\n|---|---|---|")
    order = np.random.RandomState(0).permutation(len(y_pool))
    both_pool, both_eval = np.column_stack([hp[:, -1], lp]), np.column_stack([he[:, -1], le])
    scale = StandardScaler().fit(both_pool)
    for n in (50, 150, 500, len(y_pool)):
        idx = order[:n]
        lens_only = LogisticRegression(max_iter=3000).fit(lp[idx], y_pool[idx])
        both = LogisticRegression(C=0.1, max_iter=3000).fit(scale.transform(both_pool)[idx], y_pool[idx])
        print(f"| {n} | {roc_auc_score(y, lens_only.decision_function(le)):.3f} | "
              f"{roc_auc_score(y, both.decision_function(scale.transform(both_eval))):.3f} |")


if __name__ == "__main__":
    main()
