"""Is the fleet back? The supervisor's probe of the models a run found down (runner/fleetwatch.py).

The routing is loaded as the eval loads it, from the eval's own arguments (`--topology`,
`--model-config`, else the latest topology that is up), so a fleet that `ops up` brought back, even
at other addresses, is found; a topology that is down, or has no endpoints file, is not back yet. A
model is back when one of its replicas answers `GET /v1/models` with 200 (the preflight's probe,
runner/preflight.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from orchestra_ops.client.sources import load_routing
from orchestra_ops.errors import OpsError
from orchestra_ops.runner.preflight import probe_targets


@dataclass(frozen=True)
class FleetAnswer:
    back: bool
    detail: str  # what answers, or what is still down and why


def option_value(args: Sequence[str], flag: str) -> str | None:
    """The value of `flag` in an argument list (`--flag VALUE` or `--flag=VALUE`; the last one wins)."""
    value = None
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith(f"{flag}="):
            value = arg.split("=", 1)[1]
    return value


def probe_fleet(eval_args: Sequence[str], models: Sequence[str]) -> FleetAnswer:
    """Probe every replica of `models` (target names), routed as the eval with `eval_args` would route them."""
    try:
        routing = load_routing(option_value(eval_args, "--topology"), option_value(eval_args, "--model-config"))
        targets = [routing.chat_target(model) for model in models]
    except OpsError as exc:  # the topology is down, its endpoints file gone, a model without replicas
        return FleetAnswer(False, str(exc).splitlines()[0])
    probes = asyncio.run(probe_targets(targets))
    down = [name for name, row in probes.items() if not any(p.ok for p in row)]
    if down:
        return FleetAnswer(False, "; ".join(
            f"{name}: " + (", ".join(f"{p.address} {p.detail}" for p in probes[name]) or "no replicas")
            for name in down))
    return FleetAnswer(True, "; ".join(f"{name}: {sum(p.ok for p in row)} of {len(row)} replica(s) answer"
                                       for name, row in probes.items()))
