"""The annotation run: items -> greedy + k samples -> judgements -> Records, in resumable shards.

Output folder layout::

    out_dir/annotate.yaml                    the AnnotateConfig of the run
    out_dir/settings/annotate.json           the settings that decide the records (elical.core.fingerprint)
    out_dir/meta-IofN.json                   versions, backend, judges, judge-call counters of shard I of N
    out_dir/shards/part-IofN-00000.parquet   records, one file per chunk (written by atomic rename)
    out_dir/shards/expected-IofN.json        ids shard I of N must hold (merge checks against it)
    out_dir/records.parquet                  all records (written when the run covers every shard)

Rerunning the same command skips the questions already in shard files, so a killed run loses at most
its current chunk (``chunk_size`` questions, or fewer once it has run ``chunk_seconds``); a rerun whose
output settings differ is refused (``overwrite`` starts over), and a second process on the folder fails
at once (elical.core.folder_lock). A question whose generation keeps failing is recorded with ``failure`` set.

With ``pipeline`` on (by default where generation runs off the CPU), the last batch is judged in a thread
while the next one is generated (elical.annotate.stages); the batches, so the records, are the serial
path's. The meta file records each stage's seconds (``timings``).

The HF backend's decoding path (``fast_decode``: auto, true, false) is resolved and recorded by
elical.annotate.decoding.
"""

from __future__ import annotations

import json
import platform
import threading
import time
from collections import ChainMap
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elical.annotate.backends.base import (
    Backend,
    Generation,
    GenerationSettings,
    Prompt,
    UnusableAnswer,
    group,
)
from elical.annotate.config import AnnotateConfig
from elical.annotate.decoding import (
    Decoding,
    check_fast_decode,
    check_same_path,
    decoding_path,
    earlier_check,
    resolve_decoding,
)
from elical.annotate.folder import shard_files, step_outputs, write_expected, write_part
from elical.annotate.judges import Judge, JudgeQuery, Judges  # Judges: importable here too
from elical.annotate.progress import annotate_progress
from elical.annotate.prompts import qa_prompt, verbal_prompt
from elical.annotate.stages import Behind, InTurn, StageClock, batch_plan
from elical.annotate.verbal import load_verbal_examples
from elical.core.fingerprint import check_or_write_settings, path_version
from elical.core.folder_lock import folder_lock
from elical.core.inputs import InputError
from elical.data.items import QAItem, parse_shard, select_shard
from elical.records import Record, atomic_write, read_parquet, write_parquet


def _versions() -> dict[str, str]:
    import torch
    import transformers

    from elical import __version__

    return {"elical": __version__, "torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}


# ---------------------------------------------------------------------------- generation with retries


@dataclass(frozen=True)
class Failure:
    """Why a prompt has no generations (its batch and every retry raised)."""

    reason: str


Outcome = list[Generation] | Failure  # a prompt's generations, or why it failed


def generate_safely(
    backend: Backend, prompts: Sequence[Prompt], settings: GenerationSettings, retries: int
) -> list[Outcome]:
    """Per prompt, its n generations or the reason it failed: the batch is tried once, then each
    prompt of a failed batch alone, up to ``retries`` more times."""
    try:
        return list(group(backend.generate(prompts, settings), settings.n))
    except UnusableAnswer:
        raise
    except Exception as err:  # noqa: BLE001 - any other backend error is retried per question, then recorded
        return _each_alone(backend, prompts, settings, retries, f"{type(err).__name__}: {err}")


def _each_alone(backend: Backend, prompts: Sequence[Prompt], settings: GenerationSettings, retries: int,
                batch_error: str) -> list[Outcome]:
    """After a failed batch: each prompt alone, up to ``retries`` more times, else its failure."""
    out: list[Outcome] = []
    for prompt in prompts:
        reason = batch_error
        for _ in range(max(1, retries)):
            try:
                out.append(group(backend.generate([prompt], settings), settings.n)[0])
                break
            except UnusableAnswer:
                raise
            except Exception as err:  # noqa: BLE001
                reason = f"{type(err).__name__}: {err}"
        else:
            out.append(Failure(f"generation failed after {1 + max(1, retries)} tries: {reason}"[:500]))
    return out


def start_safely(backend: Backend, prompts: Sequence[Prompt], settings: GenerationSettings,
                 retries: int) -> Callable[[], list[Outcome]]:
    """:func:`generate_safely` in two parts where the backend splits its work (``Backend.start_generate``): the
    model's now, the host's when the returned function is called; a batch that fails is retried now, prompt by
    prompt. A backend that does not split answers everything now (the base ``start_generate``)."""
    try:
        finish = backend.start_generate(prompts, settings)
    except UnusableAnswer:
        raise
    except Exception as err:  # noqa: BLE001 - retried as generate_safely retries it
        outcomes = _each_alone(backend, prompts, settings, retries, f"{type(err).__name__}: {err}")
        return lambda: outcomes
    return lambda: list(group(finish(), settings.n))


# ---------------------------------------------------------------------------- one batch of questions


def annotate_batch(
    items: Sequence[QAItem],
    backend: Backend,
    judges: Judges,
    config: AnnotateConfig,
    verbal_examples: Sequence[tuple[QAItem, float]] = (),
    meta: dict[str, Any] | None = None,
) -> list[Record]:
    """Annotate a few questions: greedy answer, k samples, correctness and consistency judgements."""
    records = answer_batch(items, backend, config, verbal_examples, meta)
    judge_records([r for r in records if not r.failed], judges)
    return records


def answer_batch(
    items: Sequence[QAItem],
    backend: Backend,
    config: AnnotateConfig,
    verbal_examples: Sequence[tuple[QAItem, float]] = (),
    meta: dict[str, Any] | None = None,
) -> list[Record]:
    """The records of a few questions with their answers (greedy, k samples, verbal replies) or failure,
    not yet judged: the generation stage of :func:`annotate_batch`."""
    return start_answers(items, backend, config, verbal_examples, meta).records


class LateRecords:
    """A batch's records, made by the first thread that asks for them (:func:`start_answers`)."""

    def __init__(self, make: Callable[[], list[Record]]) -> None:
        self._make: Callable[[], list[Record]] | None = make
        self._records: list[Record] = []
        self._lock = threading.Lock()

    @property
    def records(self) -> list[Record]:
        with self._lock:
            if self._make is not None:
                self._records, self._make = self._make(), None
            return self._records


def start_answers(
    items: Sequence[QAItem],
    backend: Backend,
    config: AnnotateConfig,
    verbal_examples: Sequence[tuple[QAItem, float]] = (),
    meta: dict[str, Any] | None = None,
) -> LateRecords:
    """:func:`answer_batch` with the samples' decoding into texts and the records left to whoever first asks
    for them (the pipelined run's judging thread), so the model can go on with the next batch meanwhile."""
    prompts = [qa_prompt(item, config.prompts) for item in items]
    greedy, finish_samples, verbal = _generations(items, prompts, backend, config, verbal_examples)
    rendered = [backend.render(prompt) for prompt in prompts]

    def make() -> list[Record]:
        records: list[Record] = []
        for i, (item, prompt, g, s) in enumerate(zip(items, rendered, greedy, finish_samples())):
            rec = _new_record(item, prompt, meta)
            records.append(rec)
            if isinstance(g, Failure) or isinstance(s, Failure):
                rec.failure = next(x for x in (g, s) if isinstance(x, Failure)).reason  # the first step that failed
                continue
            _add_answers(rec, g[0], s, {name: replies[i] for name, replies in verbal.items()})
        return records

    return LateRecords(make)


def _record_queries(rec: Record) -> tuple[list[JudgeQuery], list[JudgeQuery]]:
    """The judge queries of one answered record: correctness of the greedy answer and of each sample
    (against the gold aliases), consistency of each sample with the greedy answer."""
    choices = tuple(rec.extra["choices"]) if rec.extra.get("choices") else None
    gold, greedy = tuple(rec.answers), rec.greedy_response or ""
    correct = [JudgeQuery("correctness", rec.question, text, gold, choices) for text in (greedy, *rec.samples)]
    consist = [JudgeQuery("consistency", rec.question, text, (greedy,), choices) for text in rec.samples]
    return correct, consist


def judge_records(records: Sequence[Record], judges: Judges) -> None:
    """Set the correctness and consistency labels of answered records (in place), in two batched calls."""
    correct_q: list[JudgeQuery] = []
    consist_q: list[JudgeQuery] = []
    for rec in records:
        correct, consist = _record_queries(rec)
        correct_q += correct
        consist_q += consist
    correct_v = judges.correctness.judge_batch(correct_q) if correct_q else []
    consist_v = judges.consistency.judge_batch(consist_q) if consist_q else []
    ci = si = 0
    for rec in records:
        k = rec.k
        rec.greedy_correct = int(correct_v[ci])
        rec.sample_correct = [int(v) for v in correct_v[ci + 1 : ci + 1 + k]]
        rec.sample_consistent = [int(v) for v in consist_v[si : si + k]]
        ci, si = ci + 1 + k, si + k


def _generations(
    items: Sequence[QAItem], prompts: Sequence[Prompt], backend: Backend, config: AnnotateConfig,
    verbal_examples: Sequence[tuple[QAItem, float]],
) -> tuple[list[Outcome], Callable[[], list[Outcome]], dict[str, list[Outcome]]]:
    """(greedy answers, a function that gives the k samples, verbalized-confidence replies per kind) of the
    questions; questions whose greedy answer failed are not sampled."""
    greedy = generate_safely(backend, prompts, config.greedy_settings(), config.retries)
    alive = [i for i, g in enumerate(greedy) if not isinstance(g, Failure)]
    sampling = start_safely(backend, [prompts[i] for i in alive], config.sample_settings(), config.retries) \
        if config.k > 0 and alive else list

    def samples() -> list[Outcome]:
        out: list[Outcome] = [[] for _ in items]
        for i, s in zip(alive, sampling()):
            out[i] = s
        return out

    verbal: dict[str, list[Outcome]] = {}
    for kind in config.verbal:
        shots = verbal_examples if kind == "verbal-10" else ()
        vprompts = [verbal_prompt(item, config.prompts, shots) for item in items]
        settings = GenerationSettings(max_new_tokens=16, repetition_penalty=config.repetition_penalty, logprobs=False)
        verbal[kind] = generate_safely(backend, vprompts, settings, config.retries)
    return greedy, samples, verbal


def _new_record(item: QAItem, prompt: str, meta: dict[str, Any] | None) -> Record:
    """The record of a question before its answers: gold, source, rendered prompt, generation settings."""
    return Record(
        question=item.question,
        answers=list(item.answers),
        dataset=item.dataset,
        split=item.split,
        id=item.id,
        prompt=prompt,
        generation=dict(meta or {}),
        extra={k: v for k, v in (("choices", item.choices), *item.meta.items()) if v is not None},
    )


def _add_answers(rec: Record, answer: Generation, samples: Sequence[Generation], verbal: Mapping[str, Outcome]) -> None:
    """The greedy answer (text, tokens, log-probs), the samples and the verbal replies that did not fail."""
    rec.greedy_response = answer.text
    rec.greedy_tokens = list(answer.tokens)
    rec.greedy_logprobs = answer.token_logprobs
    rec.greedy_cumulative_logprob = answer.cumulative_logprob
    rec.samples = [x.text for x in samples]
    if samples and all(x.token_logprobs is not None for x in samples):
        rec.sample_logprobs = [list(x.token_logprobs or []) for x in samples]
    for name, reply in verbal.items():
        if not isinstance(reply, Failure):  # a failed verbal prompt leaves the key out
            rec.verbal[name] = reply[0].text


# ---------------------------------------------------------------------------- the resumable run


def annotation_fingerprint(config: AnnotateConfig, versions: Mapping[str, str | None] | None = None,
                           fast: bool | None = None) -> dict[str, Any]:
    """What decides an annotation folder's records: the config's output settings and the versions of the
    inputs it only names (``versions``, e.g. the model's weights; the Verbal-10 examples file is added).
    ``fast``: the decoding path the records are made with (:func:`resolve_decoding`), recorded as
    ``fast_decode: true`` for elical's loop and left out for generate, as a folder made before auto existed
    has it; by default ``config.fast_decode`` as it is (auto: left out)."""
    inputs = dict(versions or {})
    if config.verbal_examples:
        inputs["verbal_examples"] = path_version(config.verbal_examples)
    decided = config if fast is None else config.model_copy(update={"fast_decode": fast})
    return {**decided.output_settings(), "input": inputs}


def annotate(
    items: Sequence[QAItem],
    backend: Backend,
    judges: Judges | Judge | None = None,
    config: AnnotateConfig | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
    on_chunk: Callable[[list[Record]], None] | None = None,
    overwrite: bool = False,
    versions: Mapping[str, str | None] | None = None,
) -> list[Record]:
    """Annotate the items of ``config.shard`` and return their records in item order, with ``backend``
    switched for the run to the decoding path :func:`resolve_decoding` picks (``config.fast_decode``: auto,
    true or false; an HF backend's own ``fast_decode`` is as before afterwards).

    With ``out_dir``, records go to shard files as each chunk finishes and a rerun continues where
    the last one stopped. One process at a time works in a folder (elical.core.folder_lock), and only with
    the settings its records were made with (:func:`annotation_fingerprint`; elical.core.fingerprint says
    what a mismatch does); ``overwrite`` deletes the folder's annotation outputs and starts over.
    ``versions`` identify inputs the config only names (elical.model.loading.model_version of the model).
    ``judges`` defaults to the config's judges (a single Judge is used for both tasks).
    """
    config = config or AnnotateConfig()
    if out_dir is None:
        return annotate_shard(items, backend, judges, config, None, progress, on_chunk)
    out = Path(out_dir)
    with folder_lock(out):
        decoding = resolve_decoding(config, backend, None if overwrite else out)
        check_or_write_settings(out, annotation_fingerprint(config, versions, decoding.fast), overwrite, "annotate",
                                step_outputs(out))
        return annotate_shard(items, backend, judges, config, out, progress, on_chunk, decoding=decoding)


def annotate_shard(
    items: Sequence[QAItem],
    backend: Backend,
    judges: Judges | Judge | None,
    config: AnnotateConfig,
    out: Path | None,
    progress: bool,
    on_chunk: Callable[[list[Record]], None] | None,
    *,
    decoding: Decoding | None = None,
) -> list[Record]:
    """:func:`annotate` once the folder (if any) is locked and its settings checked (the Ray engine's
    workers call it: their driver holds the lock); ``decoding``: the path :func:`resolve_decoding` chose
    (by default resolved here: on Ray, the folder's)."""
    decoding = decoding or resolve_decoding(config, backend, out)
    pool = None
    if judges is None:
        from elical.annotate.judge_factory import build_judges
        from elical.annotate.judge_pool import judge_pool

        pool = judge_pool(config.judges.workers) if config.judges.workers else None
        judges = build_judges(config, backend=backend, out_dir=out, pool=pool)
    try:
        with decoding_path(backend, decoding):
            return _run_shard(select_shard(items, config.shard), backend, judges, config, out, progress, on_chunk,
                              decoding)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _run_shard(mine: list[QAItem], backend: Backend, judges: Judges | Judge, config: AnnotateConfig, out: Path | None,
               progress: bool, on_chunk: Callable[[list[Record]], None] | None, decoding: Decoding) -> list[Record]:
    """:func:`annotate_shard` once its judges are built: the batches of the shard's questions still to do,
    generated, judged and written in chunks (with ``config.pipeline``, each batch judged in a thread while the
    next is generated)."""
    if isinstance(judges, Judge):
        judges = Judges(judges, judges)
    meta = _generation_meta(backend, config, judges)
    examples = load_verbal_examples(config, mine) if "verbal-10" in config.verbal else []
    index, count = parse_shard(config.shard)
    done = _start_folder(out, config, mine) if out is not None else {}
    if out is not None:
        check_same_path(done, decoding, out)
    todo = [item for item in mine if item.id not in done]
    per_step = max(1, config.batch_size // max(1, config.k)) if config.backend == "hf" else max(1, config.batch_size)
    start = time.perf_counter()
    seq = len(shard_files(out, config.shard)) if out is not None else 0
    plan = batch_plan(mine, set(done), per_step, config.chunk_size)
    clock = StageClock()
    shared = _judges_use_answering_model(config, backend)
    model_lock: AbstractContextManager[Any] = threading.Lock() if shared else nullcontext()

    def judge(answered: LateRecords) -> None:
        with clock.timing("judge"):
            fresh = answered.records  # pipelined: the samples decoded here, while the model goes on
            with model_lock:
                judge_records([r for r in fresh if not r.failed], judges)

    pipelined = pipeline_on(config, backend)
    stage: InTurn[LateRecords] = Behind(judge, clock=clock) if pipelined else InTurn(judge)
    with annotate_progress(len(mine), len(done), enabled=progress) as advance, stage as judging:
        records: list[Record] = []  # the chunk being made: written when its block ends or after chunk_seconds
        began = time.monotonic()

        def take(batch: list[QAItem], closes: bool, answered: LateRecords) -> None:
            nonlocal records, began, seq
            records += answered.records
            advance(len(batch))
            if not (closes or time.monotonic() - began >= config.chunk_seconds):
                return
            if out is not None:
                with clock.timing("write"):
                    seq = write_part(records, out, index, count, seq)
            done.update((r.id, r) for r in records)
            if on_chunk is not None:
                on_chunk(records)
            records, began = [], time.monotonic()

        generated: list[LateRecords] = []  # this run's answered batches, judged or not
        try:
            for batch, closes in plan:
                with model_lock, clock.timing("generate"):
                    answered = start_answers(batch, backend, config, examples, meta)
                generated.append(answered)
                judging.put((batch, closes, answered))
                for item in judging.ready():
                    take(*item)
        except Exception:
            for item in judging.rest():  # what was generated before the error is judged and written, as serially
                take(*item)
            raise
        check = None
        if out is not None and decoding.fast:  # once per folder, after its first run: a resume keeps it
            check = earlier_check(out)
            if check is None and todo:  # reads answers only, so it runs while the judges finish the last batches
                with model_lock:
                    answers = {r.id: r for answered in generated for r in answered.records}
                    check = check_fast_decode(backend, mine, ChainMap(answers, done), config, per_step)
        for item in judging.rest():
            take(*item)
    judges.flush()  # the judgements of every written record reach the disk cache with them
    elapsed = time.perf_counter() - start
    result = [done[item.id] for item in mine]
    if out is not None:
        record = decoding.as_meta() | ({"check": check} if check is not None else {})
        _write_shard_meta(out, config, backend, judges, result, todo, elapsed, clock, pipelined, record)
    return result


def pipeline_on(config: AnnotateConfig, backend: Backend) -> bool:
    """Whether batches are judged while the next is generated: ``config.pipeline``, or where it is None,
    whether generation runs off the CPU (an HF model on a GPU, a server, vLLM), leaving the CPU to judge."""
    if config.pipeline is not None:
        return config.pipeline
    device = getattr(getattr(backend, "model", None), "device", None)
    return getattr(device, "type", "cpu") != "cpu" if config.backend == "hf" else True


def _generation_meta(backend: Backend, config: AnnotateConfig, judges: Judges) -> dict[str, Any]:
    """What every record notes of how it was made: the backend, the generation settings, the judges."""
    meta = {**backend.describe(), "greedy": config.greedy_settings().to_dict()}
    if config.k > 0:
        meta["sampling"] = config.sample_settings().to_dict()
    meta["judges"] = {"correctness": judges.correctness.name, "consistency": judges.consistency.name}
    return meta


def _start_folder(out: Path, config: AnnotateConfig, mine: Sequence[QAItem]) -> dict[str, Record]:
    """Write the config and the ids this shard must hold; return the records its earlier runs wrote, by
    id, once they are known to belong to these questions and gold answers (:func:`check_same_data`)."""
    index, count = parse_shard(config.shard)
    done: dict[str, Record] = {}
    for path in shard_files(out, config.shard):
        for rec in read_parquet(path):
            done[rec.id] = rec
    check_same_data(done, mine, out)
    out.mkdir(parents=True, exist_ok=True)
    config.to_yaml(out / "annotate.yaml")
    write_expected(out, index, count, [item.id for item in mine])
    return done


def check_same_data(done: Mapping[str, Record], items: Sequence[QAItem], out: Path) -> None:
    """Refuse to resume over records made for other data: a question already annotated whose gold
    answers, options or wording the data now gives differently would keep labels judged against the old
    gold. Added questions are fine (they are annotated now); the error names what changed and where."""
    changed: list[str] = []
    for item in items:
        rec = done.get(item.id)
        if rec is None:
            continue
        was = {"question": rec.question, "gold answers": list(rec.answers), "options": rec.extra.get("choices")}
        now = {"question": item.question, "gold answers": list(item.answers), "options": item.choices}
        changed += [f"{item.dataset} id {item.id}: {field} {was[field]!r} -> {now[field]!r}"
                    for field in was if (was[field] or None) != (now[field] or None)]
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise InputError(f"{out}: the data changed since these records were made: {changed[0]}{more}; "
                         "rerun with --overwrite to annotate again, or restore the data")


def _judges_use_answering_model(config: AnnotateConfig, backend: Backend) -> bool:
    """Whether a judge runs the answering model itself (``llm``/``cascade`` without ``judges.llm_model``):
    then judging and generation take turns on it, pipelined or not."""
    kinds = {config.judges.correctness, config.judges.consistency}
    return bool(kinds & {"llm", "cascade"}) and config.judges.llm_model is None and hasattr(backend, "model")


def _write_shard_meta(out: Path, config: AnnotateConfig, backend: Backend, judges: Judges, result: list[Record],
                      todo: list[QAItem], elapsed: float, clock: StageClock, pipelined: bool,
                      decoding: dict[str, Any]) -> None:
    """The shard's meta file (versions, backend, decoding path and its check, counts, speed of the questions
    annotated now, judge calls); with one shard, also records.parquet."""
    index, count = parse_shard(config.shard)
    fresh = {item.id for item in todo}
    answers = sum(1 + r.k for r in result if r.id in fresh and not r.failed)
    info = {
        "versions": _versions(),
        "backend": backend.describe(),
        "decoding": decoding,  # generate or fast_decode, auto or forced, why; fast_decode's agreement check
        "shard": config.shard,
        "questions": len(result),
        "annotated_now": len(todo),
        "failed": sum(r.failed for r in result),
        "seconds": round(elapsed, 2),
        "answers_per_second": round(answers / elapsed, 3) if elapsed > 0 and todo else None,
        "judge_calls": judges.stats(),
        "pipeline": pipelined,
        "timings": clock.as_dict(elapsed),  # seconds and share of wall time per stage, this process
    }
    with atomic_write(out / f"meta-{index}of{count}.json") as tmp:
        tmp.write_text(json.dumps(info, indent=2))
    if count == 1:
        write_parquet(result, out / "records.parquet")
