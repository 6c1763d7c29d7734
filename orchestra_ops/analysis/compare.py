"""`ops compare RUN_A RUN_B`: did two runs do the same work, then how their scores and latencies differ.

Equivalence is proven from the two manifests (run.json, runner/manifest.py) and results: the
same suite and suite options, the same dataset (file sha256 and the sha256 of its id list), the
same prompt templates (sha256 of each), the same judge (model, request defaults and the suite's
judge options; not where its replicas ran), and results over the same ids. Each difference is
named. What is *meant* to differ (the routing: the models under test, the topology, the ops
version) is listed apart and does not break equivalence.

The score difference (B − A) is taken over the ids both runs graded, with a paired bootstrap
interval and, for 0/1 scores, McNemar's test (significance.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestra_ops.analysis.analyze import compute
from orchestra_ops.analysis.rundata import RunData, load_run
from orchestra_ops.analysis.significance import mcnemar, paired_bootstrap
from orchestra_ops.analysis.task_scores import BINARY_METRICS, run_metric, task_scores
from orchestra_ops.runner.manifest import manifest_of

SHOWN_IDS = 5
LATENCY_FIELDS = ("mean", "p50", "p90", "p99")


@dataclass
class Difference:
    item: str  # what differs: "dataset file", "template 'judge'", "ids"
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"item": self.item, "detail": self.detail}


@dataclass
class Comparison:
    run_a: Path
    run_b: Path
    differences: list[Difference] = field(default_factory=list)
    intended: list[Difference] = field(default_factory=list)  # what is compared (routing, models)
    score: dict[str, Any] | None = None
    score_note: str | None = None
    latency: list[dict[str, Any]] = field(default_factory=list)
    cache: list[str] = field(default_factory=list)  # one line per run that answered from a response cache

    @property
    def equivalent(self) -> bool:
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        return {"run_a": str(self.run_a), "run_b": str(self.run_b), "equivalent": self.equivalent,
                "differences": [d.to_json() for d in self.differences],
                "intended_differences": [d.to_json() for d in self.intended],
                "score": self.score, "score_note": self.score_note, "latency": self.latency,
                "cache": self.cache}


def compare_runs(run_a: str | Path, run_b: str | Path, *, resamples: int = 2000, seed: int = 0) -> Comparison:
    a, b = load_run(run_a), load_run(run_b)
    result = Comparison(a.run_dir, b.run_dir)
    result.differences = equivalence(a, b)
    result.intended = intended_differences(a, b)
    result.score, result.score_note = score_difference(a, b, resamples=resamples, seed=seed)
    result.latency = latency_deltas(a, b)
    result.cache = [line for label, run in (("A", a), ("B", b)) if (line := cache_note(label, run))]
    return result


def cache_note(label: str, run: RunData) -> str | None:
    """What a run's response cache means for the comparison (None: the run used none)."""
    info = run.run_json or {}
    hits = sum(1 for c in run.profile.model_calls if c.cached)
    if not info.get("cache_used") and not hits:
        return None
    where = (info.get("cache") or {}).get("path") if isinstance(info.get("cache"), dict) else None
    total = len(run.profile.model_calls)
    return (f"run {label} used a response cache{f' ({where})' if where else ''}: {hits} of {total} call(s) were "
            "answered from it, not by a model; its latencies cover the other calls only")


def equivalence(a: RunData, b: RunData) -> list[Difference]:
    out: list[Difference] = []
    ma, mb = manifest_of(a.run_json), manifest_of(b.run_json)
    for name, manifest, run in (("A", ma, a), ("B", mb, b)):
        if manifest is None:
            out.append(Difference("manifest", f"run {name} ({run.run_dir}) has no manifest in run.json: which "
                                  "dataset, prompts and judge it used cannot be proven"))
    if ma is not None and mb is not None:
        out += _same(ma.get("suite"), mb.get("suite"), "suite")
        out += _options(ma.get("suite_options"), mb.get("suite_options"))
        out += _same(ma.get("ids_sha256"), mb.get("ids_sha256"), "dataset ids",
                     f"the id lists differ ({ma.get('ids_count')} vs {mb.get('ids_count')} ids)")
        out += _same(ma.get("dataset_sha256"), mb.get("dataset_sha256"), "dataset file",
                     f"the dataset files differ ({ma.get('dataset')} sha256 {_short(ma.get('dataset_sha256'))} vs "
                     f"{mb.get('dataset')} sha256 {_short(mb.get('dataset_sha256'))})")
        out += _templates(ma.get("templates") or {}, mb.get("templates") or {})
        out += _same(judge_identity(ma.get("judge")), judge_identity(mb.get("judge")), "judge")
    out += _ids(a, b)
    return out


def judge_identity(judge: Any) -> Any:
    """What makes a judge the same judge: its model and settings, not where its replicas ran."""
    if not isinstance(judge, dict):
        return judge
    roles = [{k: r.get(k) for k in ("role", "kind", "served_name", "request_defaults")}
             for r in judge.get("roles") or [] if isinstance(r, dict)]
    return {"roles": roles, "options": judge.get("options")}


def _same(x: Any, y: Any, item: str, detail: str | None = None) -> list[Difference]:
    if x == y:
        return []
    return [Difference(item, detail or f"A: {_show(x)}; B: {_show(y)}")]


def _options(oa: Any, ob: Any) -> list[Difference]:
    """Only the suite options that differ, each as `max_rounds: 50 → 2` (an option one run lacks: `(none)`)."""
    if oa == ob:
        return []
    if not isinstance(oa, dict) or not isinstance(ob, dict):
        return _same(oa, ob, "suite options")
    changed = [f"{key}: {_value(oa.get(key))} → {_value(ob.get(key))}" for key in sorted(set(oa) | set(ob))
               if oa.get(key) != ob.get(key)]
    return [Difference("suite options", "; ".join(changed))]


def _value(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value)) if value else "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_value(v)}" for k, v in value.items()) or "(none)"
    return str(value)


def _templates(ta: dict[str, Any], tb: dict[str, Any]) -> list[Difference]:
    out = []
    for name in sorted(set(ta) | set(tb)):
        ha, hb = _template_hash(ta.get(name)), _template_hash(tb.get(name))
        if ha is None or hb is None:
            out.append(Difference(f"template '{name}'", f"used only by run {'A' if hb is None else 'B'}"))
        elif ha != hb:
            out.append(Difference(f"template '{name}'", f"the prompt texts differ (sha256 {_short(ha)} vs "
                                  f"{_short(hb)})"))
    return out


def _template_hash(entry: Any) -> str | None:
    if isinstance(entry, dict):
        return entry.get("sha256")
    return None if entry is None else str(entry)


def _ids(a: RunData, b: RunData) -> list[Difference]:
    ids_a, ids_b = set(a.final), set(b.final)
    out = []
    for name, only in (("A", ids_a - ids_b), ("B", ids_b - ids_a)):
        if only:
            shown = ", ".join(repr(i) for i in sorted(only, key=str)[:SHOWN_IDS])
            more = f" and {len(only) - SHOWN_IDS} more" if len(only) > SHOWN_IDS else ""
            out.append(Difference("ids", f"{len(only)} id(s) have results only in run {name}: {shown}{more}"))
    return out


def intended_differences(a: RunData, b: RunData) -> list[Difference]:
    ma, mb = manifest_of(a.run_json) or {}, manifest_of(b.run_json) or {}
    out = _same(_placement_free(ma.get("routing")), _placement_free(mb.get("routing")), "routing",
                f"A: {_routing_text(ma.get('routing'))}; B: {_routing_text(mb.get('routing'))}")
    out += _affinity_difference(_affinities(ma.get("routing")), _affinities(mb.get("routing")))
    out += _same(ma.get("topology_sha256"), mb.get("topology_sha256"), "topology file")
    out += _same(ma.get("endpoints_sha256"), mb.get("endpoints_sha256"), "endpoints")
    out += _same(_version(ma.get("ops")), _version(mb.get("ops")), "ops version")
    return out


def _version(ops: Any) -> Any:
    return {k: ops.get(k) for k in ("version", "git_commit")} if isinstance(ops, dict) else ops


def _placement_free(routing: Any) -> Any:
    """The routing rows without their affinity (named apart: it changes where calls go, not what they ask)."""
    if not isinstance(routing, list):
        return routing
    return [{k: v for k, v in r.items() if k != "affinity"} if isinstance(r, dict) else r for r in routing]


def _affinities(routing: Any) -> dict[str, Any]:
    """role -> its recorded affinity (None: a provider, or a run recorded before affinity was)."""
    if not isinstance(routing, list):
        return {}
    return {str(r.get("role")): r.get("affinity") for r in routing if isinstance(r, dict) and r.get("kind") == "model"}


def _affinity_difference(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    """The roles both runs have whose affinity differs (other roles are a routing difference already)."""
    changed = [role for role in sorted(set(a) & set(b)) if a[role] != b[role]]
    if not changed:
        return []
    return [Difference("affinity", "; ".join(f"{role}: A {_affinity_text(a[role])}, B {_affinity_text(b[role])}"
                                             for role in changed))]


def _affinity_text(affinity: Any) -> str:
    if not isinstance(affinity, dict):
        return "(not recorded)"
    mode = affinity.get("mode")
    return f"{mode} (load factor {affinity.get('load_factor')})" if mode == "session" else str(mode)


def _routing_text(routing: Any) -> str:
    if not isinstance(routing, list):
        return _show(routing)
    return ", ".join(f"{r.get('role')}->{r.get('served_name') or r.get('target')}x{r.get('replicas', '?')}"
                     for r in routing if isinstance(r, dict))


def score_difference(a: RunData, b: RunData, *, resamples: int, seed: int) -> tuple[dict[str, Any] | None, str | None]:
    metric_a, metric_b = run_metric(a.final), run_metric(b.final)
    if metric_a != metric_b:
        return None, f"the runs are scored differently (A: {metric_a}, B: {metric_b}); no score difference"
    sa, sb = task_scores(a.final, metric_a), task_scores(b.final, metric_b)
    shared = sorted(set(sa.values) & set(sb.values), key=str)
    if not shared:
        return None, "no id was graded in both runs"
    xs = [sa.values[i] for i in shared]
    ys = [sb.values[i] for i in shared]
    interval = paired_bootstrap(xs, ys, resamples=resamples, seed=seed)
    score: dict[str, Any] = {"metric": metric_a, "shared_ids": len(shared), "a": sum(xs) / len(xs),
                             "b": sum(ys) / len(ys), "a_all": sa.mean, "b_all": sb.mean,
                             "interval": interval.to_json()}
    if metric_a in BINARY_METRICS:
        score["mcnemar"] = mcnemar(xs, ys).to_json()
    return score, None


def latency_deltas(a: RunData, b: RunData) -> list[dict[str, Any]]:
    stats_a, _ = compute(a)
    stats_b, _ = compute(b)
    rows = []
    groups = [("tasks", {"end to end": stats_a["tasks"]["latency"]}, {"end to end": stats_b["tasks"]["latency"]}),
              ("role", stats_a["by_role"], stats_b["by_role"]),
              ("tool", stats_a["by_tool"]["e2e"], stats_b["by_tool"]["e2e"]),
              ("tool expert", stats_a["by_tool"]["expert"], stats_b["by_tool"]["expert"])]
    for kind, rows_a, rows_b in groups:
        for name in sorted(set(rows_a) | set(rows_b)):
            ra, rb = rows_a.get(name) or {}, rows_b.get(name) or {}
            row: dict[str, Any] = {"group": kind, "name": name, "count_a": ra.get("count", 0),
                                   "count_b": rb.get("count", 0)}
            for key in LATENCY_FIELDS:
                va, vb = ra.get(key), rb.get(key)
                row[f"{key}_a"], row[f"{key}_b"] = va, vb
                row[f"{key}_delta"] = None if va is None or vb is None else vb - va
            rows.append(row)
    return rows


def _short(digest: Any) -> str:
    return str(digest)[:12] if digest else "?"


def _show(value: Any) -> str:
    text = "(none)" if value is None else str(value)
    return text if len(text) <= 200 else text[:197] + "..."
