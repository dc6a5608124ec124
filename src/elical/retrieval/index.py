"""A BM25 retriever over a corpus of passages (bm25s: sparse, fast, saved to and loaded from a folder).

Words are lower-cased and English stop words dropped; there is no stemming (PyStemmer is not
required). Only passages sharing a word with the query are returned, so a query may get fewer
than ``k``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elical.retrieval.passages import Passage, read_passages, write_passages

PASSAGES_FILE = "passages.jsonl"
STOPWORDS = "en"


def _bm25s() -> Any:
    """The bm25s module, or an ImportError saying how to install it."""
    try:
        import bm25s
    except ImportError:
        raise ImportError("retrieval needs bm25s: pip install 'elical[retrieval]'") from None
    return bm25s


class Retriever:
    """BM25 over passages: :meth:`search` returns the best ``k`` passages of each query."""

    def __init__(self, passages: Sequence[Passage], model: Any = None, tokenizer: Any = None) -> None:
        """Index ``passages`` (or wrap an index already built on them, as :meth:`load` does)."""
        if not passages:
            raise ValueError("a retriever needs at least one passage")
        self.passages = list(passages)
        if model is None or tokenizer is None:
            bm25s = _bm25s()
            tokenizer = bm25s.tokenization.Tokenizer(stopwords=STOPWORDS)
            tokens = tokenizer.tokenize([p.indexed_text() for p in self.passages], show_progress=False)
            model = bm25s.BM25()
            model.index(tokens, show_progress=False)
        self.model, self.tokenizer = model, tokenizer

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike) -> Retriever:
        """Index a JSONL corpus file (:func:`~elical.retrieval.passages.read_passages` checks it)."""
        return cls(read_passages(path))

    def __len__(self) -> int:
        return len(self.passages)

    def save(self, folder: str | os.PathLike) -> Path:
        """Write the index, its vocabulary and the passages to ``folder`` (read back by :meth:`load`)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save(str(folder), show_progress=False)
        self.tokenizer.save_vocab(str(folder))
        self.tokenizer.save_stopwords(str(folder))
        write_passages(self.passages, folder / PASSAGES_FILE)
        return folder

    @classmethod
    def load(cls, folder: str | os.PathLike) -> Retriever:
        """A retriever saved by :meth:`save`."""
        folder = Path(folder)
        if not (folder / PASSAGES_FILE).is_file():
            raise FileNotFoundError(f"{folder}: no saved retriever there ({PASSAGES_FILE} missing)")
        bm25s = _bm25s()
        model = bm25s.BM25.load(str(folder), show_progress=False)
        tokenizer = bm25s.tokenization.Tokenizer(stopwords=STOPWORDS)
        tokenizer.load_vocab(str(folder))
        tokenizer.load_stopwords(str(folder))
        return cls(read_passages(folder / PASSAGES_FILE), model, tokenizer)

    def search(self, queries: Sequence[str], k: int = 3) -> list[list[Passage]]:
        """The best ``k`` passages of each query, best first (only those sharing a word with it)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not queries:
            return []
        tokens = self.tokenizer.tokenize(list(queries), update_vocab=False, show_progress=False)
        found, scores = self.model.retrieve(tokens, k=min(k, len(self.passages)), show_progress=False)
        return [[self.passages[int(i)] for i, s in zip(row, row_scores) if s > 0]
                for row, row_scores in zip(found, scores)]
