"""`did you mean …?`: the closest of the names a place accepts to one that was mistyped."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to `word` (a typo, a missing or extra letter, a case slip), or None when none is close."""
    options = [str(choice) for choice in choices]
    by_lower = {option.lower(): option for option in options}
    if word.lower() in by_lower and by_lower[word.lower()] != word:
        return by_lower[word.lower()]
    match = difflib.get_close_matches(word, options, n=1, cutoff=0.75)
    return match[0] if match else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`; did you mean `replicas`?` for a close choice, else "" (appended to an error message)."""
    match = closest(word, choices)
    return f"; did you mean `{match}`?" if match else ""
