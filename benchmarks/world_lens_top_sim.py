"""Head-only screen of lens summaries (issue 23, item 5): the world LM frozen, its last-prompt-token features
cached once, EliCal simulated on them in seconds. Screening only: no LoRA, so absolute numbers sit below a run's.

    python benchmarks/world_lens_top_sim.py --run RUN_DIR --name top5 --lens top5 [--skip] [--std] [--stacked]

RUN_DIR: a finished default world run (its pool, records/train.parquet). Only pool questions are used: k-fold
over the pool (a fold held out of both stages), seeds per fold. Stage 1: the paper's MLP head on [hidden, lens]
fitted to self-consistency (MSE, AdamW lr 3e-3, wd 0.1, batch 32, 3 epochs, 10 % warm-up, noise-aware selection on
a tenth of the training questions). Stage 2: the preset's stage2_refit (Platt on stage 1's logit, folded in), then
lr 1e-3 for 1500 / labels epochs in [2, 15] on the share of correct samples. Printed: the held-out folds' in-domain
AUROC (mean of datasets) of Eli-Only and EliCal per budget, their mean difference to N-Prob and the worst
(fold, seed). --lens: 2 (largest log-probability, entropy: lens), topK (the K largest log-probabilities, sorted, and
the entropy: lens_top at K = 5), pK (the K largest probabilities and the entropy). --skip: a linear path from the lens
numbers added to the MLP's logit; --std: lens numbers standardised on the pool; --stacked: the stage-2 refit is a
logistic regression on [stage-1 logit, lens] (needs --skip).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from pathlib import Path

import numpy as np
import torch
from torch import nn

MODEL = Path(__file__).resolve().parents[1] / "src/elical/world/assets/world-lm"


def features(prompts: list[str], batch: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Final-norm hidden state at the last prompt token, and the 10 largest next-token log-probabilities + entropy."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32).eval()
    hidden, lens = [], []
    for start in range(0, len(prompts), batch):
        enc = tokenizer(prompts[start:start + batch], return_tensors="pt", padding=True, padding_side="left",
                        add_special_tokens=False)
        with torch.no_grad():
            out = model(**enc, output_hidden_states=True)
        logprobs = out.logits[:, -1].float().log_softmax(-1)
        hidden.append(out.hidden_states[-1][:, -1].numpy())
        lens.append(torch.cat([logprobs.topk(10, -1).values, -(logprobs.exp() * logprobs).sum(-1, keepdim=True)], -1).numpy())
    return np.concatenate(hidden), np.concatenate(lens)


def lens_columns(table: torch.Tensor, kind: str) -> torch.Tensor:
    top, entropy = table[:, :10], table[:, 10:]
    if kind == "2":
        return torch.cat([top[:, :1], entropy], 1)
    if kind.startswith("top"):
        return torch.cat([top[:, :int(kind[3:])], entropy], 1)
    if kind.startswith("p"):
        return torch.cat([top[:, :int(kind[1:])].exp(), entropy], 1)
    raise ValueError(kind)


class Head(nn.Module):
    """The paper's MLP (zero last layer) on [hidden, lens], optionally plus a linear path from lens (zero-initialised)."""

    def __init__(self, n_hidden: int, n_lens: int, skip: bool):
        super().__init__()
        self.n_hidden = n_hidden
        n_in = n_hidden + n_lens
        layers = [nn.Linear(a, b) for a, b in itertools.pairwise([n_in, n_in // 2, n_in // 4, 1])]
        nn.init.zeros_(layers[-1].weight)
        nn.init.zeros_(layers[-1].bias)
        self.mlp = nn.Sequential(layers[0], nn.ReLU(), layers[1], nn.ReLU(), layers[2])
        self.skip = nn.Linear(n_lens, 1, bias=False) if skip else None
        if self.skip is not None:
            nn.init.zeros_(self.skip.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.mlp(x).squeeze(-1)
        return out if self.skip is None else out + self.skip(x[:, self.n_hidden:]).squeeze(-1)


def train_stage(head: Head, x: torch.Tensor, targets: torch.Tensor, train: np.ndarray, val: np.ndarray, lr: float,
                epochs: int, seed: int) -> None:
    """The trainer's stage on cached features (AdamW, warm-up/decay, grad clip 1, noise-aware selection)."""
    from transformers import get_linear_schedule_with_warmup

    from elical.train.selection import Selector

    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.1)
    total = math.ceil(len(train) / 32) * epochs
    warmup = math.ceil(0.1 * total)
    scheduler = get_linear_schedule_with_warmup(optimizer, warmup, total)
    selector = Selector("noise-aware", warmup, 3, 2.0)
    val_targets = targets[val].numpy()
    best_mse, best_state, best_conf, last_conf, bad, step = math.inf, None, None, None, 0, 0
    for epoch in range(epochs):
        order = np.random.RandomState(seed * 1000 + epoch).permutation(train)
        for start in range(0, len(order), 32):
            batch = order[start:start + 32]
            loss = ((torch.sigmoid(head(x[batch])) - targets[batch]) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(head.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            step += 1
        with torch.no_grad():
            last_conf = torch.sigmoid(head(x[val])).numpy()
        mse = float(((last_conf - val_targets) ** 2).mean())
        improved = selector.eligible(step) and mse < best_mse
        if improved:
            best_mse, best_conf, best_state = mse, last_conf, {k: v.clone() for k, v in head.state_dict().items()}
        if selector.eligible(step):
            bad = selector.bad_epochs(bad, improved, best_conf, last_conf, val_targets)
        if bad >= 3:
            break
    if best_state is not None and selector.final(0, 1, best_conf, last_conf, val_targets)[0] == 0:
        head.load_state_dict(best_state)


def refit(head: Head, x: torch.Tensor, targets: torch.Tensor, train: np.ndarray, stacked: bool) -> None:
    """stage2_refit: a * logit + b fitted to the labels (stacked: + c . lens, into the skip path), folded in."""
    from sklearn.linear_model import LogisticRegression

    from elical.train.platt import fit_platt

    with torch.no_grad():
        logits = head(x[train]).numpy()
    y = targets[train].numpy()
    last = head.mlp[-1]
    if stacked:
        both = np.column_stack([logits, x[train][:, head.n_hidden:].numpy()])
        fit = LogisticRegression(C=1e6, max_iter=2000).fit(np.concatenate([both, both]), np.r_[np.ones(len(y)), np.zeros(len(y))],
                                                            sample_weight=np.r_[y, 1 - y])
        a, c, b = max(float(fit.coef_[0, 0]), 0.0), torch.tensor(fit.coef_[0, 1:], dtype=torch.float32), float(fit.intercept_[0])
    else:
        (a, b), c = fit_platt(logits, y), None
        if a <= 0:
            return
    with torch.no_grad():
        last.weight.mul_(a)
        last.bias.mul_(a).add_(b)
        if head.skip is not None:
            head.skip.weight.mul_(a)
            if c is not None:
                head.skip.weight.add_(c[None])


def main() -> None:
    from elical.records import read_parquet
    from elical.train.budgets import budget_subset, split_validation

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--lens", default="2")
    parser.add_argument("--skip", action="store_true")
    parser.add_argument("--std", action="store_true")
    parser.add_argument("--stacked", action="store_true")
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budgets", type=int, nargs="+", default=[50, 150, 500])
    args = parser.parse_args()
    torch.set_num_threads(1)
    from world_lens_top_screen import dataset_mean_auroc

    pool = read_parquet(args.run / "records" / "train.parquet")
    hidden, table = features([r.prompt for r in pool])
    lens = lens_columns(torch.tensor(table), args.lens)
    if args.std:
        lens = (lens - lens.mean(0)) / lens.std(0)
    x = torch.cat([torch.tensor(hidden), lens], 1)
    consistency = torch.tensor([np.mean(r.sample_consistent) for r in pool], dtype=torch.float32)
    correct_share = torch.tensor([np.mean(r.sample_correct) for r in pool], dtype=torch.float32)
    y = np.array([float(r.greedy_correct) for r in pool])
    datasets = np.array([r.dataset for r in pool])
    n_prob = np.array([np.exp(np.mean(r.greedy_logprobs)) for r in pool])
    folds = np.random.RandomState(99).permutation(len(pool)) % args.folds
    rows = []
    for fold, seed in itertools.product(range(args.folds), args.seeds):
        kept, held = np.where(folds != fold)[0], np.where(folds == fold)[0]
        sub = [pool[i] for i in kept]
        head = Head(hidden.shape[1], lens.shape[1], args.skip)
        train, val = split_validation(list(range(len(kept))), sub, 0.1, seed)
        train_stage(head, x, consistency, kept[train], kept[val], 3e-3, 3, seed)

        def held_auroc(head: Head = head, held: np.ndarray = held) -> float:
            with torch.no_grad():
                return dataset_mean_auroc(head(x[held]).numpy(), y[held], datasets[held])

        row = {"fold": fold, "seed": seed, "nprob": dataset_mean_auroc(n_prob[held], y[held], datasets[held]),
               "eli": held_auroc()}
        stage1 = {k: v.clone() for k, v in head.state_dict().items()}
        for budget in args.budgets:
            head.load_state_dict(stage1)
            train2, val2 = split_validation(budget_subset(sub, budget, seed), sub, 0.1, seed)
            refit(head, x, correct_share, kept[train2], args.stacked)
            train_stage(head, x, correct_share, kept[train2], kept[val2], 1e-3, int(min(15, max(2, round(1500 / budget)))), seed)
            row[f"elical{budget}"] = held_auroc()
        rows.append(row)
    keys = ["eli", *(f"elical{b}" for b in args.budgets)]
    print(json.dumps({"name": args.name, **{k: round(float(np.mean([r[k] for r in rows])), 4) for k in ["nprob", *keys]},
                      "minus_nprob": {k: round(float(np.mean([r[k] - r["nprob"] for r in rows])), 4) for k in keys},
                      "worst": {k: round(min(r[k] - r["nprob"] for r in rows), 4) for k in keys}}))


if __name__ == "__main__":
    main()
