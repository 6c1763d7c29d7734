"""Prompt templates are data: text files a suite ships and a user may replace byte for byte.

A suite names its templates and their packaged files (`Suite.template_files`, paths the suite
resolves itself: evals/bundled.py); `--template NAME=PATH` replaces one with a file of the user's.
Each loaded Template carries the sha256 of its exact bytes, which the run records, so two runs can
be proven to have asked the same questions.

Placeholders are the ones the published texts use, so a published text drops in unchanged:
`{name}` (str.format style, as the HLE judge and ToolOrchestra prompts) or `<<name>>` (as
HealthBench's grader). `render` replaces only the placeholders it is given, in one pass (a value
that itself contains `{x}` is never expanded again), and leaves every other brace alone.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestra_ops.errors import ConfigError


@dataclass(frozen=True)
class Template:
    name: str
    text: str
    source: str  # the file it was read from
    sha256: str  # of the file's bytes

    def placeholders(self, names: Iterable[str]) -> list[str]:
        """Which of `names` occur in the text as `{name}` or `<<name>>`."""
        return [n for n in names if f"{{{n}}}" in self.text or f"<<{n}>>" in self.text]

    def render(self, **values: object) -> str:
        if not values:
            return self.text
        keys = "|".join(re.escape(k) for k in sorted(values, key=len, reverse=True))
        pattern = re.compile(r"\{(" + keys + r")\}|<<(" + keys + r")>>")
        return pattern.sub(lambda m: str(values[m.group(1) or m.group(2)]), self.text)

    def to_json(self) -> dict[str, str]:
        return {"source": self.source, "sha256": self.sha256}


def read_template(name: str, path: str | Path, required: Sequence[str] = ()) -> Template:
    """Read one template; a missing file or a missing placeholder is a ConfigError naming both."""
    source = Path(path)
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"template '{name}': {source}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"template '{name}': {source}: cannot read: {exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"template '{name}': {source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    template = Template(name=name, text=text, source=str(source), sha256=hashlib.sha256(data).hexdigest())
    missing = [p for p in required if p not in template.placeholders([p])]
    if missing:
        shown = ", ".join(f"{{{p}}}" for p in missing)
        raise ConfigError(f"template '{name}': {source}: has no placeholder {shown} (write it as {{name}} "
                          "or <<name>>)")
    return template


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """`--template NAME=PATH` values -> {NAME: PATH}; a malformed item is a ConfigError."""
    overrides: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ConfigError(f"--template {item!r}: expected NAME=PATH (e.g. grader=./my_grader.txt)")
        if name.strip() in overrides:
            raise ConfigError(f"--template {name.strip()} is given twice")
        overrides[name.strip()] = path.strip()
    return overrides


def load_templates(files: Mapping[str, str], overrides: Mapping[str, str],
                   required: Mapping[str, Sequence[str]] | None = None) -> dict[str, Template]:
    """Every template of a suite: the packaged file, or the user's file for the names overridden."""
    unknown = sorted(set(overrides) - set(files))
    if unknown:
        known = ", ".join(sorted(files)) or "none (this suite has no templates)"
        raise ConfigError(f"--template {unknown[0]}: no such template; this suite's templates: {known}")
    needs = required or {}
    return {name: read_template(name, overrides.get(name, path), needs.get(name, ()))
            for name, path in files.items()}
