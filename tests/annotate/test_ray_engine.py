"""Annotation on Ray (a local cluster, the packaged world LM, two workers): the merged records equal a
single process annotating the same shards, a worker killed mid-shard costs only a rerun of that shard,
and a rerun resumes from the files."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from elical.annotate.config import AnnotateConfig, JudgeConfig
from elical.annotate.ray_engine import RaySettings, shard_count, worker_resources
from elical.core.inputs import InputError

N_QUESTIONS = 32  # 16 per shard, 4 per batch: a worker whose first chunk is written has 3 batches to go when it is killed


def world_config(**ray: object) -> AnnotateConfig:
    from elical.world import default_lm_path

    return AnnotateConfig(model=str(default_lm_path()), device="cpu", k=2, max_new_tokens=3, batch_size=8, chunk_size=1,
                          judges=JudgeConfig(correctness="match", consistency="match", cache=False), engine="ray",
                          ray=RaySettings(**{"num_cpus": 2, "workers": 2, "shards": 2, **ray}))


@pytest.fixture(scope="module")
def questions(tmp_path_factory) -> Path:
    """A JSONL file of world questions (the world LM's own vocabulary)."""
    from elical.run.config import load_run_config
    from elical.run.subjects.by_name import world_subject

    config = load_run_config(overrides={"questions": {"max_train": N_QUESTIONS, "max_eval_per_dataset": 1}})
    items = world_subject(config).items[:N_QUESTIONS]
    path = tmp_path_factory.mktemp("qa") / "world.jsonl"
    path.write_text("".join(json.dumps({"question": it.question, "answer": it.answers}) + "\n" for it in items))
    return path


def kill_workers_mid_shard(out: Path, killed: list[int]) -> None:
    """When the first chunk file appears (its worker has more of its shard to do), SIGKILL the Ray workers."""
    import psutil

    deadline = time.time() + 240
    while time.time() < deadline and not list((out / "shards").glob("part-*.parquet")):
        time.sleep(0.02)
    for proc in psutil.Process().children(recursive=True):
        try:
            if "ShardWorker" in " ".join(proc.cmdline()):
                os.kill(proc.pid, signal.SIGKILL)
                killed.append(proc.pid)
        except psutil.Error:
            continue


@pytest.fixture(scope="module")
def killed_run(questions, tmp_path_factory) -> dict:
    """A Ray run during which a worker is SIGKILLed mid-shard, and the same shards annotated one by one
    in this process (`--shard i/n` by hand)."""
    from elical.annotate.merge import merge_shards
    from elical.annotate.run import annotate_sources

    if importlib.util.find_spec("ray") is None:
        pytest.skip("the Ray engine tests need ray: pip install 'elical[ray]'")
    config = world_config()
    reference = tmp_path_factory.mktemp("one-process")
    for shard in ("0/2", "1/2"):
        annotate_sources([questions], config.model_copy(update={"engine": "local", "shard": shard}), reference)
    out, killed = tmp_path_factory.mktemp("ray") / "out", []
    monitor = threading.Thread(target=kill_workers_mid_shard, args=(out, killed), daemon=True)
    monitor.start()
    records = annotate_sources([questions], config, out)
    monitor.join(timeout=1)
    return {"config": config, "out": out, "killed": killed, "records": records,
            "expected": {r.id: r for r in merge_shards([reference])}}


LOGPROBS = ("greedy_logprobs", "greedy_cumulative_logprob", "sample_logprobs")


def same_records(got: list, want: list) -> bool:
    """The same records: every field equal, log-probs to 1e-5 (two processes' float sums may differ in the
    last bits under load; texts, tokens and labels may not differ at all)."""
    import dataclasses

    import numpy as np

    def exact(rec):
        return dataclasses.replace(rec, **dict.fromkeys(LOGPROBS))

    def values(rec) -> np.ndarray:
        flat = [*(rec.greedy_logprobs or []), rec.greedy_cumulative_logprob or 0.0,
                *(x for sample in rec.sample_logprobs or [] for x in sample)]
        return np.array(flat, dtype=float)

    return len(got) == len(want) and all(
        exact(a) == exact(b) and values(a).shape == values(b).shape and np.allclose(values(a), values(b), atol=1e-5)
        for a, b in zip(got, want))


def test_a_killed_worker_reruns_its_shard_and_records_equal_one_process(killed_run):
    from elical.records import read_parquet

    out, records, expected = killed_run["out"], killed_run["records"], killed_run["expected"]
    assert killed_run["killed"], "no worker was killed: the test proved nothing"
    metas = [json.loads(p.read_text()) for p in sorted(out.glob("meta-*of2.json"))]
    assert any(m["annotated_now"] < m["questions"] for m in metas)  # the rerun resumed from the shard's files
    assert {m["decoding"]["path"] for m in metas} == {"fast_decode"}  # auto, decided by the driver as in one process
    assert len(records) == len(expected) == N_QUESTIONS
    assert same_records(records, [expected[r.id] for r in records])
    assert read_parquet(out / "records.parquet") == records
    assert AnnotateConfig.from_yaml(out / "annotate.yaml") == killed_run["config"]


def test_a_rerun_annotates_only_what_is_missing(killed_run, questions, tmp_path, monkeypatch):
    import shutil

    from elical.annotate import ray_engine
    from elical.annotate.run import annotate_sources

    out = tmp_path / "out"
    shutil.copytree(killed_run["out"], out)
    config = killed_run["config"].model_copy(update={"ray": RaySettings(workers=1, num_cpus=1)})  # shards: the folder's
    parts = sorted((out / "shards").glob("part-*.parquet"))
    kept = {p: p.stat().st_mtime_ns for p in parts[1:]}
    parts[0].unlink()  # as if the run had been killed before this chunk
    assert annotate_sources([questions], config, out) == killed_run["records"]
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # the other chunks were not redone

    def no_cluster(settings):
        raise AssertionError("a finished folder needs no cluster")

    monkeypatch.setattr(ray_engine, "ray_session", no_cluster)
    assert annotate_sources([questions], config, out) == killed_run["records"]


def test_workers_default_to_one_per_gpu_or_cpu():
    hf, vllm = world_config(workers=None), world_config(workers=None).model_copy(update={"backend": "vllm"})
    assert worker_resources(hf, {"CPU": 16.0}) == (16, 0)
    assert worker_resources(hf, {"CPU": 16.0, "GPU": 8.0}) == (8, 1)
    vllm.vllm.tensor_parallel_size = 2
    assert worker_resources(vllm, {"CPU": 16.0, "GPU": 8.0}) == (4, 2)
    assert worker_resources(world_config(workers=3), {"CPU": 16.0, "GPU": 8.0}) == (3, 1)


def test_shard_count_keeps_the_folders_and_refuses_another(tmp_path):
    assert shard_count(RaySettings(), tmp_path) is None  # a new folder: decided by the workers
    (tmp_path / "shards").mkdir()
    for i in range(3):
        (tmp_path / "shards" / f"expected-{i}of3.json").write_text("[]")
    assert shard_count(RaySettings(), tmp_path) == 3 == shard_count(RaySettings(shards=3), tmp_path)
    with pytest.raises(InputError, match=r"holds shards of \[3\] \(asked: 4\).*--overwrite"):
        shard_count(RaySettings(shards=4), tmp_path)


def test_a_shard_option_is_refused_with_the_ray_engine(tmp_path):
    from elical.annotate.ray_engine import annotate_on_ray

    with pytest.raises(InputError, match="the Ray engine runs every shard"):
        annotate_on_ray([], world_config().model_copy(update={"shard": "1/2"}), tmp_path)
