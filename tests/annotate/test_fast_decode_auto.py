"""fast_decode: auto (the default), forced on, forced off, with tiny real models. Auto decodes with elical's loop on a
CPU and a CUDA device, and with generate elsewhere, leaving the folder's settings as they were before auto existed
there; a resumed folder keeps the path its records were made with; where elical's loop decodes, the folder's meta
records how often its greedy answers are generate's."""

from __future__ import annotations

import json

import pytest
from test_annotate import CONFIG, make_items

from elical.annotate import AnnotateConfig, annotate
from elical.annotate import decoding as annotate_decoding
from elical.annotate.backends import hf_decode
from elical.annotate.backends.hf import HFBackend
from elical.annotate.decoding import (
    Decoding,
    check_same_path,
    resolve_decoding,
    settled_decoding,
    worker_decoding,
)
from elical.annotate.pipeline import annotation_fingerprint
from elical.core.fingerprint import digest, recorded_settings
from elical.core.inputs import InputError
from elical.records import read_parquet


@pytest.fixture
def backend(tiny_tokenizer, tiny_llama):
    return HFBackend(tiny_llama, tiny_tokenizer, batch_size=12)


def meta(folder) -> dict:
    return json.loads((folder / "meta-0of1.json").read_text())


def paths(folder) -> set[bool]:
    """Whether each record of the folder was decoded by elical's loop (its generation note)."""
    return {bool(rec.generation.get("fast_decode")) for rec in read_parquet(folder / "records.parquet")}


def seen_on(monkeypatch, seen: str) -> None:
    """Auto's view of the model as if it were on the device type ``seen`` (the tiny model stays on the CPU)."""
    real = hf_decode.auto_fast_decode
    monkeypatch.setattr(hf_decode, "auto_fast_decode", lambda model, penalty=1.0, device=None: real(model, penalty, seen))


@pytest.fixture
def as_on_a_gpu(monkeypatch):
    seen_on(monkeypatch, "cuda")


@pytest.fixture
def as_on_mps(monkeypatch):
    seen_on(monkeypatch, "mps")


def test_auto_is_the_default_and_keeps_todays_settings_digest():
    assert AnnotateConfig().fast_decode is None and CONFIG.fast_decode is None
    today = CONFIG.model_copy(update={"fast_decode": False})
    assert annotation_fingerprint(CONFIG, {"model": "m"}) == annotation_fingerprint(today, {"model": "m"})
    assert "fast_decode" not in CONFIG.output_settings()
    assert annotation_fingerprint(CONFIG, fast=True) == annotation_fingerprint(CONFIG.model_copy(update={"fast_decode": True}))
    assert annotation_fingerprint(CONFIG, fast=True)["fast_decode"] is True
    assert AnnotateConfig.model_validate(CONFIG.model_dump()).fast_decode is None  # annotate.yaml keeps auto


def test_auto_on_cpu_decodes_with_fast_decode_and_checks_it(backend, tmp_path):
    annotate(make_items(5), backend, None, CONFIG, tmp_path, progress=False)
    decoding = meta(tmp_path)["decoding"]
    assert decoding["path"] == "fast_decode" and decoding["chosen"] == "auto" and "on cpu" in decoding["why"]
    assert decoding["check"]["same_greedy_share"] == 1.0 and paths(tmp_path) == {True}  # float32: generate's answers
    assert recorded_settings(tmp_path, "annotate")["fast_decode"] is True
    assert not backend.fast_decode  # the backend is left as it was given


def test_auto_elsewhere_decodes_with_generate_and_records_the_same_digest(backend, tmp_path, as_on_mps):
    records = annotate(make_items(5), backend, None, CONFIG, tmp_path, progress=False, versions={"model": "m"})
    assert len(records) == 5 and paths(tmp_path) == {False}
    today = annotation_fingerprint(CONFIG.model_copy(update={"fast_decode": False}), {"model": "m"})
    recorded = recorded_settings(tmp_path, "annotate")
    assert recorded == json.loads(json.dumps(today)) and "fast_decode" not in recorded
    assert json.loads((tmp_path / "settings" / "annotate.json").read_text())["digest"] == digest(today)
    decoding = meta(tmp_path)["decoding"]
    assert decoding == {"path": "generate", "chosen": "auto", "why": decoding["why"]} and "on mps" in decoding["why"]


def test_forced_fast_decode_on_cpu_records_its_agreement_with_generate(backend, tmp_path):
    fast = CONFIG.model_copy(update={"fast_decode": True})
    annotate(make_items(5), backend, None, fast, tmp_path, progress=False)
    assert paths(tmp_path) == {True} and recorded_settings(tmp_path, "annotate")["fast_decode"] is True
    decoding = meta(tmp_path)["decoding"]
    assert decoding["path"] == "fast_decode" and decoding["chosen"] == "forced"
    check = decoding["check"]
    assert check["questions"] == 5 and check["same_greedy_share"] == 1.0  # float32: generate's answers exactly
    assert 0.0 <= check["max_logprob_diff_when_same"] < 1e-4
    assert check["prompts_per_batch"] == CONFIG.batch_size // CONFIG.k and check["max_new_tokens"] == CONFIG.max_new_tokens
    assert not backend.fast_decode
    # a resume keeps the folder's one check (made once per folder), and still decodes with elical's loop
    annotate(make_items(7), backend, None, fast, tmp_path, progress=False)
    assert meta(tmp_path)["decoding"]["check"] == check and paths(tmp_path) == {True}


def test_the_check_runs_while_the_judges_finish_the_last_batches(backend, tmp_path, monkeypatch):
    """Pipelined, the check reads the run's answers before the last batches are judged and written: a judge
    that holds its batch until the check has begun is let go by it (it would wait out its timeout otherwise)."""
    import threading

    from elical.annotate import pipeline
    from elical.annotate.judges import Judges, MatchJudge

    checked = threading.Event()
    real = pipeline.check_fast_decode
    monkeypatch.setattr(pipeline, "check_fast_decode", lambda *a, **k: checked.set() or real(*a, **k))
    seen: list[bool] = []

    class Held(MatchJudge):
        def judge_batch(self, queries):
            seen.append(checked.wait(timeout=60))
            return super().judge_batch(queries)

    config = CONFIG.model_copy(update={"fast_decode": True, "pipeline": True, "chunk_size": 8})  # 8 questions: 2 batches
    records = annotate(make_items(8), backend, Judges(Held(), Held()), config, tmp_path, progress=False)
    assert seen and all(seen) and len(records) == 8 and all(r.greedy_correct is not None for r in records)
    assert meta(tmp_path)["decoding"]["check"]["questions"] == 8


def test_the_check_counts_at_most_its_constant_of_a_seeded_draw_of_the_answered_questions(backend, monkeypatch):
    items = make_items(9)
    fast = CONFIG.model_copy(update={"fast_decode": True})
    records = {rec.id: rec for rec in annotate(items, backend, None, fast, progress=False)}
    monkeypatch.setattr(annotate_decoding, "FAST_DECODE_CHECK", 4)
    check = annotate_decoding.check_fast_decode(backend, items, records, CONFIG, per_step=3)
    assert check is not None and check["questions"] == 4 and check["same_greedy_share"] == 1.0
    assert annotate_decoding.check_fast_decode(backend, items, records, CONFIG, per_step=3, count=0) is None
    assert not backend.fast_decode
    # the check compares with the records' greedy answers: one changed is one not the same
    for rec in records.values():
        rec.greedy_tokens = [*rec.greedy_tokens, "!"]
    assert annotate_decoding.check_fast_decode(backend, items, records, CONFIG, per_step=3)["same_greedy_share"] == 0.0
    # failed or missing questions are not drawn
    records[items[0].id].failure = "generation failed"
    del records[items[1].id]
    check = annotate_decoding.check_fast_decode(backend, items, records, CONFIG, per_step=3, count=20)
    assert check["questions"] == 7


def test_forced_generate_is_recorded_as_forced_with_todays_digest(backend, tmp_path, as_on_a_gpu):
    off = CONFIG.model_copy(update={"fast_decode": False})
    annotate(make_items(4), backend, None, off, tmp_path, progress=False)
    assert paths(tmp_path) == {False} and "fast_decode" not in recorded_settings(tmp_path, "annotate")
    assert meta(tmp_path)["decoding"] == {"path": "generate", "chosen": "forced", "why": "fast_decode: false"}


def test_auto_where_fast_decode_applies_uses_it_and_checks_it(backend, tmp_path, as_on_a_gpu):
    annotate(make_items(4), backend, None, CONFIG, tmp_path, progress=False)
    decoding = meta(tmp_path)["decoding"]
    assert decoding["path"] == "fast_decode" and decoding["chosen"] == "auto" and "sdpa" in decoding["why"]
    assert decoding["check"]["same_greedy_share"] == 1.0 and paths(tmp_path) == {True}
    assert recorded_settings(tmp_path, "annotate")["fast_decode"] is True


def test_an_old_style_folder_resumes_with_the_new_default(backend, tmp_path, as_on_a_gpu):
    """A folder made with fast_decode false (the old default, not recorded) and a meta file without
    `decoding`: auto, which would pick elical's loop here, resumes it with generate."""
    annotate(make_items(4), backend, None, CONFIG.model_copy(update={"fast_decode": False}), tmp_path, progress=False)
    before = json.loads((tmp_path / "settings" / "annotate.json").read_text())
    old = meta(tmp_path)
    del old["decoding"]
    (tmp_path / "meta-0of1.json").write_text(json.dumps(old))
    records = annotate(make_items(7), backend, None, CONFIG, tmp_path, progress=False)
    assert len(records) == 7 and paths(tmp_path) == {False}
    assert json.loads((tmp_path / "settings" / "annotate.json").read_text()) == before
    decoding = meta(tmp_path)["decoding"]
    assert decoding["path"] == "generate" and decoding["chosen"] == "auto" and "resume keeps" in decoding["why"]


def test_a_folder_made_with_fast_decode_resumes_with_it_forced_or_auto_never_with_generate(backend, tmp_path):
    fast = CONFIG.model_copy(update={"fast_decode": True})
    annotate(make_items(4), backend, None, fast, tmp_path, progress=False)
    annotate(make_items(5), backend, None, fast, tmp_path, progress=False)  # forced on: resumes
    annotate(make_items(6), backend, None, CONFIG, tmp_path, progress=False)  # auto: keeps the folder's path
    assert paths(tmp_path) == {True} and meta(tmp_path)["decoding"]["chosen"] == "auto"
    with pytest.raises(InputError, match="made with fast_decode, and fast_decode: false would decode with generate"):
        annotate(make_items(7), backend, None, CONFIG.model_copy(update={"fast_decode": False}), tmp_path, progress=False)


def test_resolver_follows_the_folder_before_the_model(backend, tmp_path):
    assert resolve_decoding(CONFIG, backend, None, device="cuda").fast  # a fresh start where it applies
    assert resolve_decoding(CONFIG, backend, None).fast  # the tiny model is on the CPU, where it applies too
    elsewhere = resolve_decoding(CONFIG, backend, None, device="mps")
    assert not elsewhere.fast and "on mps" in elsewhere.why
    assert settled_decoding(CONFIG, tmp_path) is None  # auto on a fresh folder needs the model
    annotate(make_items(3), backend, None, CONFIG.model_copy(update={"fast_decode": False}), tmp_path, progress=False)
    follows = resolve_decoding(CONFIG, backend, tmp_path, device="cuda")
    assert not follows.fast and follows.chosen == "auto" and settled_decoding(CONFIG, tmp_path) == follows
    with pytest.raises(InputError, match="made with generate, and fast_decode: true would decode with fast_decode"):
        resolve_decoding(CONFIG.model_copy(update={"fast_decode": True}), backend, tmp_path)  # forced the other way
    assert resolve_decoding(CONFIG.model_copy(update={"fast_decode": True}), backend, None) == \
        Decoding(True, "forced", "fast_decode: true")  # no folder (or --overwrite): as forced
    penalty = resolve_decoding(CONFIG.model_copy(update={"repetition_penalty": 1.05}), backend, None, device="cuda")
    assert not penalty.fast and "repetition_penalty" in penalty.why
    assert not settled_decoding(AnnotateConfig(backend="vllm"), None).fast  # type: ignore[union-attr]


def test_auto_leaves_models_it_would_decode_differently_to_generate(tiny_llama):
    fast, why = hf_decode.auto_fast_decode(tiny_llama, 1.0, "cuda")
    assert fast and "sdpa" in why
    before = tiny_llama.config._attn_implementation
    tiny_llama.config._attn_implementation = "flash_attention_2"
    try:
        fast, why = hf_decode.auto_fast_decode(tiny_llama, 1.0, "cuda")
        assert not fast and "does not read" in why
        with pytest.raises(ValueError, match="set fast_decode false"):
            hf_decode.check_supported(tiny_llama)
    finally:
        tiny_llama.config._attn_implementation = before


def test_records_of_the_other_path_are_refused_in_one_line(backend, tmp_path):
    annotate(make_items(3), backend, None, CONFIG.model_copy(update={"fast_decode": False}), tmp_path, progress=False)
    done = {rec.id: rec for rec in read_parquet(tmp_path / "records.parquet")}
    check_same_path(done, Decoding(False, "auto", "x"), tmp_path)  # the same path: nothing to say
    with pytest.raises(InputError) as err:
        check_same_path(done, Decoding(True, "auto", "the model is on cuda"), tmp_path)
    assert "made with generate" in str(err.value) and "\n" not in str(err.value)


def test_bad_combinations_still_error_in_one_line(tiny_llama, tiny_tokenizer):
    with pytest.raises(ValueError, match="fast_decode applies no repetition penalty") as err:
        AnnotateConfig(fast_decode=True, repetition_penalty=1.05)
    assert len(str(err.value).splitlines()) <= 3  # pydantic's heading, the one message, its link
    assert AnnotateConfig(repetition_penalty=1.05).fast_decode is None  # auto: generate, no error
    with pytest.raises(ValueError, match="applies to the hf backend, not vllm"):
        AnnotateConfig(backend="vllm", fast_decode=True)
    before = tiny_llama.config._attn_implementation
    tiny_llama.config._attn_implementation = "flash_attention_2"
    try:
        with pytest.raises(ValueError, match="does not read") as err:
            HFBackend(tiny_llama, tiny_tokenizer, fast_decode=True)
        assert "\n" not in str(err.value)
    finally:
        tiny_llama.config._attn_implementation = before


def test_cli_unset_is_auto_and_fast_decode_resumes_it(tiny_tokenizer, tiny_llama, tmp_path):
    from test_annotate_resume import annotate_args
    from typer.testing import CliRunner

    from elical.cli import app

    runner = CliRunner()
    args = [*annotate_args(tiny_tokenizer, tiny_llama, tmp_path), "--k", "2", "--consistency-judge", "match"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    run = tmp_path / "run"
    assert meta(run)["decoding"]["chosen"] == "auto" and meta(run)["decoding"]["path"] == "fast_decode"  # on the CPU
    assert AnnotateConfig.from_yaml(run / "annotate.yaml").fast_decode is None
    result = runner.invoke(app, [*args, "--fast-decode"])  # the same records: resumes
    assert result.exit_code == 0, result.output
    decoding = meta(run)["decoding"]
    assert (decoding["path"], decoding["chosen"], decoding["why"]) == ("fast_decode", "forced", "fast_decode: true")
    result = runner.invoke(app, [*args, "--no-fast-decode"])  # the other path: refused in one line
    assert result.exit_code != 0 and "made with fast_decode" in result.output
    result = runner.invoke(app, [*args, "--fast-decode", "--repetition-penalty", "1.05"])
    assert result.exit_code == 2 and "no repetition penalty" in result.output


def test_the_ray_driver_decides_auto_for_its_workers_on_the_model_set_up_without_weights(tiny_tokenizer, tmp_path):
    """The Ray engine's workers load the model after the folder's settings are recorded: the driver decides their path
    on the model built from its config on the meta device, as auto decides for a loaded model."""
    from transformers import AutoModelForCausalLM, Gemma2Config

    from elical.model.loading import load_model, model_skeleton
    from elical.world import default_lm_path

    world = str(default_lm_path())
    skeleton = model_skeleton(world)
    assert {p.device.type for p in skeleton.parameters()} == {"meta"}
    assert skeleton.config._attn_implementation == load_model(world, device="cpu")[0].config._attn_implementation
    config = AnnotateConfig(model=world, engine="ray")
    decided = worker_decoding(config)
    assert decided.fast and decided.chosen == "auto" and "sdpa" in decided.why and "a CUDA device or a CPU" in decided.why
    assert worker_decoding(config.model_copy(update={"device": "cuda:1"})).fast
    elsewhere = worker_decoding(config.model_copy(update={"device": "mps"}))
    assert not elsewhere.fast and "on mps" in elsewhere.why
    penalty = worker_decoding(config.model_copy(update={"repetition_penalty": 1.05}))
    assert not penalty.fast and "repetition_penalty" in penalty.why
    windowed = Gemma2Config(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=8)  # every other layer slides
    AutoModelForCausalLM.from_config(windowed).save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    refused = worker_decoding(config.model_copy(update={"model": str(tmp_path)}))
    assert not refused.fast and "sliding-window layers" in refused.why
