"""Relations of the synthetic world: what they link, and how the corpus and the questions phrase them.

``{s}`` is the subject (a person, or a city for ``country``), ``{o}`` the value. Statements are the
corpus wordings (several per relation, as knowledge is stated in varied ways); ``questions`` are the
in-domain question templates; ``paraphrases`` are question wordings kept out of calibration training
(the OOD paraphrase split). OOD relations never appear in the calibration training pool.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Relation:
    """One relation: its value pool, whether it is in-domain, and its wordings."""

    name: str
    pool: str
    in_domain: bool
    statements: tuple[str, ...]
    questions: tuple[str, ...]
    paraphrases: tuple[str, ...]


PERSON_RELATIONS: tuple[Relation, ...] = (
    Relation(
        "birth_city", "cities", True,
        ("{s} was born in {o}.", "{s} is a native of {o}.", "The birthplace of {s} is {o}."),
        ("Where was {s} born?", "In which city was {s} born?"),
        ("Which city is the hometown of {s}?",),
    ),
    Relation(
        "profession", "professions", True,
        ("{s} works as a {o}.", "{s} is a {o} by profession.", "By trade, {s} is a {o}."),
        ("What is the profession of {s}?", "What does {s} do for a living?"),
        ("What job does {s} have?",),
    ),
    Relation(
        "employer", "companies", True,
        ("{s} works for {o}.", "{s} is employed by {o}.", "{o} employs {s}."),
        ("Which company does {s} work for?", "Who is the employer of {s}?"),
        ("At which firm is {s} employed?",),
    ),
    Relation(
        "instrument", "instruments", True,
        ("{s} plays the {o}.", "{s} is known for playing the {o}."),
        ("Which instrument does {s} play?",),
        ("What instrument is played by {s}?",),
    ),
    Relation(
        "birth_year", "years", True,
        ("{s} was born in the year {o}.", "In {o}, {s} was born."),
        ("In which year was {s} born?", "When was {s} born?"),
        ("What is the birth year of {s}?",),
    ),
    Relation(
        "university", "universities", True,
        ("{s} studied at {o}.", "{s} graduated from {o}."),
        ("Where did {s} study?", "Which university did {s} attend?"),
        ("From which university did {s} graduate?",),
    ),
    Relation(
        "language", "languages", False,
        ("{s} speaks {o}.", "The native language of {s} is {o}."),
        ("Which language does {s} speak?",),
        ("What is the native language of {s}?",),
    ),
    Relation(
        "sport", "sports", False,
        ("{s} practises {o}.", "In free time, {s} enjoys {o}."),
        ("Which sport does {s} practise?",),
        ("What sport does {s} enjoy?",),
    ),
)

CITY_COUNTRY = Relation(
    "country", "countries", True,
    ("{s} is a city in {o}.", "{s} lies in {o}."),
    ("In which country is {s}?",),
    ("Which country is {s} located in?",),
)
MULTIHOP_QUESTIONS: tuple[str, ...] = ("In which country was {s} born?",)


def relation(name: str) -> Relation:
    """The person relation called ``name``."""
    for rel in PERSON_RELATIONS:
        if rel.name == name:
            return rel
    raise KeyError(f"unknown relation {name!r}; expected one of {[r.name for r in PERSON_RELATIONS]}")
