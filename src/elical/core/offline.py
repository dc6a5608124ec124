"""Keep the Hugging Face libraries from asking the Hub anything during one call: elical never downloads, yet
peft's ``save_pretrained`` looks up the base model's config.json on the Hub (to see whether the vocabulary was
resized) when the base is a name rather than a folder (``world-lm``, ``smollm2``). Offline, peft makes the
decision it makes when the lookup fails (the vocabulary is taken as unchanged), so the saved files are the same,
without a network attempt (which can hang where DNS does) and without the warnings it printed.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# peft's notes for a lookup it could not make; offline, the answer is known to be "not resized"
_LOOKUP_NOTES = (r"Could not find a config file in .* - will assume that the vocabulary was not modified",
                 r"Unable to fetch remote file")


@contextmanager
def hub_offline() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` for the duration of the block (restored after), with peft's lookup notes silenced."""
    before = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        with warnings.catch_warnings():
            for note in _LOOKUP_NOTES:
                warnings.filterwarnings("ignore", message=note)
            yield
    finally:
        if before is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = before
