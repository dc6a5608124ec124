"""Annotation on Ray (``elical annotate --engine ray``): the deterministic shards as work for Ray actors.

The driver (the command's process) holds the folder's lock, skips the shards whose questions are all
on disk, and hands the others to ``workers`` actors. Each actor loads the model once (on a GPU of its
own when the cluster has GPUs) and annotates whole shards with the local pipeline, which writes the
usual atomic shard files and resumes from them. A worker that dies (process killed, node lost) loses
its current chunk only: Ray restarts it and reruns its shard, which resumes from the shard's files, so
nothing is written twice. At the end the shards are merged with the merge check (nothing missing or
doubled) into records.parquet. On a cluster of several machines, the output folder must be on storage
every node mounts, and elical installed on every node.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elical.annotate.config import RaySettings
from elical.core.inputs import InputError

if TYPE_CHECKING:
    from elical.annotate.config import AnnotateConfig
    from elical.data.items import QAItem
    from elical.records import Record

SHARDS_PER_WORKER = 4  # default shards per worker: a slow or restarted worker holds up a quarter of its share


class ShardWorker:
    """A Ray actor's state: the backend (the model) built once from the config, used for every shard."""

    def __init__(self, config: AnnotateConfig) -> None:
        from elical.annotate.backends.build import build_backend

        self.config = config
        self.backend = build_backend(config)

    def run(self, shard: str, items: Sequence[QAItem], out: str) -> int:
        """Annotate shard ``i/n`` into ``out`` (resuming from its files); returns its question count."""
        from elical.annotate.pipeline import annotate_shard

        config = self.config.model_copy(update={"shard": shard})
        return len(annotate_shard(items, self.backend, None, config, Path(out), progress=False, on_chunk=None))


def annotate_on_ray(items: Sequence[QAItem], config: AnnotateConfig, out: str | Path, progress: bool = True) -> list[Record]:
    """Annotate every shard of ``items`` on Ray workers and return the merged records in item order.
    The caller holds the folder's lock and has checked its settings (elical.annotate.run)."""
    if config.shard != "0/1":
        raise InputError(f"shard: {config.shard} with engine ray: the Ray engine runs every shard (leave shard out)")
    folder = Path(out)
    count = shard_count(config.ray, folder)
    if count is None or _unfinished(_plan(items, count, folder), folder):  # a finished folder needs no cluster
        with ray_session(config.ray) as ray:
            workers, gpus = worker_resources(config, ray.cluster_resources())
            shards = _plan(items, count or SHARDS_PER_WORKER * workers, folder)
            _run_shards(ray, shards, _unfinished(shards, folder), config, folder, (workers, gpus), progress)
    config.to_yaml(folder / "annotate.yaml")  # the workers wrote their shard's settings there
    return _merge(items, folder)


def shard_count(settings: RaySettings, out: Path) -> int | None:
    """The number of shards: the setting, else the count of the folder's shards (None for a new
    folder: SHARDS_PER_WORKER per worker); a count that disagrees with the folder's is an InputError
    (the shards would not merge)."""
    on_disk = {int(p.stem.rsplit("of", 1)[1]) for p in (out / "shards").glob("expected-*of*.json")}
    if len(on_disk) > 1 or (settings.shards is not None and on_disk and on_disk != {settings.shards}):
        raise InputError(f"ray.shards: {out} holds shards of {sorted(on_disk)} (asked: {settings.shards or 'any one'}): "
                         "leave shards unset to resume, or --overwrite to start over")
    return settings.shards or (on_disk.pop() if on_disk else None)


@contextmanager
def ray_session(settings: RaySettings) -> Iterator[Any]:
    """The ``ray`` module connected to a cluster: the one this process already joined, the one at
    ``settings.address``, or a local one started (and stopped at the end) here."""
    try:
        import ray
    except ImportError:
        raise ImportError("the Ray engine needs the extra: pip install 'elical[ray]'") from None
    if ray.is_initialized():
        yield ray
        return
    if settings.address:
        ray.init(address=settings.address, log_to_driver=False)
    else:
        ray.init(num_cpus=settings.num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def worker_resources(config: AnnotateConfig, cluster: dict[str, float]) -> tuple[int, int]:
    """(workers, GPUs per worker): one model per GPU (a vLLM engine takes tensor x data parallel GPUs)
    when the cluster has GPUs and the backend runs a model, else one worker per CPU."""
    per_worker = 0
    if config.backend != "openai" and cluster.get("GPU", 0) >= 1:
        per_worker = config.vllm.gpus() if config.backend == "vllm" else 1
    default = int(cluster.get("GPU", 0)) // per_worker if per_worker else int(cluster.get("CPU", 1))
    return max(1, config.ray.workers or default), per_worker


def _run_shards(ray: Any, shards: dict[str, list[QAItem]], todo: Sequence[str], config: AnnotateConfig, out: Path,
                resources: tuple[int, int], progress: bool) -> None:
    """Run the ``todo`` shards on a pool of actors (``resources``: workers, GPUs each), the next shard to
    the first idle worker. Ray restarts a worker that died and reruns its shard on it, up to
    ``ray.max_retries`` times; the shard resumes from its files."""
    from elical.annotate.progress import annotate_progress

    count, gpus = resources
    retries = config.ray.max_retries
    actor = ray.remote(ShardWorker).options(num_cpus=1, num_gpus=gpus, max_restarts=-1, max_task_retries=retries)
    workers = [actor.remote(config.model_copy(update={"engine": "local"})) for _ in range(min(count, len(todo)))]
    queue, idle = deque(todo), list(workers)
    running: dict[Any, tuple[str, Any]] = {}  # task -> (shard, worker)
    done = sum(len(mine) for shard, mine in shards.items() if shard not in todo)
    try:
        with annotate_progress(sum(map(len, shards.values())), done, enabled=progress) as advance:
            while queue or running:
                while queue and idle:
                    shard, worker = queue.popleft(), idle.pop()
                    running[worker.run.remote(shard, shards[shard], str(out))] = (shard, worker)
                ready, _ = ray.wait(list(running), num_returns=1)
                shard, worker = running.pop(ready[0])
                idle.append(worker)
                try:
                    advance(ray.get(ready[0]))
                except ray.exceptions.RayActorError as err:
                    raise RuntimeError(f"shard {shard}: its worker failed or died {1 + retries} times, giving up "
                                       f"(rerun the command to resume): {err}") from None
    finally:
        for worker in workers:
            ray.kill(worker)


def _plan(items: Sequence[QAItem], count: int, out: Path) -> dict[str, list[QAItem]]:
    """The questions of each shard ``i/count``; writes the ids each must hold (what the merge checks;
    a shard with no questions has its file too)."""
    from elical.annotate.folder import write_expected
    from elical.data.items import select_shard

    shards = {}
    for index in range(count):
        shards[f"{index}/{count}"] = mine = select_shard(items, (index, count))
        write_expected(out, index, count, [item.id for item in mine])
    return shards


def _unfinished(shards: dict[str, list[QAItem]], out: Path) -> list[str]:
    """The shards whose files do not yet hold every one of their questions."""
    from elical.annotate.folder import shard_files
    from elical.records import read_parquet

    todo = []
    for shard, items in shards.items():
        have = {rec.id for path in shard_files(out, shard) for rec in read_parquet(path)}
        if any(item.id not in have for item in items):
            todo.append(shard)
    return todo


def _merge(items: Sequence[QAItem], out: Path) -> list[Record]:
    """Merge the folder's shards (failing on a missing or doubled question) into records.parquet."""
    from elical.annotate.merge import merge_shards
    from elical.records import write_parquet

    by_id = {rec.id: rec for rec in merge_shards([out])}
    records = [by_id[item.id] for item in items]
    write_parquet(records, out / "records.parquet")
    return records
