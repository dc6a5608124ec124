"""FSDP check for `elical train`: the same two-stage training sharded over the GPUs of one machine.

Usage (on a machine with >= 2 GPUs):
    python benchmarks/fsdp_check.py prepare DIR          # a small Llama + records into DIR
    accelerate launch --config_file src/elical/train/accelerate/fsdp.yaml --num_processes 2 \\
        -m elical.cli train DIR/records.jsonl --model DIR/model -o DIR/out --budget 40 --set epochs_stage1=3
    python benchmarks/fsdp_check.py check DIR            # predict with the saved model, print AUROC

The model is a 4-layer Llama of hidden 512 with random weights, trained on a learnable target
(questions about capitals are answered consistently and correctly, those about foxes are not), so
the check shows the sharded run learns, saves a standard adapter, and reloads on one device.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def prepare(folder: Path) -> None:
    from test_train import learnable_records

    from elical.records import write_jsonl
    from tiny import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    model = build_model(tokenizer, "llama", hidden=512, layers=4)
    model.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    write_jsonl(learnable_records(n=160), folder / "records.jsonl")


def check(folder: Path) -> None:
    import torch

    from elical import metrics
    from elical.model.network import ConfidenceModel
    from elical.records import read_records
    from elical.train.predict import predict_records

    records = read_records(folder / "records.jsonl")
    model = ConfidenceModel.load(folder / "out" / "model", device="cuda" if torch.cuda.is_available() else "cpu")
    confidence = predict_records(model, records, show_progress=False)
    auroc = metrics.auroc(confidence, [r.greedy_correct for r in records])
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    print(f"machine: {platform.node()} {gpus}, torch {torch.__version__}")
    print(f"reloaded FSDP-trained model: {len(records)} questions, AUROC {auroc:.3f}, "
          f"confidence range [{min(confidence):.3f}, {max(confidence):.3f}]")


if __name__ == "__main__":
    {"prepare": prepare, "check": check}[sys.argv[1]](Path(sys.argv[2]))
