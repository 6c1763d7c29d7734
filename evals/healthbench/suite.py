"""The `healthbench` suite: HealthBench's rubric grading and scores (shared/reference/scoring.md, Part A).

The unit of work is the example (its id is `prompt_id`). For each example in flight: the candidate
(`--model`, default the role `candidate`) answers the conversation, or `--responses FILE` supplies
the response made elsewhere (then the candidate is never called); then every rubric item is one
judge call (`--judge`, default the role `judge`), all of them at once. The judge calls of every
example in flight share the judge's own cap (`--judge-concurrency`, applied by the engine through
`limits`), so the judge stays busy whatever the examples' sizes; `--concurrency` bounds the examples
in flight (and so the candidate calls). The candidate and the judge are separate roles, each with
its own replica pool (a cap applies per target: two roles on one model share it). Each replica
also takes at most 256 calls at once (the client pool's cap), so a judge cap above 256 needs a
judge with more than one replica (or a provider with a higher `max_concurrency`).

Judge settings default to the reference's (system message, temperature 0.5, 2,048 max tokens) and
each has a flag. Parsing and re-asks: grading.py. Scores: scoring.py.

Records (results.jsonl, one line per example): `prompt_id`, `overall_score`, `rubric_items` (in
dataset order: `criterion`, `points`, `tags`, `criteria_met`, `explanation`, `attempts` = judge
calls spent on the item, and for an item without a grade `criteria_met: null` with `error` and
`error_type`), `example_tags`, `response` (the text graded), `response_source` (`candidate` or
`responses_file`), `candidate` (the call's model, finish reason, usage; null for a file),
`judge_calls` (made by this invocation) and `grader_errors`.

An example with an item that has no grade is stored as status `error`, not `ok`: error_type
`grader_error` when every such item ran out of attempts on invalid replies, else the kind of the
judge call that failed (e.g. `timeout`). It keeps every grade that did come back, is left out of
the scores and counted in them, and `--retry-failed` picks it up: the rerun re-asks only the items
without a grade (the stored ones, and the stored response, are reused from `ctx.previous`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.healthbench.dataset import (
    EXAMPLE_LINE,
    check_responses,
    load_examples,
    load_responses,
    render_conversation,
)
from orchestra_ops.evals.healthbench.grading import GRADER_ERROR, ItemGrade, JudgeSettings, grade_item, grader_prompt
from orchestra_ops.evals.healthbench.scoring import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    aggregate,
    calculate_score,
    example_metrics,
    score_table,
)

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.client.callctx import session_scope
from orchestra_ops.client.routing import Routing
from orchestra_ops.core.headline import Z95, Headline, ModelScore
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, sample_id
from orchestra_ops.runner.generation import apply_shorthands, explicit_keys, generation_options, parse_sampling
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.suite import BaseSuite, SuiteOption, TaskContext, UnitFailed, templates_of, unit_counts
from orchestra_ops.runner.templates import Template

log = logging.getLogger(__name__)

DEFAULT_JUDGE_CONCURRENCY = 400
_DEFAULTS = JudgeSettings(name="judge")
SAMPLED_ROLES = ("candidate", "judge")  # --sampling ROLE.KEY=VALUE


class HealthBenchSuite(BaseSuite):
    """Grade responses against HealthBench rubrics: one judge call per rubric item, scores as the reference."""

    name = "healthbench"
    dataset_example = EXAMPLE_LINE
    default_dataset = packaged("healthbench/data/healthbench_synthetic.jsonl")
    calls_per_task = 8  # one candidate call and up to 3 judge attempts in a row, plus waiting for the judge's cap
    template_files: Mapping[str, str] = MappingProxyType(
        {"grader": packaged("healthbench/templates/healthbench_grader.txt")})
    template_fields: Mapping[str, tuple[str, ...]] = MappingProxyType({"grader": ("conversation", "rubric_item")})
    summary_fields = ("overall_score", "grader_errors")
    options = (
        SuiteOption("responses", "--responses", "path",
                    "Grade these responses instead of calling the candidate: JSONL of {prompt_id, response}."),
        SuiteOption("judge", "--judge", "str", "The role or model that grades.", default="judge", everyday=True),
        SuiteOption("judge_concurrency", "--judge-concurrency", "int",
                    "Judge calls in flight at once, shared by every example in flight (--concurrency examples).",
                    default=DEFAULT_JUDGE_CONCURRENCY, minimum=1),
        SuiteOption("judge_attempts", "--judge-attempts", "int",
                    "Judge calls per rubric item before an invalid reply makes it a grader_error.",
                    default=_DEFAULTS.attempts, minimum=1),
        SuiteOption("judge_temperature", "--judge-temperature", "float", "The judge's sampling temperature.",
                    default=_DEFAULTS.temperature, minimum=0),
        SuiteOption("judge_max_tokens", "--judge-max-tokens", "int", "The judge's max_tokens.",
                    default=_DEFAULTS.max_tokens, minimum=1),
        SuiteOption("judge_system", "--judge-system", "str",
                    "The judge's system message ('' sends none).", default=_DEFAULTS.system),
        SuiteOption("candidate_temperature", "--candidate-temperature", "float",
                    "The candidate's temperature (default: the model's request_defaults).", minimum=0),
        SuiteOption("candidate_max_tokens", "--candidate-max-tokens", "int",
                    "The candidate's max_tokens (default: the model's request_defaults).", minimum=1),
        *generation_options(SAMPLED_ROLES, evaluated="the candidate"),
    )

    def __init__(self) -> None:
        self.candidate: str | None = None
        self.candidate_params: dict[str, Any] = {}
        self.judge = _DEFAULTS
        self.responses: dict[str, str] | None = None
        self.responses_path: str | None = None
        self.template: Template | None = None

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        return load_examples(path, dedupe=dedupe)

    def prepare(self, routing: Routing, options: Mapping[str, Any]) -> list[str]:
        if len(options.get("models") or ()) > 1:
            raise ConfigError("the healthbench suite grades one candidate; give --model once")
        items = list(options.get("sampling") or ())
        sampled = parse_sampling(items, SAMPLED_ROLES, base={"judge": {
            "temperature": options["judge_temperature"], "max_tokens": options["judge_max_tokens"]}})
        judge = sampled["judge"]
        self.judge = JudgeSettings(name=str(options["judge"]),
                                   temperature=float(judge.pop("temperature", _DEFAULTS.temperature)),
                                   max_tokens=int(judge.pop("max_tokens", _DEFAULTS.max_tokens)),
                                   system=str(options["judge_system"]), attempts=int(options["judge_attempts"]),
                                   extra=tuple(sorted(judge.items())))
        self.template = templates_of(options)["grader"]
        routing.chat_target(self.judge.name, flag="--judge", avoid=(str(options.get("model") or "candidate"),),
                            purpose="the grader of every rubric item")
        names = [self.judge.name]
        if options.get("responses"):
            self.responses_path = str(options["responses"])
            self.responses = load_responses(Path(self.responses_path))
            if options.get("model"):
                raise ConfigError("--responses grades responses made elsewhere, so no --model is called; "
                                  "give one or the other")
        else:
            self.candidate = str(options.get("model") or "candidate")
            candidate = routing.chat_target(self.candidate, flag="--model", avoid=(self.judge.name,),
                                            purpose="the model whose responses are graded")
            if candidate.name == routing.chat_target(self.judge.name).name:
                log.warning("the candidate '%s' and the judge '%s' are one model: they share its replicas and the "
                            "judge's cap", self.candidate, self.judge.name)
            names.insert(0, self.candidate)
            given = {key: options[flag] for key, flag in
                     (("temperature", "candidate_temperature"), ("max_tokens", "candidate_max_tokens"))
                     if options.get(flag) is not None}
            self.candidate_params = {**apply_shorthands(given, options, explicit_keys(items, "candidate")),
                                     **sampled["candidate"]}
        return names

    def units(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        if self.responses is not None and self.responses_path is not None:
            check_responses(self.responses, samples, self.responses_path)
        return samples

    def limits(self, options: Mapping[str, Any]) -> Mapping[str, int]:
        return {str(options["judge"]): int(options["judge_concurrency"])}

    async def run(self, sample: Sample, ctx: TaskContext) -> dict[str, Any]:
        assert self.template is not None, "prepare() runs first"
        previous = ctx.previous or {}
        response, source, candidate = await self._response(sample, ctx, previous)
        conversation = render_conversation(sample["prompt"], response)
        items: list[dict[str, Any]] = sample["rubrics"]
        kept = _kept_items(previous, items)
        todo = [i for i, old in enumerate(kept) if old is None or old.get("criteria_met") is None]
        template = self.template
        with session_scope(str(ctx.task_id)):  # the example's judge prompts share its conversation: one replica
            grades = await asyncio.gather(*(grade_item(ctx, self.judge, grader_prompt(template, conversation, items[i]))
                                            for i in todo))
        graded = dict(zip(todo, grades, strict=True))
        rubric_items = [_item_record(items[i], kept[i], graded.get(i)) for i in range(len(items))]
        failed = [g for g in grades if g.criteria_met is None]
        fields: dict[str, Any] = {
            "prompt_id": sample["id"], "overall_score": None, "rubric_items": rubric_items,
            "example_tags": sample.get("example_tags", []), "response": response, "response_source": source,
            "candidate": candidate, "judge": self.judge.name, "judge_calls": sum(g.attempts for g in grades),
            "grader_errors": sum(1 for g in failed if g.error_kind == GRADER_ERROR),
        }
        if failed:
            raise UnitFailed(*_failure(failed, len(items)), fields)
        fields["overall_score"] = calculate_score(rubric_items, [bool(r["criteria_met"]) for r in rubric_items])
        return fields

    async def _response(self, sample: Sample, ctx: TaskContext,
                        previous: Mapping[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
        """(response, where it came from, the candidate call's details or None)."""
        if isinstance(previous.get("response"), str):  # a rerun keeps the response its grades are of
            return previous["response"], str(previous.get("response_source", "candidate")), previous.get("candidate")
        if self.responses is not None:
            return self.responses[sample["id"]], "responses_file", None
        assert self.candidate is not None
        result = await ctx.chat(self.candidate, sample["prompt"], **self.candidate_params)
        if result.content is None:
            raise CallError("empty_response", f"the candidate '{self.candidate}' answered no text "
                            f"(finish_reason {result.finish_reason})", attempts=result.attempts, replica=result.replica)
        return result.content, "candidate", {
            "model": self.candidate, "finish_reason": result.finish_reason, "replica": result.replica,
            "attempts": result.attempts,
            "usage": {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens}}

    def score(self, records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any] | None:
        per_example = []
        error_examples = error_items = 0
        for unit in units:
            record = records.get(sample_id(unit))
            if record is None:
                continue
            if record.get("status") == "ok":
                per_example.append(example_metrics(record["rubric_items"], record.get("example_tags", [])))
            elif record.get("error_type") == GRADER_ERROR:
                error_examples += 1
                error_items += sum(1 for item in record.get("rubric_items", ())
                                   if item.get("error_type") == GRADER_ERROR)
        metrics = aggregate(per_example)
        counts = unit_counts(records, units)
        return {"suite": self.name, "score": metrics.get("score"), "metrics": metrics,
                "examples": len(units), "scored": len(per_example),
                "grader_error_examples": error_examples, "grader_error_items": error_items,
                "failed": counts["failed"], "failed_by_type": counts["failed_by_type"], "missing": counts["missing"],
                "rubric_items": sum(len(unit["rubrics"]) for unit in units),
                "candidate": self.candidate, "responses": self.responses_path,
                "judge": {"name": self.judge.name, "temperature": self.judge.temperature,
                          "max_tokens": self.judge.max_tokens, "system": self.judge.system,
                          "attempts": self.judge.attempts},
                "bootstrap": {"resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED}}

    def headline(self, scores: Mapping[str, Any], records: Mapping[TaskId, dict[str, Any]],
                 units: list[Sample]) -> Headline | None:
        """The overall score in percent ± 1.96 bootstrap standard deviations (HealthBench's own std)."""
        metrics = scores.get("metrics") or {}
        overall = metrics.get("overall_score")
        if overall is None:
            return Headline(metric="HealthBench score", note="no example scored")
        std = metrics.get("overall_score:bootstrap_std")
        model = str(scores.get("candidate") or "responses")
        return Headline(metric="HealthBench score", scores=[ModelScore(
            model, 100 * float(overall), None if std is None else 100 * Z95 * float(std),
            int(metrics.get("overall_score:n_samples") or scores.get("scored") or 0))])

    def score_lines(self, scores: Mapping[str, Any]) -> list[str]:
        lines = [f"healthbench: {scores['scored']} of {scores['examples']} examples scored "
                 f"({scores['rubric_items']} rubric items, judge '{scores['judge']['name']}')"]
        if scores["failed"]:
            kinds = ", ".join(f"{kind} {n}" for kind, n in scores["failed_by_type"].items())
            lines.append(f"left out of the scores: {scores['failed']} failed example(s) ({kinds}); "
                         f"{scores['grader_error_items']} rubric item(s) had no valid verdict after "
                         f"{scores['judge']['attempts']} attempt(s)")
            lines.append("rerun them with --retry-failed: only the items without a grade are asked again")
        if scores["missing"]:
            lines.append(f"{scores['missing']} example(s) have no result yet (--resume runs them)")
        return lines + score_table(scores["metrics"])


def _kept_items(previous: Mapping[str, Any], items: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """The previous record's entry for each item, where it is for the same criterion and points."""
    stored = previous.get("rubric_items")
    if not isinstance(stored, list) or len(stored) != len(items):
        return [None] * len(items)
    return [old if isinstance(old, dict) and old.get("criterion") == item["criterion"]
            and old.get("points") == item["points"] else None for old, item in zip(stored, items, strict=True)]


def _item_record(item: Mapping[str, Any], kept: Mapping[str, Any] | None, grade: ItemGrade | None) -> dict[str, Any]:
    if grade is None:  # a grade stored by an earlier invocation
        assert kept is not None
        return dict(kept)
    record: dict[str, Any] = {"criterion": item["criterion"], "points": item["points"], "tags": item.get("tags", []),
                              "criteria_met": grade.criteria_met, "explanation": grade.explanation,
                              "attempts": grade.attempts + int((kept or {}).get("attempts", 0))}
    if grade.error is not None:
        record["error"] = grade.error
        record["error_type"] = grade.error_kind
    return record


def _failure(failed: list[ItemGrade], total: int) -> tuple[str, str]:
    """(error_type, message) of an example with items that have no grade."""
    calls = [g for g in failed if g.error_kind != GRADER_ERROR]
    invalid = len(failed) - len(calls)
    kind = GRADER_ERROR if not calls else str(calls[0].error_kind)
    parts = []
    if invalid:
        parts.append(f"{invalid} without a valid verdict (grader_error)")
    if calls:
        parts.append(f"{len(calls)} whose judge call failed (first: {calls[0].error})")
    return kind, f"{len(failed)} of {total} rubric items have no grade: {'; '.join(parts)}"
