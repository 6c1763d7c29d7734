"""The shared suite of gsm8k and mmlu: each sample on each --model, scored as OpenCompass scores it.

Units: one per sample x model, id `SAMPLE@MODEL`, sample-major (a run stopped early leaves pairs
whole), so `--resume` finishes exactly the pairs that have no result and a model added later runs
only its own units. Each unit stores the raw reply (`prediction`), what OpenCompass's extraction
takes from it (`extracted`), the gold answer and `correct`.

Scores: per dataset and model the accuracy (100 x correct / n), shown only when every unit of that
pair finished ok (like OpenCompass, which has no score for a dataset whose inference did not
finish); group rows (mmlu) as the subclass declares them; each further model against the first
with the difference and its paired 95 % interval (paired.py). The run dir gets scores.json plus
OpenCompass's predictions/, results/ and summary/ (outputs.py). `version` is the first 6 hex digits
of the sha256 over the templates the run uses (and the variant): two runs with the same version
asked the same questions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestra_ops.evals.opencompass.groups import Group
from orchestra_ops.evals.opencompass.sampling import seeded_sample

from orchestra_ops.client.chat import ChatResult
from orchestra_ops.client.routing import Routing
from orchestra_ops.core.headline import Headline
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.suite import BaseSuite, SuiteOption, TaskContext, templates_of
from orchestra_ops.runner.templates import Template

DEFAULT_ROLE = "candidate"
THINK_TAG = "</think>"


def common_options(max_tokens: int) -> tuple[SuiteOption, ...]:
    return (
        SuiteOption("max_tokens", "--max-tokens", "int", "max_tokens of each request (OpenCompass's max_out_len).",
                    default=max_tokens, minimum=1, everyday=True),
        SuiteOption("temperature", "--temperature", "float", "Sampling temperature (0: greedy, OpenCompass's "
                    "reproducible setting).", default=0.0, minimum=0, everyday=True),
        SuiteOption("reasoning", "--reasoning", "choice", "A reply's reasoning (vLLM's message.reasoning): kept "
                    f"before the answer as 'reasoning{THINK_TAG}answer' (OpenCompass's default) or dropped.",
                    default="keep", choices=("keep", "drop")),
        SuiteOption("sample", "--sample", "int", "Score a seeded random N samples (per subject for mmlu).",
                    minimum=1),
        SuiteOption("seed", "--seed", "int", "Seed of --sample.", default=0),
    )


def turn(template: Template) -> Template:
    """A template file's text as one chat turn: its final newline is not part of the turn."""
    return replace(template, text=template.text.removesuffix("\n"))


class OpenCompassSuite(BaseSuite):
    """Base of the gsm8k and mmlu suites (see the module doc)."""

    calls_per_task = 1
    summary_fields = ("correct",)
    mode = "gen"
    metric = "accuracy"  # the metric name OpenCompass's evaluator gives this suite's score

    def __init__(self) -> None:
        self.models: list[str] = []
        self.run_dir: Path | None = None
        self.templates: dict[str, Template] = {}
        self.settings: dict[str, Any] = {}

    # ---- what each suite says -------------------------------------------------------------------

    def dataset_of(self, unit: Sample) -> str:
        raise NotImplementedError

    def messages(self, unit: Sample) -> list[dict[str, str]]:
        raise NotImplementedError

    def extract(self, unit: Sample, prediction: str) -> str:
        raise NotImplementedError

    def gold(self, unit: Sample) -> str:
        raise NotImplementedError

    def raw_gold(self, unit: Sample) -> str:
        return self.gold(unit)

    def is_correct(self, extracted: str, gold: str) -> bool:
        return extracted == gold

    def version_templates(self) -> list[str]:
        return sorted(self.templates)

    def dataset_version(self, dataset: str) -> str:
        """The summary CSV's version of one dataset (a suite whose datasets differ in prompt overrides it)."""
        return self.version()

    def detail_fields(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Extra per-row fields of results/<model>/<dataset>.json's details (humaneval: its `result`)."""
        return {}

    async def evaluate(self, unit: Sample, extracted: str, gold: str, ctx: TaskContext) -> dict[str, Any]:
        """The record's `correct` and whatever else the evaluator reports (humaneval runs the program)."""
        return {"correct": self.is_correct(extracted, gold)}

    def variant(self) -> str:
        return ""

    def select(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        """Which samples to score (--sample and the suite's own filters)."""
        return samples

    def groups(self, datasets: Sequence[str]) -> list[Group]:
        return []

    def csv_groups(self) -> bool:
        return False

    def check(self, options: Mapping[str, Any]) -> None:
        """The suite's own checks of its options and templates (ConfigError)."""

    # ---- the engine's hooks ---------------------------------------------------------------------

    def prepare(self, routing: Routing, options: Mapping[str, Any]) -> list[str]:
        models = [str(m) for m in options.get("models") or []]
        if not models:
            if DEFAULT_ROLE not in routing.roles:
                raise ConfigError(f"the {self.name} suite needs --model (repeat it to compare models: --model base "
                                  f"--model my-adapter); roles: {', '.join(sorted(routing.roles)) or 'none'}")
            models = [DEFAULT_ROLE]
        repeated = sorted({m for m in models if models.count(m) > 1})
        if repeated:
            raise ConfigError(f"--model {repeated[0]} is given twice")
        for model in models:
            routing.chat_target(model)
        self.models = models
        self.run_dir = Path(options["run_dir"]) if options.get("run_dir") else None
        self.templates = {name: turn(t) for name, t in templates_of(options).items()}
        self.settings = dict(options)
        self.check(options)
        return models

    def units(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        chosen = self.select(samples, options)
        models = [str(m) for m in options.get("models") or []] or self.models or [DEFAULT_ROLE]
        return [{**sample, "id": f"{sample['id']}@{model}", "sample": sample["id"], "model": model}
                for sample in chosen for model in models]

    async def run(self, unit: Sample, ctx: TaskContext) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.settings.get("temperature", 0.0)}
        if self.settings.get("max_tokens"):
            params["max_tokens"] = self.settings["max_tokens"]
        result = await ctx.chat(unit["model"], self.messages(unit), **params)
        prediction = self.prediction(result)
        extracted = self.extract(unit, prediction)
        gold = self.gold(unit)
        return {"model": unit["model"], "sample": unit["sample"], "dataset": self.dataset_of(unit),
                "prediction": prediction, "extracted": extracted, "gold": gold,
                **await self.evaluate(unit, extracted, gold, ctx), "finish_reason": result.finish_reason,
                "usage": {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens}}

    def prediction(self, result: ChatResult) -> str:
        content = result.content or ""
        # vLLM (0.32 at least) sends `message.reasoning` and no `reasoning_content`; older servers and
        # some providers still say `reasoning_content`.
        reasoning = result.message.get("reasoning") or result.message.get("reasoning_content")
        if reasoning and self.settings.get("reasoning", "keep") == "keep":
            return f"{reasoning}{THINK_TAG}{content}"
        return content

    def version(self) -> str:
        parts = [self.templates[name].sha256 for name in self.version_templates() if name in self.templates]
        return hashlib.sha256("\n".join([*parts, self.variant()]).encode()).hexdigest()[:6]

    # ---- scores ---------------------------------------------------------------------------------

    def score(self, records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any] | None:
        from orchestra_ops.evals.opencompass.scoring import score_run

        return score_run(self, records, units)

    def score_lines(self, scores: Mapping[str, Any]) -> list[str]:
        from orchestra_ops.evals.opencompass.scoring import table_lines

        return table_lines(scores)

    def headline(self, scores: Mapping[str, Any], records: Mapping[TaskId, dict[str, Any]],
                 units: list[Sample]) -> Headline | None:
        from orchestra_ops.evals.opencompass.headline import headline_row, to_headline

        return to_headline(headline_row(self.name, self, scores, records, units), scores)


class SingleDatasetSuite(OpenCompassSuite):
    """A suite whose units all belong to one dataset (gsm8k, hellaswag, humaneval): `--sample N --seed S`
    picks a seeded subset of it."""

    dataset_name: str = ""

    def select(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        return seeded_sample(samples, options.get("sample"), int(options.get("seed") or 0), self.dataset_name)

    def dataset_of(self, unit: Sample) -> str:
        return self.dataset_name
