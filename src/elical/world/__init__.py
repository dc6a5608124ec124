"""A synthetic knowledge world and its tiny LM: the default, download-free subject of `elical run`.

* :func:`generate_world` draws people, cities and facts, each fact stated a controlled number of
  times in the corpus (never to often), some contested (a wrong value stated more often);
* :func:`corpus_sentences` / :func:`qa_tuning_examples` are what the LM is pretrained on;
* :func:`evaluation_questions` gives the experiment's splits (in-domain, OOD, multiple choice);
* :func:`train_world_lm` pretrains a Llama/Qwen2 of a few million parameters on them;
  :func:`load_world_lm` / :func:`default_lm_path` load the packaged checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from elical.core._lazy import lazy_exports

if TYPE_CHECKING:
    from elical.world.config import LMConfig, WorldConfig
    from elical.world.corpus import corpus_sentences
    from elical.world.generate import World, generate_world
    from elical.world.questions import QAExample, evaluation_questions, qa_tuning_examples

_LAZY = {  # name -> the submodule that defines it, imported on first use (PEP 562)
    "LMConfig": "elical.world.config",
    "WorldConfig": "elical.world.config",
    "corpus_sentences": "elical.world.corpus",
    "World": "elical.world.generate",
    "generate_world": "elical.world.generate",
    "QAExample": "elical.world.questions",
    "evaluation_questions": "elical.world.questions",
    "qa_tuning_examples": "elical.world.questions",
}
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

ASSETS = Path(__file__).resolve().parent / "assets"


def default_lm_path() -> Path:
    """The packaged world LM checkpoint (trained by `elical world train-lm`)."""
    return ASSETS / "world-lm"


def train_world_lm(*args, **kwargs):
    """Pretrain the world LM (see :func:`elical.world.lm.train_world_lm`)."""
    from elical.world.lm import train_world_lm as _train

    return _train(*args, **kwargs)


def load_world_lm(*args, **kwargs):
    """Load a world LM folder (see :func:`elical.world.lm.load_world_lm`)."""
    from elical.world.lm import load_world_lm as _load

    return _load(*args, **kwargs)


__all__ = [
    "ASSETS",
    "LMConfig",
    "QAExample",
    "World",
    "WorldConfig",
    "corpus_sentences",
    "default_lm_path",
    "evaluation_questions",
    "generate_world",
    "load_world_lm",
    "qa_tuning_examples",
    "train_world_lm",
]
