"""What `ops eval` says at its start and its end, as lines for the tee (console + eval.log).

The start: a banner of at most 6 lines on the console (the suite and its samples, the models called, the
run dir, and any alert such as code running without the sandbox's isolation); the routing table, tool
aliases, budgets, sandbox and limits go to eval.log, and to the console with `-v` (TeeLog.detail).
The end: one result line, the score of each model ± its 95 % interval, n, wall time, calls, tokens, the cost
where scores.json has one, and the run dir.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.client.pricing import format_usd
from orchestra_ops.client.routing import Routing, Target
from orchestra_ops.core.headline import cost_of, stored_headline
from orchestra_ops.runner.progress import format_wall

BANNER_LINES = 6


@dataclass(frozen=True)
class RunFacts:
    """What the banner says about a run about to start."""

    suite: str
    topology: str
    run_dir: Path
    samples: int
    todo: int
    ok_before: int
    failed_before: int
    mode: str  # new run | resume | retry-failed


def banner(facts: RunFacts, routing: Routing, names: Sequence[str], *, verbose: bool) -> list[str]:
    """The start banner (3 lines; alerts from the suite come on top of it, up to BANNER_LINES)."""
    before = (f"; {facts.ok_before} ok and {facts.failed_before} failed before" if facts.mode != "new run" else "")
    hint = "" if verbose else "; -v shows the routing, aliases, budgets and sandbox"
    return [f"ops eval {facts.suite} on {facts.topology}: {facts.samples} samples, {facts.todo} to run "
            f"({facts.mode}{before})",
            f"models called: {models_called(routing, names)}",
            f"run dir {facts.run_dir} (every line also in eval.log{hint})"]


def models_called(routing: Routing, names: Sequence[str]) -> str:
    """`orchestrator [2 replicas]; answer as search, reasoner [2 replicas]; judge (external)`: each target the
    run calls once, with the roles that reach it under another name."""
    by_target: dict[str, tuple[Target, list[str]]] = {}
    for name in names:
        _, target = routing.resolve(name)
        entry = by_target.setdefault(target.name, (target, []))
        if name != target.name:
            entry[1].append(name)
    parts = []
    for key, (target, aliases) in by_target.items():
        label = key + (f" as {', '.join(aliases)}" if aliases else "")
        parts.append(f"{label} [{_where(target)}]")
    return "; ".join(parts) or "none"


def _where(target: Target) -> str:
    if target.kind == "provider":
        return f"external {target.served_name}"
    count = len(target.addresses)
    what = f"{count} replica{'' if count == 1 else 's'}"
    return f"adapter on {target.adapter_of}, {what}" if target.adapter_of else what


def routing_lines(routing: Routing, names: Sequence[str]) -> Iterator[str]:
    """The whole routing table: every role, where it goes, which ones this run calls (`*`)."""
    yield f"routing ({routing.source}):"
    rows = routing.table()
    width = max([len(r[0]) for r in rows] + [4])
    for role, label, kind, where in rows:
        mark = " *" if role in names else ""
        yield f"  {role:<{width}} -> {label} [{kind}] -> {where}{mark}"
    for name in names:
        if name not in routing.roles:
            _, target = routing.resolve(name)
            yield f"  {name:<{width}} -> {target.name} [{target.kind}] -> {target.where} *"
    yield "  (* called by this run; nothing else is contacted)"


def result_line(suite: str, scores: Mapping[str, Any] | None, *, ok: int, failed: int, total: int,
                wall_s: float, calls: int, tokens: int, run_dir: Path) -> str:
    """`hle: accuracy: orchestrator 80.0% ± 24.8 (n=10) · 10/10 ok · 4.2 s · 52 calls · 31,204 tokens · RUN_DIR`"""
    headline = stored_headline(scores)
    parts = [f"{suite}: {headline.text() if headline is not None else 'no score'}",
             f"{ok}/{total} ok" + (f", {failed} failed (--retry-failed reruns them)" if failed else ""),
             format_wall(wall_s), f"{calls:,} calls", f"{tokens:,} tokens"]
    cost = cost_of(scores)
    if cost is not None:
        parts.append(format_usd(cost))
    parts.append(str(run_dir))
    return " · ".join(parts)
