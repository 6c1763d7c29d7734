"""scores.json of an agent run (the reference: scoring.md B5, B6, C3).

Accuracy is correct answers over every unit of the dataset: errors and units without a result
count as wrong (listed by type), while `grader_error` units (a judge that never gave a verdict that
parses) are left out of both counts and reported. Under `--judge-protocol cais` the numbers are
also given as HLE reports them: `accuracy_pct = round(100 * correct / n, 2)`, the Wald half-width
`round(1.96 * sqrt(acc * (100 - acc) / n), 2)` from the rounded percentage, and
`calibration_error = 100 * round(calib_err(confidence, correct, p='2', beta=100), 2)` over the
judged answers in dataset order, with calib_err exactly as pinned (numpy's default argsort, bins
of 100, the last bin skipped; fewer than 100 judged answers: not computed).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from orchestra_ops.core.headline import Headline, ModelScore, proportion_half_width
from orchestra_ops.runner.dataset import Sample, sample_id
from orchestra_ops.runner.results import TaskId

CALIBRATION_BETA = 100


def calib_err(confidence: Sequence[float], correct: Sequence[bool], p: str = "2",
              beta: int = CALIBRATION_BETA) -> float:
    """hendrycks/outlier-exposure's adaptive-binning calibration error, as HLE's judge script uses it."""
    import numpy as np

    conf = np.asarray(confidence, dtype=float)
    right = np.asarray(correct, dtype=float)
    order = conf.argsort()
    conf, right = conf[order], right[order]
    bins = [[i * beta, (i + 1) * beta] for i in range(len(conf) // beta)]
    bins[-1] = [bins[-1][0], len(conf)]  # IndexError below beta items, as the original
    total = 0.0
    for i in range(len(bins) - 1):  # the last bin is skipped (the original's loop bound)
        lo, hi = bins[i]
        bin_conf, bin_right = conf[lo:hi], right[lo:hi]
        if len(bin_conf) == 0:
            continue
        diff = abs(float(np.nanmean(bin_conf)) - float(np.nanmean(bin_right)))
        if p == "2":
            total += len(bin_conf) / len(conf) * diff ** 2
        elif p == "1":
            total += len(bin_conf) / len(conf) * diff
        elif p in ("infty", "infinity", "max"):
            total = max(total, diff)
        else:
            raise ValueError(f"p must be '1', '2' or 'infty', not {p!r}")
    return math.sqrt(total) if p == "2" else total


def cais_metrics(correct: int, n: int, confidences: list[float], judged_correct: list[bool]) -> dict[str, Any]:
    accuracy = round(100 * correct / n, 2) if n else 0.0
    half_width = round(1.96 * math.sqrt(accuracy * (100 - accuracy) / n), 2) if n else 0.0
    out: dict[str, Any] = {"accuracy_pct": accuracy, "half_width_pct": half_width, "n": n,
                           "judged": len(confidences)}
    if len(confidences) >= CALIBRATION_BETA:
        out["calibration_error"] = 100 * round(calib_err(confidences, judged_correct), 2)
    else:
        out["calibration_error"] = None
        out["calibration_note"] = f"needs at least {CALIBRATION_BETA} judged answers (has {len(confidences)})"
    return out


def score(suite: str, records: Mapping[TaskId, dict[str, Any]], units: list[Sample], *, judge_protocol: str,
          images_excluded: int = 0) -> dict[str, Any]:
    ok = [records[sample_id(u)] for u in units if sample_id(u) in records and records[sample_id(u)]["status"] == "ok"]
    failed = [r for r in records.values() if r.get("status") != "ok"]
    grader_errors = sum(1 for r in failed if r.get("error_type") == "grader_error")
    errors = Counter(str(r.get("error_type", "unknown")) for r in failed if r.get("error_type") != "grader_error")
    missing = sum(1 for u in units if sample_id(u) not in records)
    scored = len(units) - grader_errors
    correct = sum(1 for r in ok if r.get("correct") is True)
    finished = [r for r in records.values() if isinstance(r.get("rounds"), int)]
    tools: Counter[str] = Counter()
    aliases: Counter[str] = Counter()
    invalid: Counter[str] = Counter()
    for record in finished:
        for call in record.get("calls") or ():
            tools[str(call.get("tool"))] += 1
            aliases[str(call.get("alias"))] += 1
        invalid.update({str(k): int(v) for k, v in (record.get("invalid") or {}).items()})
    degraded = [sum(1 for call in r.get("calls") or () if call.get("retrieval_error")) for r in ok]
    out: dict[str, Any] = {
        "suite": suite, "judge_protocol": judge_protocol, "units": len(units), "scored": scored,
        "correct": correct, "accuracy": round(correct / scored, 6) if scored else None,
        "ok": len(ok), "errors": sum(errors.values()), "errors_by_type": dict(sorted(errors.items())),
        "grader_errors": grader_errors, "missing": missing,
        "answered": sum(1 for r in ok if r.get("answered")),
        "no_answer": sum(1 for r in ok if not r.get("answered")),
        "mean_rounds": round(sum(r["rounds"] for r in finished) / len(finished), 4) if finished else None,
        "tool_calls": dict(sorted(tools.items())), "alias_calls": dict(sorted(aliases.items())),
        "invalid_calls": dict(sorted(invalid.items())), "images_excluded": images_excluded,
        # --on-retrieval-error continue: searches no service answered, the round went on without documents
        "retrieval_degraded": {"rounds": sum(degraded), "tasks": sum(1 for n in degraded if n)},
    }
    if judge_protocol == "cais":
        judged = [r for r in ok if isinstance(r.get("judge"), dict)]
        out["cais"] = cais_metrics(correct, scored, [r["judge"]["confidence"] / 100 for r in judged],
                                   ["yes" in str(r["judge"]["correct"]) for r in judged])
    return out


def headline(scores: Mapping[str, Any], model: str) -> Headline:
    """The orchestrator's accuracy with its 95 % interval (the CAIS judge's own half-width when it ran)."""
    scored, correct = int(scores.get("scored") or 0), int(scores.get("correct") or 0)
    if not scored:
        return Headline(metric="accuracy", note="nothing scored")
    cais = scores.get("cais")
    half = cais["half_width_pct"] if isinstance(cais, dict) else proportion_half_width(correct, scored)
    return Headline(metric="accuracy", scores=[ModelScore(model, 100 * correct / scored, half, scored)])


def counts(values: Mapping[str, Any]) -> str:
    """`answer 10, search 6` (a count per name), `none` when empty."""
    return ", ".join(f"{name} {count}" for name, count in values.items()) or "none"


def score_lines(scores: Mapping[str, Any]) -> list[str]:
    accuracy = scores.get("accuracy")
    shown = "n/a" if accuracy is None else f"{100 * accuracy:.1f}%"
    lines = [f"accuracy {shown} ({scores['correct']} of {scores['scored']} correct; {scores['judge_protocol']} "
             f"judge protocol); errors counted as wrong: {scores['errors']}"
             + (f" ({counts(scores['errors_by_type'])})" if scores["errors"] else "")
             + f"; without a result: {scores['missing']}"]
    if scores.get("grader_errors"):
        lines.append(f"grader errors (left out of the score): {scores['grader_errors']}")
    lines.append(f"answered {scores['answered']}, no answer within the rounds {scores['no_answer']}; mean rounds "
                 f"{scores['mean_rounds']}; tool calls: {counts(scores['tool_calls'])}; invalid calls: "
                 f"{counts(scores['invalid_calls'])}")
    degraded = scores.get("retrieval_degraded") or {}
    if degraded.get("rounds"):
        lines.append(f"retrieval unavailable: {degraded['rounds']} search round(s) in {degraded['tasks']} task(s) went "
                     "on without documents (--on-retrieval-error continue); these scores are degraded")
    if scores.get("images_excluded"):
        lines.append(f"{scores['images_excluded']} question(s) with an image left out (--include-images to keep them)")
    cais = scores.get("cais")
    if isinstance(cais, dict):
        calibration = cais["calibration_error"]
        lines.append(f"HLE (CAIS judge): accuracy {cais['accuracy_pct']}% +/- {cais['half_width_pct']}% | n = "
                     f"{cais['n']}; calibration error: "
                     + (f"{calibration:g}" if calibration is not None else f"n/a ({cais['calibration_note']})"))
    return lines
