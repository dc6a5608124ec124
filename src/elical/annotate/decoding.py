"""The HF backend decodes with transformers' ``generate`` or with elical's own loop (``fast_decode``), as
:func:`resolve_decoding` decides: forced by ``fast_decode`` true/false, else (auto) the path of the folder's
records on a resume, else elical's loop where it applies (the model on a CUDA device or a CPU; see
elical.annotate.backends.hf_decode.auto_fast_decode). A folder never mixes the two: its settings record
``fast_decode: true`` for elical's loop (absent for generate, as before auto existed), and its records are
checked too. The meta file records the path and why (``decoding``); with elical's loop, also how often its
greedy answers equal generate's on :data:`FAST_DECODE_CHECK` of the questions (``decoding.check``).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from elical.annotate.backends.base import Backend, Generation
from elical.annotate.config import AnnotateConfig
from elical.annotate.folder import step_outputs
from elical.annotate.prompts import qa_prompt
from elical.core.fingerprint import recorded_settings
from elical.core.inputs import InputError
from elical.data.items import QAItem
from elical.records import Record

FAST_DECODE_CHECK = 64
"""Questions per folder (a seeded draw of the shard's, fewer in a smaller shard) whose greedy answers from
elical's loop (the run's own) ``generate`` answers again, in batches of the run's size, after a run that decodes
with elical's loop: ``decoding.check`` in the meta file records how many share generate's greedy tokens and
the largest token log-prob difference among those. On a CPU in float32 they agree on every question; on a bf16 GPU
batch effects change some greedy answers, and generate disagrees with itself at another batch size about
as often (SmolLM2 on an H200 at 24 new tokens, 1,024 questions: 72.4 % of the loop's greedy answers equal
generate's, 71.4 % of generate's at another batch size; benchmarks/results/fast_decode_agreement_h200.txt).
0: no check."""


def path_name(fast: bool) -> str:
    """The decoding path's name, as the meta file and the messages say it."""
    return "fast_decode" if fast else "generate"


@dataclass(frozen=True)
class Decoding:
    """How the HF backend decodes an annotation: elical's loop (``fast``) or ``generate``; whether the
    config forced it or auto chose it; and why."""

    fast: bool
    chosen: Literal["auto", "forced"]
    why: str

    @property
    def path(self) -> str:
        return path_name(self.fast)

    def as_meta(self) -> dict[str, Any]:
        return {"path": self.path, "chosen": self.chosen, "why": self.why}


def folder_decoding(out: Path) -> bool | None:
    """Whether the folder's annotation was made with elical's loop (its settings record ``fast_decode: true``)
    or generate (absent); None where the folder holds no annotation yet."""
    if not any(path.exists() for path in step_outputs(out)):
        return None
    return bool((recorded_settings(out, "annotate") or {}).get("fast_decode"))


def settled_decoding(config: AnnotateConfig, folder: Path | None) -> Decoding | None:
    """The decoding path as far as the config and ``folder`` (None: a fresh start) decide it, before a
    model is loaded: ``fast_decode`` true or false (refused in one line where the folder's annotation was made
    on the other path), generate on a backend other than hf, and on resume the path the folder's records were
    made with; None where auto must see the model."""
    if config.fast_decode is not None:
        forced = Decoding(config.fast_decode, "forced", f"fast_decode: {str(config.fast_decode).lower()}")
        made = folder_decoding(folder) if folder is not None else None
        if made is not None and made != forced.fast:  # said plainly, before the settings check says "(unset)"
            raise InputError(f"{folder}: its annotation was made with {path_name(made)}, and "
                             f"{forced.why} would decode with {forced.path}; a folder never mixes the two: leave "
                             f"fast_decode unset (auto keeps the folder's path), or --overwrite to start over")
        return forced
    if config.backend != "hf":
        return Decoding(False, "auto", f"fast_decode applies to the hf backend, not {config.backend}")
    recorded = folder_decoding(folder) if folder is not None else None
    if recorded is not None:
        return Decoding(recorded, "auto", f"the folder's annotation decodes with {path_name(recorded)} (its settings), "
                                          "and a resume keeps its path")
    return None


def worker_decoding(config: AnnotateConfig) -> Decoding:
    """auto's path for a model that other processes load (the Ray engine's workers, after the folder's settings are
    recorded): elical's loop where it decodes the model, built from its config without weights
    (elical.model.loading.model_skeleton), as generate does, on the device the config names (auto: each worker's
    CUDA device or CPU, where the loop runs alike); as :func:`resolve_decoding` decides for a model loaded here."""
    from elical.annotate.backends import hf_decode
    from elical.model.loading import model_skeleton

    device = "a CUDA device or a CPU" if config.device == "auto" else str(config.device).split(":")[0]
    if config.device != "auto" and (reason := hf_decode.unmeasured(device)) is not None:
        return Decoding(False, "auto", reason)
    where = f"the Ray workers' model (set up from its config) is on {device}"
    fast, why = hf_decode.decodes_alike(model_skeleton(config.model), config.repetition_penalty, where)
    return Decoding(fast, "auto", why)


def resolve_decoding(config: AnnotateConfig, backend: Backend, folder: Path | None,
                     device: str | None = None) -> Decoding:
    """The decoding path of an annotation with ``backend`` into ``folder`` (None: no folder, or starting
    over): :func:`settled_decoding`, else (auto) elical's loop where it applies to the backend's model
    (elical.annotate.backends.hf_decode.auto_fast_decode; ``device``: the device type it assumes the
    model on, by default the model's)."""
    settled = settled_decoding(config, folder)
    if settled is not None:
        return settled
    model = getattr(backend, "model", None)
    if model is None or not hasattr(backend, "set_fast_decode"):
        return Decoding(False, "auto", f"the {backend.name} backend has no fast_decode")
    from elical.annotate.backends import hf_decode

    fast, why = hf_decode.auto_fast_decode(model, config.repetition_penalty, device)
    return Decoding(fast, "auto", why)


@contextmanager
def decoding_path(backend: Backend, decoding: Decoding) -> Iterator[None]:
    """The backend decoding on ``decoding``'s path inside the block (as before after it)."""
    switch = getattr(backend, "decoding", None)
    if switch is None:
        if decoding.fast:
            raise ValueError(f"fast_decode: the {backend.name} backend has no fast_decode (the hf backend has)")
        yield
        return
    with switch(decoding.fast):
        yield


def check_fast_decode(backend: Backend, items: Sequence[QAItem], records: Mapping[str, Record], config: AnnotateConfig,
                      per_step: int, count: int | None = None) -> dict[str, Any] | None:
    """How often ``generate`` gives the greedy answers that elical's loop gave in ``records`` (by question id), on
    ``count`` of ``items`` (a draw seeded by ``config.seed``; :data:`FAST_DECODE_CHECK` by default) answered
    there, in batches of ``per_step`` prompts as the run makes them: the questions checked, the share whose
    greedy tokens are generate's, and the largest |token log-prob difference| among those. Made once the
    run has generated every batch (the annotation runs it while its judges finish the last ones), from the
    run's own answers, so only generate's side costs time. None where there is nothing to check. On a
    bf16 GPU the share is below 1 (batch effects), about as far as generate's agreement with itself at
    another batch size. A check that raises is recorded as its error (the check informs; it stops nothing)."""
    count = FAST_DECODE_CHECK if count is None else count
    answered = [item for item in items if item.id in records and not records[item.id].failed]
    chosen = random.Random(config.seed).sample(answered, min(count, len(answered)))
    switch = getattr(backend, "decoding", None)
    if not chosen or switch is None:
        return None
    start = time.perf_counter()
    prompts = [qa_prompt(item, config.prompts) for item in chosen]
    settings = config.greedy_settings()
    answers: list[Generation] = []
    try:
        with switch(False):
            for first in range(0, len(prompts), per_step):
                answers += backend.generate(prompts[first : first + per_step], settings)
    except Exception as err:  # noqa: BLE001 - the check informs; the run's own batches met any real failure
        return {"questions": len(chosen), "error": f"{type(err).__name__}: {err}"[:300].replace("\n", " ")}
    loop = [records[item.id] for item in chosen]
    same = [(rec, gen) for rec, gen in zip(loop, answers)
            if rec.greedy_tokens == gen.tokens and rec.greedy_response == gen.text]
    gaps = [abs(x - y) for rec, gen in same for x, y in zip(rec.greedy_logprobs or [], gen.token_logprobs or [])]
    return {"questions": len(chosen), "same_greedy_share": round(len(same) / len(chosen), 4),
            "max_logprob_diff_when_same": float(f"{max(gaps, default=0.0):.3g}"),
            "prompts_per_batch": min(per_step, len(prompts)), "max_new_tokens": settings.max_new_tokens,
            "seconds": round(time.perf_counter() - start, 2)}


def earlier_check(out: Path) -> dict[str, Any] | None:
    """The fast_decode check an earlier run (any shard) recorded in the folder's meta files, if any."""
    for path in sorted(out.glob("meta-*of*.json")):
        try:
            decoding = json.loads(path.read_text()).get("decoding") or {}
        except (OSError, ValueError):
            continue
        if decoding.get("path") == "fast_decode" and decoding.get("check") and "error" not in decoding["check"]:
            return dict(decoding["check"])
    return None


def check_same_path(done: Mapping[str, Record], decoding: Decoding, out: Path) -> None:
    """Refuse to add records decoded on another path than the folder's records were (their ``generation``
    note names fast_decode when it made them); the settings check refuses this first, this guards it."""
    made = {path_name(bool((rec.generation or {}).get("fast_decode"))) for rec in done.values()}
    other = sorted(made - {decoding.path})
    if other:
        raise InputError(f"{out}: its records were made with {other[0]}, and this run would decode with "
                         f"{decoding.path} ({decoding.chosen}: {decoding.why}); a folder never mixes the two: "
                         f"set fast_decode {str(not decoding.fast).lower()} to resume, or --overwrite to start over")
