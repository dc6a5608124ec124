"""The same training under several processes (DDP over gloo on CPU), launched as accelerate would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import sys
from elical.train.config import TrainConfig
from elical.train.trainer import train
cfg = TrainConfig(model=sys.argv[1], output_dir=sys.argv[2], mode="elical", budget=24, batch_size=8,
                  epochs_stage1=2, epochs_stage2=2, lr=1e-2, row_length=128, val_fraction=0.25, save_steps=2)
train(cfg, [sys.argv[3]], show_progress=False)
"""


@pytest.mark.slow
def test_elical_trains_under_two_processes(tmp_path, tiny_tokenizer):
    from elical.records import write_jsonl
    from tiny import build_model, learnable_records

    build_model(tiny_tokenizer, "llama").save_pretrained(tmp_path / "m")
    tiny_tokenizer.save_pretrained(tmp_path / "m")
    write_jsonl(learnable_records(), tmp_path / "r.jsonl")
    (tmp_path / "run.py").write_text(SCRIPT)
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(tmp_path / "run.py"),
           str(tmp_path / "m"), str(tmp_path / "out"), str(tmp_path / "r.jsonl")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False, cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "train_summary.json").read_text())
    assert summary["num_processes"] == 2
    assert [s["stage"] for s in summary["stages"]] == ["stage1-eli", "stage2-cal"]
    assert (tmp_path / "out" / "model" / "adapter_model.safetensors").exists()
