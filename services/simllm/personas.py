"""A persona of the simulated engine is the request's `model`: its skill (how often it is right) and the
stable hash every benchmark rule draws from (opencompass_rules.py, opencompass_more_rules.py)."""

from __future__ import annotations

import hashlib

LETTERS = "ABCD"


def h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def skill(model: str) -> int:
    return 30 + h("skill|" + model) % 60
