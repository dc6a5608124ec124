"""Saving a confidence model whose base is a name (an alias), not a folder, asks the Hub nothing: peft would
look the base's config.json up online to see whether the vocabulary was resized (elical never downloads)."""

from __future__ import annotations

import os
import warnings

import pytest


@pytest.mark.e2e  # builds and loads the world LM
def test_saving_a_model_on_a_named_base_makes_no_hub_lookup(monkeypatch, tmp_path):
    import peft.utils.other

    from elical.model.network import ConfidenceModel, ModelConfig

    def no_network(*args, **kwargs):
        raise AssertionError(f"asked the Hub: {args}")

    monkeypatch.setattr(peft.utils.other, "file_exists", no_network)  # what peft's lookup calls
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    ConfidenceModel.create(ModelConfig(base_model="world-lm")).save(tmp_path / "stage1")
    model = ConfidenceModel.load(tmp_path / "stage1", device="cpu")  # as stage 2 starts: its base is now the name
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.save(tmp_path / "model")
    notes = [str(w.message) for w in caught if "vocabulary" in str(w.message) or "remote file" in str(w.message)]
    assert notes == [] and "HF_HUB_OFFLINE" not in os.environ  # the setting is the caller's again
    assert (tmp_path / "model" / "adapter_model.safetensors").is_file()
    assert ConfidenceModel.load(tmp_path / "model", device="cpu").config.base_model == "world-lm"


@pytest.mark.parametrize("before", [None, "0"])
def test_hub_offline_restores_the_setting(monkeypatch, before):
    from elical.core.offline import hub_offline

    if before is None:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", before)
    with hub_offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ.get("HF_HUB_OFFLINE") == before
