"""`--max-cost USD`: nothing overspent.

The run dir's spend is the sum of `cost` over every model call in profile.jsonl (every attempt and
resume; a call is priced from the topology's `pricing` when it is made: client/pricing.py) plus the
calls of this run as they come back. With a limit:

- a run dir that has spent more than the limit already exits 5 at once (SpendLimit), saying what was
  spent, before anything is probed or run;
- once the spend passes it mid-run, no new task starts (those in flight finish and are kept), and the
  eval exits 5; the supervisor of a detached run does not restart it (state `stopped`);
- the limit is remembered by the run dir (run.json `max_cost`): a resume without --max-cost keeps it,
  one with a higher limit goes on.

A limit on a run none of whose models is priced could never act: that is bad input (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestra_ops.client.chat import CallEvent
from orchestra_ops.client.pricing import format_usd
from orchestra_ops.client.routing import Target
from orchestra_ops.errors import ConfigError, SpendLimit
from orchestra_ops.runner.engine import Controller
from orchestra_ops.runner.profile import PROFILE_FILE
from orchestra_ops.runner.rundir import read_run_info, write_run_info

RUN_KEY = "max_cost"


def spent_in(run_dir: Path) -> tuple[float, int]:
    """(USD, priced calls) over every model call profile.jsonl holds (a torn or unreadable line counts 0)."""
    total, calls = 0.0, 0
    try:
        handle = open(run_dir / PROFILE_FILE, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return 0.0, 0
    with handle:
        for raw in handle:
            if b'"cost"' not in raw:
                continue
            try:
                cost = json.loads(raw).get("cost")
            except (ValueError, AttributeError):
                continue
            if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                total += float(cost)
                calls += 1
    return total, calls


@dataclass
class SpendMeter:
    run_dir: Path
    limit: float | None
    spent: float = 0.0

    @classmethod
    def start(cls, run_dir: Path, given: float | None, *, continuing: bool, targets: Sequence[Target]) -> SpendMeter:
        """The limit (given, else the run dir's when continuing), checked before anything runs; see the module doc."""
        recorded = (read_run_info(run_dir) or {}).get(RUN_KEY) if continuing else None
        limit = given if given is not None else recorded if isinstance(recorded, (int, float)) else None
        spent, calls = spent_in(run_dir)
        meter = cls(run_dir, None if limit is None else float(limit), spent)
        if meter.limit is None:
            return meter
        if not any(t.price is not None for t in targets):
            names = ", ".join(sorted({t.name for t in targets})) or "none"
            raise ConfigError(f"--max-cost {format_usd(meter.limit)}: no model this run calls has `pricing:` in its "
                              f"topology ({names}), so no call can be priced; add `pricing: {{input_per_mtok: USD, "
                              "output_per_mtok: USD}` to the model or provider, or drop --max-cost")
        if spent > meter.limit:
            raise SpendLimit(f"{run_dir} has spent {format_usd(spent)} ({calls} priced call(s) over every attempt, "
                             f"profile.jsonl), more than --max-cost {format_usd(meter.limit)}; nothing was run; "
                             "give a higher --max-cost to go on")
        if given is not None:
            write_run_info(run_dir, {RUN_KEY: meter.limit})
        return meter

    def describe(self) -> str:
        return f"spend limit {format_usd(self.limit)}: {format_usd(self.spent)} spent in this run dir so far"

    def note(self, event: CallEvent, controller: Controller) -> None:
        """Every model call's event: add its cost; past the limit, the run takes no more tasks."""
        if not event.cost_usd:
            return
        self.spent += event.cost_usd
        if self.limit is not None and self.spent > self.limit and controller.halted is None:
            why = f"the run dir's spend passed --max-cost {format_usd(self.limit)}: {format_usd(self.spent)} spent"
            controller.halt(SpendLimit(f"{why} (every call of every attempt); no new task was started, those in "
                                       "flight finished; continue with a higher --max-cost and --resume (run dir "
                                       f"{self.run_dir})"), why)
