"""`ops posttrain` as a call: the one a training loop makes (no CLI, no printing; our exceptions, errors.py).

    from orchestra_ops.api import posttrain
    result = posttrain(topology="fleet.yaml", model="base", adapter="ft=./out/checkpoint-200",
                       datasets="gsm8k,mmlu", max_drop=1.0, timeout_s=3600)
    if result["verdict"] == "block": ...        # or "pass", or "inconclusive" (the CLI's exit 6)

`posttrain` returns what posttrain.json holds (orchestra_ops/posttrain/ has the fields and the rule)
and raises ConfigError (bad input), LaunchError (fleet or adapter load), EvalError (units failed),
RunTimeout (the limit; calling again resumes), each an OpsError with its exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orchestra_ops.api.session import evaluate
from orchestra_ops.errors import ConfigError
from orchestra_ops.posttrain.gate import posttrain as gate
from orchestra_ops.posttrain.options import PosttrainOptions


def posttrain(*, topology: str, model: str, adapter: str, **options: Any) -> dict[str, Any]:
    """`ops posttrain` as a call; keyword arguments are PosttrainOptions' fields."""
    known = set(PosttrainOptions.__dataclass_fields__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"posttrain() got an unknown option '{unknown[0]}'; options: {', '.join(sorted(known))}")
    return run_posttrain(PosttrainOptions(topology=topology, model=model, adapter=adapter, **options))


def run_posttrain(options: PosttrainOptions, *, console: Callable[[str], None] | None = None) -> dict[str, Any]:
    """orchestra_ops/posttrain/gate.py with its eval run by the one eval session (`evaluate`); `ops posttrain`
    calls this too. `console` gets the run's log lines."""
    return gate(options, session=evaluate, console=console)


__all__ = ["PosttrainOptions", "posttrain", "run_posttrain"]
