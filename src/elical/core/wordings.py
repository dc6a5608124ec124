"""The authors' prompt wordings (reference.md section 4), declared once.

Every default wording of the confidence model, the annotator, the world LM and the honesty methods
comes from here. A leaf module (it imports nothing from elical), so any module may read it without
pulling in the annotation code.
"""

from typing import Literal

SYSTEM_PROMPT = "You are a helpful assistant."
QA_TEMPLATE = "Answer the following question.\nQuestion: {question}"
# The short-answer prompt of open-QA evaluations (lm-evaluation-harness's nq_open / triviaqa style): three
# "Q: ... A: ..." examples, written for this project (none comes from an evaluated set), then the question.
# A chat model then replies with the answer alone instead of a sentence that names several entities.
SHORT_QA_TEMPLATE = (
    "Answer the question with the answer alone, in a few words.\n"
    "Q: Who wrote the novel Pride and Prejudice?\nA: Jane Austen\n"
    "Q: What is the capital city of Australia?\nA: Canberra\n"
    "Q: In which year did the Berlin Wall fall?\nA: 1989\n"
    "Q: {question}\nA:"
)
# Answering prompts by name: `annotate.prompts.qa: short` (or `--prompt short`) picks a template.
QAStyle = Literal["paper", "short"]  # the names of QA_STYLES (the command line's --prompt choices)
QA_STYLES = {"paper": QA_TEMPLATE, "short": SHORT_QA_TEMPLATE}
MC_TEMPLATE = (
    "Select the correct answer to the following question based on your internal knowledge.\n"
    "Question: {question}{options}"
)
VERBAL_TEMPLATE = (
    "Judge whether you can provide a correct answer for the given question. Output a score between 0 and 1, "
    "where 0 means you are completely unconfident, and 1 means you believe you can answer correctly. "
    "Just give your score without any other words.\nQuestion: {question}"
)
JUDGE_CORRECTNESS_TEMPLATE = (
    "Determine whether the generated answer to the question means the same as any of the expected answers.\n"
    "Question: {question}\nExpected answers: {references}\nGenerated answer: {answer}\n"
    'If the generated answer is correct, reply "certain"; otherwise reply "uncertain". Reply with one word only.'
)
JUDGE_CONSISTENCY_TEMPLATE = (
    "Determine whether the two answers to the question are semantically equivalent.\n"
    "Question: {question}\nAnswer 1: {reference}\nAnswer 2: {answer}\n"
    'If they mean the same, reply "certain"; otherwise reply "uncertain". Reply with one word only.'
)
JUDGE_YES = "certain"
JUDGE_NO = "uncertain"

# Retrieval-augmented answering (adaptive-retrieval papers' wording): the retrieved passages, one per
# line, then the subject's own answering prompt (``QA_TEMPLATE`` or ``MC_TEMPLATE`` filled in).
RETRIEVAL_TEMPLATE = "Given the following information:\n{passages}\n{prompt}"
