"""Secrets never reach a file or the console: the one redaction choke point of orchestra-ops.

A run installs a Redactor at its start (`install(Redactor.from_env(routing.secret_variables()))`) holding
the value of every `api_key_env` variable its routing declares; every writer of what ops stores or prints
(results.jsonl, profile.jsonl, eval.log and the console, trajectories, every atomic file write:
run.json, scores.json, analysis, exports; the CLI's error line) passes its text through `redact()`.
Values shorter than MIN_SECRET_LEN are not redacted (they would blank out ordinary words).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping

MIN_SECRET_LEN = 8


class Redactor:
    """Replace each secret's value (as written, and as JSON escapes it) with `[redacted $VAR]`."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        pairs: dict[str, str] = {}
        for name, value in (secrets or {}).items():
            if len(value) < MIN_SECRET_LEN:
                continue
            for form in (value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
                pairs.setdefault(form, f"[redacted ${name}]")
        self._pairs = sorted(pairs.items(), key=lambda item: -len(item[0]))  # longest first: no partial leaks

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __call__(self, text: str) -> str:
        for secret, mark in self._pairs:
            if secret in text:
                text = text.replace(secret, mark)
        return text

    @classmethod
    def from_env(cls, variables: Iterable[str], environ: Mapping[str, str] | None = None) -> Redactor:
        env = os.environ if environ is None else environ
        return cls({name: env[name] for name in variables if env.get(name)})


_active = Redactor()


def install(redactor: Redactor) -> None:
    """Make `redactor` the one every writer of this process applies (set once, at the run's start)."""
    global _active
    _active = redactor


def redact(text: str) -> str:
    return _active(text) if _active else text
