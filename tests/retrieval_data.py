"""A generated corpus for the retrieval tests and benchmark: distinct, deterministic documents."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

NAMES = [
    "Ada",
    "Bram",
    "Chiara",
    "Dmitri",
    "Elif",
    "Farah",
    "Goran",
    "Hana",
    "Ines",
    "Jonas",
    "Keiko",
    "Lars",
    "Mira",
    "Nkechi",
    "Omar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sven",
    "Tariq",
    "Uma",
    "Viktor",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zora",
]
JOBS = [
    "astronomer",
    "baker",
    "cartographer",
    "diver",
    "engineer",
    "falconer",
    "glassblower",
    "historian",
    "illustrator",
    "jeweller",
    "knitter",
    "luthier",
    "mathematician",
    "nurse",
    "oboist",
    "potter",
    "quilter",
    "radiologist",
    "sculptor",
    "translator",
]
CITIES = [
    "Lisbon",
    "Nairobi",
    "Osaka",
    "Quito",
    "Reykjavik",
    "Tbilisi",
    "Hobart",
    "Fez",
    "Cusco",
    "Tromso",
    "Hanoi",
    "Valparaiso",
    "Bergen",
    "Kraków",
    "Mombasa",
    "Oaxaca",
    "Riga",
    "Sapporo",
]
THINGS = [
    "antique maps",
    "jazz records",
    "seashells",
    "vintage cameras",
    "rare orchids",
    "chess sets",
    "meteorites",
    "tin robots",
    "old postcards",
    "fountain pens",
    "kites",
    "pocket watches",
    "botanical prints",
    "typewriters",
    "bonsai trees",
    "film posters",
]
SPORTS = [
    "badminton",
    "curling",
    "fencing",
    "rowing",
    "water polo",
    "squash",
    "archery",
    "handball",
    "table tennis",
    "lacrosse",
    "judo",
    "cricket",
]


def make_corpus(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """`count` distinct documents {"id", "content", "title"}; ids are "doc-00000", …"""
    rng = random.Random(seed)
    combos: set[tuple[str, ...]] = set()
    docs: list[dict[str, Any]] = []
    while len(docs) < count:
        combo = (
            rng.choice(NAMES),
            rng.choice(JOBS),
            rng.choice(CITIES),
            rng.choice(THINGS),
            rng.choice(SPORTS),
            str(rng.randrange(1900, 2030)),
        )
        if combo in combos:
            continue
        combos.add(combo)
        name, job, city, thing, sport, year = combo
        doc_id = f"doc-{len(docs):05d}"
        content = f"{name} is a {job} from {city}, born in {year}, who collects {thing} and plays {sport} on weekends."
        docs.append({"id": doc_id, "content": content, "title": f"{name} of {city}"})
    return docs


def write_corpus(path: Path, count: int, seed: int = 7) -> list[dict[str, Any]]:
    docs = make_corpus(count, seed)
    path.write_text("".join(json.dumps(doc, ensure_ascii=False) + "\n" for doc in docs), encoding="utf-8")
    return docs
