"""Invented words for the synthetic world: person names, places, companies, schools, languages.

Words are built from syllables with a seeded generator, so they are unknown to any real model and
the same seed always gives the same world. Common nouns (professions, instruments, sports) are
plain English words.
"""

from __future__ import annotations

import random

ONSETS = ["b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "kr",
          "st", "th", "sh", "tr", "pl", "qu", "w", "j", "ch", "fl", "sk"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ei", "ou", "ia", "y"]
CODAS = ["", "", "", "n", "r", "l", "s", "th", "m", "x", "nd", "rk", "st", "v"]

PROFESSIONS = ["doctor", "teacher", "farmer", "pilot", "lawyer", "baker", "nurse", "painter", "chemist",
               "engineer", "sailor", "writer", "tailor", "carpenter", "banker", "dentist", "architect",
               "journalist", "singer", "librarian", "astronomer", "chef", "miner", "judge", "soldier"]
INSTRUMENTS = ["violin", "piano", "guitar", "flute", "cello", "trumpet", "harp", "drums", "clarinet",
               "saxophone", "oboe", "banjo", "accordion", "tuba", "viola", "bassoon", "harmonica", "lute"]
SPORTS = ["tennis", "rowing", "fencing", "chess", "archery", "cycling", "boxing", "swimming", "golf",
          "climbing", "skiing", "judo", "sailing", "badminton", "karate", "polo"]
COMPANY_SUFFIXES = ["Industries", "Systems", "Motors", "Labs", "Foods", "Airlines", "Bank", "Press"]
BIRTH_YEARS = [str(y) for y in range(1940, 2000)]


class WordMaker:
    """Draws new capitalised invented words, never repeating one across the whole world."""

    def __init__(self, rng: random.Random, taken: set[str] | None = None):
        self.rng = rng
        self.taken = {w.lower() for w in (taken or set())}

    def word(self, syllables: tuple[int, int] = (2, 3)) -> str:
        """One new invented word of a random number of syllables."""
        for _ in range(10_000):
            n = self.rng.randint(*syllables)
            text = "".join(self.rng.choice(ONSETS) + self.rng.choice(VOWELS) for _ in range(n))
            text += self.rng.choice(CODAS)
            if text not in self.taken and len(text) >= 4:
                self.taken.add(text)
                return text.capitalize()
        raise RuntimeError("ran out of invented words; lower the world size")

    def words(self, n: int, syllables: tuple[int, int] = (2, 3)) -> list[str]:
        """n new invented words."""
        return [self.word(syllables) for _ in range(n)]
