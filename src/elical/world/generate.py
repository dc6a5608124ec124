"""Draw a synthetic knowledge world from a seed: people, cities, facts and how often each is stated.

The world is the ground truth behind the pretraining corpus (``corpus.py``) and the questions
(``questions.py``). Everything is a pure function of :class:`~elical.world.config.WorldConfig`.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import asdict, dataclass, field
from typing import Any

from elical.world.config import WorldConfig
from elical.world.relations import PERSON_RELATIONS
from elical.world.vocab import (
    BIRTH_YEARS,
    COMPANY_SUFFIXES,
    INSTRUMENTS,
    PROFESSIONS,
    SPORTS,
    WordMaker,
)


@dataclass
class Fact:
    """One (subject, relation) fact and its exposure in the corpus."""

    value: str
    mentions: int
    wrong_value: str | None = None
    wrong_mentions: int = 0

    @property
    def contested(self) -> bool:
        """The corpus states a wrong value more often than the right one."""
        return self.wrong_value is not None and self.wrong_mentions > self.mentions


@dataclass
class Person:
    """A person of the world with one fact per person relation."""

    name: str
    popularity: float
    qa_tuned: bool
    facts: dict[str, Fact] = field(default_factory=dict)


@dataclass
class World:
    """Everything the corpus and the questions are made from."""

    config: WorldConfig
    pools: dict[str, list[str]]
    city_country: dict[str, str]
    people: list[Person]

    def fingerprint(self) -> str:
        """A short hash of the world's content (to check a checkpoint was trained on this world)."""
        return hashlib.sha1(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        """The world as plain JSON-able data."""
        return {
            "config": self.config.model_dump(),
            "pools": self.pools,
            "city_country": self.city_country,
            "people": [asdict(p) for p in self.people],
        }

    def exposure_table(self) -> list[dict[str, Any]]:
        """One row per person fact: relation, mentions of the right and wrong value, contested flag."""
        return [
            {"person": p.name, "relation": rel, "mentions": f.mentions, "wrong_mentions": f.wrong_mentions,
             "contested": f.contested, "qa_tuned": p.qa_tuned}
            for p in self.people
            for rel, f in p.facts.items()
        ]


def _zipf_weights(n: int, exponent: float = 0.8) -> list[float]:
    return [1.0 / (rank + 2) ** exponent for rank in range(n)]


def _poisson(rng: random.Random, lam: float) -> int:
    """Knuth's Poisson sampler (small lambdas only)."""
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def make_pools(cfg: WorldConfig, rng: random.Random) -> tuple[dict[str, list[str]], WordMaker]:
    """The value pools of every relation (invented names where real ones would leak prior knowledge)."""
    words = WordMaker(rng, taken=set(PROFESSIONS + INSTRUMENTS + SPORTS + COMPANY_SUFFIXES))
    pools = {
        "countries": words.words(cfg.n_countries, (2, 2)),
        "cities": words.words(cfg.n_cities),
        "professions": list(PROFESSIONS),
        "companies": [f"{w} {rng.choice(COMPANY_SUFFIXES)}" for w in words.words(40, (2, 2))],
        "instruments": list(INSTRUMENTS),
        "years": list(BIRTH_YEARS),
        "universities": [f"{w} University" for w in words.words(30, (2, 2))],
        "languages": words.words(20, (2, 2)),
        "sports": list(SPORTS),
    }
    return pools, words


def generate_world(cfg: WorldConfig | None = None) -> World:
    """Draw the whole world from ``cfg.seed``: the same config always gives the same world."""
    cfg = cfg or WorldConfig()
    unknown = sorted((set(cfg.salience) | set(cfg.contested)) - {r.name for r in PERSON_RELATIONS})
    if unknown:
        raise ValueError(f"world.salience/contested name unknown relation(s) {unknown}")
    rng = random.Random(cfg.seed)
    pools, words = make_pools(cfg, rng)
    city_country = {c: rng.choice(pools["countries"]) for c in pools["cities"]}
    first_names, last_names = words.words(max(60, cfg.n_people // 3)), words.words(max(80, cfg.n_people // 2))
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < cfg.n_people:
        name = f"{rng.choice(first_names)} {rng.choice(last_names)}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    # a skewed prior over values: some values are far more common, as in real data
    priors = {pool: _zipf_weights(len(values)) for pool, values in pools.items()}
    for values in pools.values():
        rng.shuffle(values)
    n_qa = round(cfg.qa_fraction * cfg.n_people)
    people: list[Person] = []
    for index, name in enumerate(names):
        popularity = math.exp(rng.gauss(cfg.popularity_mu, cfg.popularity_sigma))
        person = Person(name=name, popularity=popularity, qa_tuned=index < n_qa)
        for rel in PERSON_RELATIONS:
            values = pools[rel.pool]
            value = rng.choices(values, weights=priors[rel.pool])[0]
            lam = popularity * cfg.salience.get(rel.name, 1.0)
            mentions = min(cfg.max_mentions, _poisson(rng, min(lam, 60.0)))
            fact = Fact(value=value, mentions=mentions)
            if rng.random() < cfg.contested.get(rel.name, 0.0):
                fact.wrong_value = rng.choice([v for v in values if v != value])
                lo, hi = cfg.contested_wrong_ratio
                fact.wrong_mentions = max(2, round(max(mentions, 1) * rng.uniform(lo, hi)))
            person.facts[rel.name] = fact
        people.append(person)
    rng.shuffle(people)
    return World(config=cfg, pools=pools, city_country=city_country, people=people)
