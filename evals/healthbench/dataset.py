"""HealthBench data: dataset rows, the `--responses` file and the text the grader sees.

A dataset line (scoring.md A2): `{"prompt": [{role, content}, …], "rubrics": [{criterion, points,
tags}, …], "example_tags": [...], "prompt_id": "…"}`; other fields (`ideal_completions_data`,
`canary`) are kept and unused. The unit id is `prompt_id`. Every check the reference makes with an
assert (a conversation ending on a user turn, no duplicate example tag, no tag twice on one item, at
least one positive-point item so the score is defined) is a clear error here, naming file and line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, read_jsonl

EXAMPLE_LINE = ('{"prompt_id": "p1", "prompt": [{"role": "user", "content": "I have a mild headache. What can I '
                'do?"}], "rubrics": [{"criterion": "Suggests rest and fluids.", "points": 5, "tags": '
                '["axis:completeness"]}], "example_tags": ["theme:hedging"]}')


def load_examples(path: Path, *, dedupe: bool) -> list[Sample]:
    """The dataset's rows, each with `id` = its `prompt_id`; a bad row is a ConfigError naming its line."""
    samples: list[Sample] = []
    lines: dict[str, list[int]] = {}
    for number, row in read_jsonl(path, "dataset"):
        where = f"{path}:{number}"
        sample = check_row(row, where)
        lines.setdefault(sample["id"], []).append(number)
        samples.append(sample)
    duplicates = {pid: nums for pid, nums in lines.items() if len(nums) > 1}
    if duplicates and not dedupe:
        shown = ", ".join(f"{pid!r} (lines {', '.join(map(str, nums))})" for pid, nums in list(duplicates.items())[:10])
        raise ConfigError(f"{path}: {len(duplicates)} prompt_id(s) appear more than once: {shown}; results are "
                          "kept per prompt_id, so fix the dataset or pass --dedupe to keep the first of each")
    if duplicates:
        first: dict[str, Sample] = {}
        for sample in samples:
            first.setdefault(sample["id"], sample)
        samples = list(first.values())
    return samples


def check_row(row: Any, where: str) -> Sample:
    if not isinstance(row, dict):
        raise ConfigError(f"{where}: each line is a JSON object with prompt, rubrics, example_tags and prompt_id")
    missing = [key for key in ("prompt_id", "prompt", "rubrics") if key not in row]
    if missing:
        raise ConfigError(f"{where}: no \"{missing[0]}\" (its fields: {', '.join(map(str, row))}); the healthbench "
                          f"suite reads JSONL lines like {EXAMPLE_LINE}")
    prompt_id = row.get("prompt_id")
    if not isinstance(prompt_id, str) or not prompt_id:
        raise ConfigError(f"{where}: \"prompt_id\" must be a non-empty string")
    where = f"{where} (prompt_id {prompt_id})"
    _check_prompt(row.get("prompt"), where)
    _check_rubrics(row.get("rubrics"), where)
    tags = _tags(row.get("example_tags", []), where, "example_tags", "example tag")
    return {**row, "id": prompt_id, "example_tags": tags}


def _tags(tags: Any, where: str, key: str, noun: str) -> list[str]:
    """`tags` when it is a list of distinct strings, else a ConfigError naming `key` or the repeated tag."""
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ConfigError(f"{where}: \"{key}\" must be a list of strings")
    repeated = [t for t, n in Counter(tags).items() if n > 1]
    if repeated:
        raise ConfigError(f"{where}: {noun} {repeated[0]!r} is given twice")
    return tags


def _check_prompt(prompt: Any, where: str) -> None:
    if not isinstance(prompt, list) or not prompt:
        raise ConfigError(f"{where}: \"prompt\" must be a non-empty list of {{role, content}} messages")
    for index, message in enumerate(prompt):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) \
                or not isinstance(message.get("content"), str):
            raise ConfigError(f"{where}: prompt[{index}] must be {{\"role\": str, \"content\": str}}")
    if prompt[-1]["role"] != "user":
        raise ConfigError(f"{where}: the prompt must end on a user turn (it ends on {prompt[-1]['role']!r})")


def _check_rubrics(rubrics: Any, where: str) -> None:
    if not isinstance(rubrics, list) or not rubrics:
        raise ConfigError(f"{where}: \"rubrics\" must be a non-empty list of {{criterion, points, tags}}")
    for index, item in enumerate(rubrics):
        at = f"{where}: rubrics[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("criterion"), str) or not item["criterion"].strip():
            raise ConfigError(f"{at}: \"criterion\" must be a non-empty string")
        points = item.get("points")
        if isinstance(points, bool) or not isinstance(points, (int, float)):
            raise ConfigError(f"{at}: \"points\" must be a number (negative for an undesirable criterion)")
        _tags(item.get("tags", []), at, "tags", "tag")
    if not any(item["points"] > 0 for item in rubrics):
        raise ConfigError(f"{where}: no rubric item has positive points, so its score is undefined")


def load_responses(path: Path) -> dict[str, str]:
    """`--responses FILE`: JSONL of `{"prompt_id", "response"}` -> {prompt_id: response}."""
    responses: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, row in read_jsonl(path, "--responses"):
        where = f"{path}:{number}"
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: each line is {{\"prompt_id\": str, \"response\": str}}")
        prompt_id, response = row.get("prompt_id"), row.get("response")
        if not isinstance(prompt_id, str) or not prompt_id:
            raise ConfigError(f"{where}: \"prompt_id\" must be a non-empty string")
        if not isinstance(response, str):
            raise ConfigError(f"{where}: \"response\" of {prompt_id!r} must be a string")
        if prompt_id in responses:
            raise ConfigError(f"{where}: a second response for prompt_id {prompt_id!r} (the first is on line "
                              f"{first_line[prompt_id]}); give one response per prompt_id")
        responses[prompt_id] = response
        first_line[prompt_id] = number
    if not responses:
        raise ConfigError(f"{path}: --responses file has no responses")
    return responses


def check_responses(responses: Mapping[str, str], samples: Sequence[Sample], path: str) -> None:
    """Every example to grade needs a response in the file; a ConfigError names the first that lack one."""
    missing = [str(s["id"]) for s in samples if s["id"] not in responses]
    if missing:
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        shown = ", ".join(repr(m) for m in missing[:10]) + more
        raise ConfigError(f"{path}: no response for {len(missing)} of the {len(samples)} examples to grade: {shown}; "
                          "give one {\"prompt_id\", \"response\"} line per example (or --limit the dataset)")



def rubric_item_text(item: Mapping[str, Any]) -> str:
    """`str(RubricItem)` of the reference: `[points] criterion` (an int prints as 7, a float as 7.0)."""
    return f"[{item['points']}] {item['criterion']}"


def render_conversation(prompt: Sequence[Mapping[str, Any]], response: str) -> str:
    """The `<<conversation>>` text: each message as `role: content`, the response appended as the
    last assistant turn, joined by a blank line (scoring.md A5)."""
    messages = [*prompt, {"role": "assistant", "content": response}]
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)
