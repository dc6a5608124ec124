"""Questions about the synthetic world: QA-tuning examples for the LM, and the evaluation splits.

People are split once: the ``qa_tuned`` ones teach the LM the question-answer format (all
relations and wordings, multiple choice, two-hop); every question asked in an experiment is about
the others, so the LM must answer from what the corpus told it.

Datasets (each a :class:`~elical.records.Record` set; ``extra`` holds group, relation, exposure):
* one per in-domain relation, split ``train`` (the calibration pool) and ``test``  -> group ``in-domain``
* one per OOD relation, and ``paraphrase`` (unseen wordings of in-domain test facts) -> ``ood``
* ``multihop``: country of a person's birth city (two facts)                        -> ``ood``
* ``mc``: in-domain test facts as multiple choice, answer a letter (the MMLU analogue) -> ``mc``
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Any

from elical.data.items import QAItem
from elical.world.generate import Person, World
from elical.world.relations import CITY_COUNTRY, MULTIHOP_QUESTIONS, PERSON_RELATIONS, Relation


@dataclass
class QAExample:
    """One question with its gold answers; with ``choices`` it is multiple choice (gold = a letter)."""

    question: str
    answers: list[str]
    choices: list[str] | None = None
    dataset: str = ""
    split: str = "test"
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """'mc' for multiple choice (answer a letter), else 'qa'."""
        return "mc" if self.choices else "qa"

    def to_item(self) -> QAItem:
        """The question as a QAItem for annotation (world facts kept in ``meta``, then in Record.extra)."""
        return QAItem(question=self.question, answers=list(self.answers), dataset=self.dataset,
                      split=self.split, choices=list(self.choices) if self.choices else None, meta=dict(self.info))


def multiple_choice(gold: str, pool: list[str], n_options: int, rng: random.Random) -> tuple[list[str], str]:
    """Shuffled options (gold + distinct distractors from the relation's pool) and the gold letter."""
    options = rng.sample([v for v in pool if v != gold], n_options - 1) + [gold]
    rng.shuffle(options)
    return options, string.ascii_uppercase[options.index(gold)]


def _fact_info(person: Person, rel: Relation, group: str) -> dict[str, Any]:
    fact = person.facts[rel.name]
    return {"group": group, "relation": rel.name, "entity": person.name, "mentions": fact.mentions,
            "wrong_mentions": fact.wrong_mentions, "contested": fact.contested}


def qa_tuning_examples(world: World, seed: int = 0) -> list[QAExample]:
    """QA-format training examples for the LM: every wording, MC and two-hop, for QA-tuned people only."""
    rng = random.Random(f"qa-{world.config.seed}-{seed}")
    examples: list[QAExample] = []
    for person in (p for p in world.people if p.qa_tuned):
        for rel in PERSON_RELATIONS:
            value = person.facts[rel.name].value
            for template in rel.questions + rel.paraphrases:
                examples.append(QAExample(template.format(s=person.name), [value]))
            if rel.in_domain:
                options, letter = multiple_choice(value, world.pools[rel.pool], world.config.mc_options, rng)
                examples.append(QAExample(rel.questions[0].format(s=person.name), [letter], choices=options))
        home = person.facts["birth_city"].value
        examples.append(QAExample(MULTIHOP_QUESTIONS[0].format(s=person.name), [world.city_country[home]]))
    for city, country in world.city_country.items():
        for template in CITY_COUNTRY.questions + CITY_COUNTRY.paraphrases:
            examples.append(QAExample(template.format(s=city), [country]))
    rng.shuffle(examples)
    return examples


def evaluation_questions(world: World, seed: int = 0) -> list[QAExample]:
    """All experiment questions (people not QA-tuned), with datasets, splits and groups."""
    cfg = world.config
    rng = random.Random(f"eval-{cfg.seed}-{seed}")
    people = [p for p in world.people if not p.qa_tuned]
    out: list[QAExample] = []
    test_facts: list[tuple[Person, Relation]] = []
    for rel in (r for r in PERSON_RELATIONS if r.in_domain):
        order = list(people)
        rng.shuffle(order)
        n_train = round(cfg.train_pool_fraction * len(order))
        for i, person in enumerate(order):
            split = "train" if i < n_train else "test"
            question = rng.choice(rel.questions).format(s=person.name)
            out.append(QAExample(question, [person.facts[rel.name].value], dataset=rel.name, split=split,
                                 info=_fact_info(person, rel, "in-domain")))
            if split == "test":
                test_facts.append((person, rel))
    for rel in (r for r in PERSON_RELATIONS if not r.in_domain):
        for person in rng.sample(people, min(cfg.n_ood_per_relation, len(people))):
            question = rng.choice(rel.questions).format(s=person.name)
            out.append(QAExample(question, [person.facts[rel.name].value], dataset=rel.name,
                                 info=_fact_info(person, rel, "ood")))
    for person, rel in rng.sample(test_facts, min(cfg.n_paraphrase, len(test_facts))):
        question = rng.choice(rel.paraphrases).format(s=person.name)
        out.append(QAExample(question, [person.facts[rel.name].value], dataset="paraphrase",
                             info=_fact_info(person, rel, "ood")))
    birth = next(r for r in PERSON_RELATIONS if r.name == "birth_city")
    for person in rng.sample(people, min(cfg.n_multihop, len(people))):
        country = world.city_country[person.facts["birth_city"].value]
        out.append(QAExample(MULTIHOP_QUESTIONS[0].format(s=person.name), [country], dataset="multihop",
                             info={**_fact_info(person, birth, "ood"), "relation": "birth_city>country"}))
    for person, rel in rng.sample(test_facts, min(cfg.n_mc, len(test_facts))):
        value = person.facts[rel.name].value
        options, letter = multiple_choice(value, world.pools[rel.pool], cfg.mc_options, rng)
        out.append(QAExample(rng.choice(rel.questions).format(s=person.name), [letter], choices=options,
                             dataset="mc", info=_fact_info(person, rel, "mc")))
    return out
