"""The generation flags every suite takes, declared once as data (SuiteOption) and read the same way:

    --temperature T            the sampling temperature of the model under evaluation
    --max-tokens N             its max_tokens
    --sampling ROLE.KEY=VALUE  any sampling parameter of any role the suite calls (where it calls several:
                               VALUE is JSON, else a string; an empty VALUE removes the key)

`--temperature` and `--max-tokens` are shorthands for `--sampling EVALUATED.temperature=T` and
`EVALUATED.max_tokens=N`; a `--sampling` of the same key wins.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.suite import SuiteOption

FLAGS = ("temperature", "max_tokens", "sampling")  # the SuiteOption names


def generation_options(roles: tuple[str, ...] = (), *, evaluated: str = "the evaluated model",
                       temperature: float | None = None, max_tokens: int | None = None) -> tuple[SuiteOption, ...]:
    """--temperature and --max-tokens (defaults: None, the suite's own), and --sampling when `roles` are several."""
    options = [
        SuiteOption("temperature", "--temperature", "float", f"Sampling temperature of {evaluated} (0: greedy).",
                    default=temperature, minimum=0.0, everyday=True),
        SuiteOption("max_tokens", "--max-tokens", "int", f"max_tokens of each request to {evaluated}.",
                    default=max_tokens, minimum=1, everyday=True),
    ]
    if len(roles) > 1:
        options.append(SuiteOption("sampling", "--sampling", "str", "ROLE.KEY=VALUE: a sampling parameter of the "
                                   f"{', '.join(roles)} calls (JSON value; empty removes it; e.g. "
                                   f"{roles[-1]}.temperature=0).", multiple=True, default=(), everyday=True))
    return tuple(options)


def parse_sampling(items: Iterable[str], roles: Iterable[str], base: Mapping[str, Mapping[str, Any]] | None = None,
                   flag: str = "--sampling") -> dict[str, dict[str, Any]]:
    """`base` (each role's parameters) with every ROLE.KEY=VALUE applied; a bad item is a ConfigError naming it."""
    known = list(roles)
    merged: dict[str, dict[str, Any]] = {role: dict((base or {}).get(role, {})) for role in known}
    for item in items:
        target, sep, raw = str(item).partition("=")
        role, dot, key = target.strip().partition(".")
        if not sep or not dot or role not in merged or not key:
            raise ConfigError(f"{flag} {item!r}: expected ROLE.KEY=VALUE with ROLE one of {', '.join(known)} "
                              f"(e.g. {known[-1]}.temperature=0)")
        if raw == "":
            merged[role].pop(key, None)
            continue
        try:
            merged[role][key] = json.loads(raw)
        except ValueError:
            merged[role][key] = raw
    return merged


def apply_shorthands(params: Mapping[str, Any], options: Mapping[str, Any],
                     explicit: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`params` of the evaluated model with --temperature/--max-tokens applied, unless `explicit` (what
    --sampling set for it) has the same key."""
    out = dict(params)
    for key in ("temperature", "max_tokens"):
        value = options.get(key)
        if value is not None and key not in (explicit or {}):
            out[key] = value
    return out


def explicit_keys(items: Iterable[str], role: str) -> dict[str, Any]:
    """The keys `--sampling ROLE.KEY=…` sets for `role` (so a shorthand does not override them)."""
    keys: dict[str, Any] = {}
    for item in items:
        target = str(item).partition("=")[0].strip()
        name, _, key = target.partition(".")
        if name == role and key:
            keys[key] = True
    return keys
