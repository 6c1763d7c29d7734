"""Where a run's calls went and what the replicas' prefix caches made of them, per model.

From profile.jsonl (runner/replica_counters.py):

- calls per replica: the model calls each replica answered or failed (response-cache hits are
  no calls), with max / mean over the model's replicas (those the counters were read from, or
  else those that got calls);
- moves: the sessions that moved to another replica, by reason (ejected, over_bound, at_cap);
- prefix cache: the replicas' own counters (vLLM's `vllm:prefix_cache_hits_total` /
  `..._queries_total`, prompt tokens) between the start and end reading of each `ops eval` on the
  run dir; hit rate = hits / queries summed over the model's replicas. A replica that restarted in
  between counts from its restart, and one that finished more requests than the run's answered
  calls to it served someone else too: each is named in `notes`, never folded in silently.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from orchestra_ops.fleet.prefix_counters import PrefixCounters, window
from orchestra_ops.runner.profile_reader import ModelCall, Profile


def placement(profile: Profile) -> dict[str, Any]:
    """model -> {replicas, calls: {per_replica, max, mean, max_over_mean}, moves: {total, by_reason},
    prefix_cache: {hits, queries, hit_rate, windows, notes} (None without counter readings)}."""
    calls = [c for c in profile.model_calls if not c.cached and c.replica is not None]
    read: dict[str, set[str]] = defaultdict(set)
    for reading in profile.counters:
        read[reading["model"]].add(reading["replica"])
    models = sorted({c.model for c in calls} | set(read) | {str(m["model"]) for m in profile.moves})
    out: dict[str, Any] = {}
    for model in models:
        own = [c for c in calls if c.model == model]
        per_replica = Counter(str(c.replica) for c in own)
        replicas = sorted(read.get(model) or set(per_replica))
        counts = [per_replica.get(r, 0) for r in replicas] + [n for r, n in per_replica.items() if r not in replicas]
        mean = sum(counts) / len(counts) if counts else 0.0
        moves = Counter(str(m["reason"]) for m in profile.moves if m["model"] == model)
        out[model] = {
            "replicas": len(counts),
            "calls": {"per_replica": dict(sorted(per_replica.items())), "max": max(counts, default=0),
                      "mean": mean, "max_over_mean": max(counts) / mean if mean > 0 else None},
            "moves": {"total": sum(moves.values()), "by_reason": dict(sorted(moves.items()))},
            "prefix_cache": _prefix_cache([r for r in profile.counters if r["model"] == model], own),
        }
    return out


def _prefix_cache(readings: list[dict[str, Any]], calls: list[ModelCall]) -> dict[str, Any] | None:
    """The counters between each start reading and the next end reading of the same replica."""
    if not readings:
        return None
    hits = queries = 0.0
    windows = 0
    notes: list[str] = []
    open_starts: dict[str, dict[str, Any]] = {}
    for reading in readings:
        replica = reading["replica"]
        if reading.get("error"):
            notes.append(f"{replica}: its counters could not be read at the {reading['phase']} ({reading['error']})")
            open_starts.pop(replica, None)
            continue
        if reading["phase"] == "start":
            if replica in open_starts:
                notes.append(f"{replica}: a run stopped without its end reading; that run's counts are left out")
            open_starts[replica] = reading
            continue
        start = open_starts.pop(replica, None)
        first, last = PrefixCounters.from_json(start), PrefixCounters.from_json(reading)
        if start is None or first is None or last is None:
            continue
        span = window(first, last)
        windows += 1
        hits += span.hits
        queries += span.queries
        if span.restarted:
            notes.append(f"{replica}: restarted during the run; only what it counted after its restart is in")
        answered = sum(1 for c in calls if c.replica == replica and c.ok
                       and float(start["time"]) <= c.start <= float(reading["time"]))
        if span.requests is not None and not span.restarted and span.requests > answered:
            notes.append(f"{replica}: finished {span.requests - answered:.0f} request(s) more than the run's "
                         f"{answered} answered call(s) to it: traffic from other clients (another run, ops health) "
                         "or calls of this run that timed out; their tokens are in its counts")
    for replica in open_starts:
        notes.append(f"{replica}: no end reading (the run stopped before it); that run's counts are left out")
    return {"hits": hits, "queries": queries, "hit_rate": hits / queries if queries > 0 else None,
            "windows": windows, "notes": notes}


def placement_lines(rows: dict[str, Any]) -> list[str]:
    """One line per model (and one per note) for the end of `ops eval`."""
    lines = []
    for model, row in rows.items():
        cache, calls = row["prefix_cache"], row["calls"]
        seen = "no prefix-cache counters" if not cache or cache["hit_rate"] is None else (
            f"prefix cache hit {100 * cache['hit_rate']:.1f}% of {cache['queries']:.0f} prompt tokens "
            "(the replicas' own counters)")
        ratio = "-" if calls["max_over_mean"] is None else f"{calls['max_over_mean']:.2f}"
        lines.append(f"{model}: {seen}; calls per replica max/mean {ratio} over {row['replicas']}; "
                     f"{row['moves']['total']} session move(s)")
        lines += [f"  note: {model}: {note}" for note in (cache or {}).get("notes", [])]
    return lines
