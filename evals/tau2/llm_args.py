"""The sampling arguments of a tau2 run's agent, user-simulator and judge calls, from its options: the defaults
of the protocol, `--agent-args` / `--user-args` (JSON objects), then the generation flags every suite takes
(`--temperature`, `--max-tokens` for the agent, `--sampling ROLE.KEY=VALUE` for agent, user and judge).
The suite sends them and `ops export --format tau2` records them, from this one function."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from orchestra_ops.evals.tau2 import toolorchestra

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.generation import apply_shorthands, explicit_keys, parse_sampling

ROLES = ("agent", "user", "judge")
JUDGE_DEFAULT = {"temperature": 0.0}


def llm_args(options: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{"agent": {…}, "user": {…}, "judge": {…}}: each role's sampling arguments for this run."""
    theirs = options.get("protocol") == "toolorchestra"
    agent = _json_object(options.get("agent_args") or json.dumps(
        toolorchestra.DEFAULT_SAMPLING if theirs else {"temperature": 0.0}), "--agent-args")
    user = _json_object(options.get("user_args") or json.dumps({"temperature": 1.0 if theirs else 0.0}),
                        "--user-args")
    items = list(options.get("sampling") or ())
    merged = parse_sampling(items, ROLES, base={"agent": agent, "user": user, "judge": JUDGE_DEFAULT})
    merged["agent"] = apply_shorthands(merged["agent"], options, explicit_keys(items, "agent"))
    return merged


def _json_object(text: Any, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else (text or {})
    except ValueError as exc:
        raise ConfigError(f"{flag} {text!r}: not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{flag} {text!r}: expected a JSON object")
    return value
