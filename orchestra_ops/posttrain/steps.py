"""The fleet and adapter steps of `ops posttrain` (gate.py), each within what is left of `--timeout`.

    _bring_up    `ops up` (its readiness wait bounded), or the fleet as it is when it is up already
    _load        the adapter into every replica, all or none (lora/runtime.py: adopted where it is served
                 from the same directory already, rolled back on a refusal, a time-out or a signal)
    _unload      the adapter out again (at least UNLOAD_GRACE_S, so a run at its limit leaves nothing loaded)
    _bring_down  `ops down` (`--down`)

A step that fails because the limit passed is RunTimeout (exit 124; the same call again continues).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestra_ops.errors import LaunchError, OpsError, RunTimeout

if TYPE_CHECKING:
    from orchestra_ops.posttrain.options import PosttrainOptions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deadline:
    """--timeout for the whole call: every step (up, load, eval, unload) gets what is left of it."""

    timeout_s: float | None
    started: float

    def left(self, cap: float | None = None, floor: float = 0.001) -> float | None:
        """Seconds left (at most `cap`, at least `floor`); None: no limit and no cap."""
        if self.timeout_s is None:
            return cap
        left = max(self.timeout_s - (time.monotonic() - self.started), floor)
        return left if cap is None else min(left, cap)

    def passed(self) -> bool:
        return self.timeout_s is not None and time.monotonic() - self.started >= self.timeout_s

    def exceeded(self, step: str, exc: OpsError) -> RunTimeout:
        return RunTimeout(f"--timeout {self.timeout_s:g} s: reached while {step}: {exc}\nthe same call again "
                          "continues")


UNLOAD_GRACE_S = 10.0  # the unload after the eval gets at least this long, so a run at its limit leaves nothing loaded


def bring_up(options: PosttrainOptions, topology: str, console: Callable[[str], None] | None,
              limit: Deadline) -> None:
    """`ops up` within the limit; a fleet that is up already (a rerun after a time-out without --down) is used
    as it is."""
    from orchestra_ops.core.paths import state_path
    from orchestra_ops.fleet import lifecycle
    from orchestra_ops.fleet.state import read_state

    if state_path(topology).is_file() and read_state(topology).status == "up":
        if console:
            console(f"fleet '{topology}' is up already; using it")
        return
    try:
        result = lifecycle.up(options.topology, lifecycle.UpOptions(replace=False, timeout_s=limit.left()))
    except OpsError as exc:
        if limit.passed():
            raise limit.exceeded("bringing the fleet up (`ops up`)", exc) from None
        raise
    if console:
        console(f"fleet '{result.state.name}' is up ({result.endpoints_file})")


def bring_down(topology: str) -> None:
    from orchestra_ops.fleet import teardown

    try:
        teardown.down(topology)
    except OpsError as exc:  # the verdict (or the first error) matters more; say it and move on
        log.warning("ops down %s: %s", topology, exc)


def load(name: str, adapter_dir: Path, options: PosttrainOptions, topology: str,
          console: Callable[[str], None] | None, limit: Deadline) -> None:
    """Load the adapter everywhere (all or none) within the limit; replicas that serve it from the same dir
    already (an earlier call) are adopted (lora/runtime.py). A signal rolls the load back (exit 130)."""
    from orchestra_ops.fleet.lora.runtime import load_adapter

    timeout = limit.left(options.load_timeout_s)
    assert timeout is not None
    if console:
        console(f"loading '{name}' from {adapter_dir} into every replica of {options.model} (at most {timeout:.0f} s)")
    try:
        report = load_adapter(name, str(adapter_dir), model=options.model, topology=topology, timeout_s=timeout)
    except LaunchError as exc:
        if limit.passed():
            raise limit.exceeded(f"loading '{name}'", exc) from None
        raise
    if console:
        adopted = sum(1 for o in report.outcomes if o.status is None)
        console(f"'{name}' is served by {len(report.outcomes)} replica(s) of {report.model}"
                + (f" ({adopted} already served it from the same dir)" if adopted else ""))


def unload(name: str, topology: str, console: Callable[[str], None] | None, limit: Deadline) -> None:
    """Unload within what is left of the limit, but at least UNLOAD_GRACE_S; a failure is a warning."""
    from orchestra_ops.fleet.lora.runtime import unload_adapter

    timeout = limit.left(60.0, floor=UNLOAD_GRACE_S)
    assert timeout is not None
    try:
        unload_adapter(name, topology=topology, timeout_s=timeout)
    except OpsError as exc:
        log.warning("unloading '%s': %s", name, exc)
        return
    if console:
        console(f"'{name}' unloaded")
