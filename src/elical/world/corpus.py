"""The pretraining corpus of the synthetic world: each fact stated as often as the world says.

A fact with ``mentions = n`` appears n times, each time in a randomly chosen wording; a contested
fact also appears ``wrong_mentions`` times with its wrong value; any statement is replaced by a
random wrong value with probability ``statement_noise``. City-country facts are stated
``city_mentions`` times each (they are the first hop of the multi-hop questions).
"""

from __future__ import annotations

import random

from elical.world.generate import World
from elical.world.relations import CITY_COUNTRY, PERSON_RELATIONS


def corpus_sentences(world: World, seed: int = 0) -> list[str]:
    """Every corpus statement of the world, shuffled (deterministic for a seed)."""
    cfg = world.config
    rng = random.Random(f"corpus-{cfg.seed}-{seed}")
    sentences: list[str] = []
    for person in world.people:
        for rel in PERSON_RELATIONS:
            fact = person.facts[rel.name]
            pool = world.pools[rel.pool]
            stated = [fact.value] * fact.mentions + [fact.wrong_value] * fact.wrong_mentions  # type: ignore[list-item]
            for value in stated:
                if rng.random() < cfg.statement_noise:
                    value = rng.choice(pool)
                sentences.append(rng.choice(rel.statements).format(s=person.name, o=value))
    for city, country in world.city_country.items():
        for _ in range(cfg.city_mentions):
            sentences.append(rng.choice(CITY_COUNTRY.statements).format(s=city, o=country))
    rng.shuffle(sentences)
    return sentences
