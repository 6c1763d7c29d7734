"""A dataset whose lines lack the suite's fields is bad input before any call: the message names the file,
the line or id, the missing field, the fields the line has, and the format the suite reads (its README
example line where it has one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from orchestra_ops.evals.registry import load_suite

from orchestra_ops.errors import ConfigError

HLE = '{"id": "h1", "question": "How many sides has a hexagon? Give the number only.", "answer": "6"}'
FRAMES = '{"id": "f1", "question": "Which city hosted the 1900 Summer Olympics?", "answer": "Paris"}'
HEALTHBENCH = ('{"prompt_id": "p1", "prompt": [{"role": "user", "content": "I have a mild headache. What can I do?"}], '
               '"rubrics": [{"criterion": "Suggests rest and fluids.", "points": 5, "tags": ["axis:completeness"]}], '
               '"example_tags": ["theme:hedging"]}')


@pytest.mark.parametrize(("suite", "row", "message"), [
    ("chat", {"id": "x1", "question": "hi"},
     '{path}: 1 of 1 samples cannot be sent: sample \'x1\' has no "prompt" (its fields: id, question); the chat '
     'suite reads JSONL lines like {"id": "q1", "prompt": "What is the capital of France?"}'),
    ("hle", {"id": "x1", "prompt": "hi"},
     f'{{path}}: id \'x1\' has no "question" (its fields: id, prompt); the hle suite reads JSONL lines like {HLE}'),
    ("frames", {"id": "x1", "question": "hi"},
     f'{{path}}: id \'x1\' has no "answer" (its fields: id, question); the frames suite reads JSONL lines like '
     f'{FRAMES}'),
    ("healthbench", {"prompt_id": "p1", "prompt": [{"role": "user", "content": "hi"}]},
     f'{{path}}:1: no "rubrics" (its fields: prompt_id, prompt); the healthbench suite reads JSONL lines like '
     f'{HEALTHBENCH}'),
    ("gsm8k", {"prompt": "1 + 1?", "answer": "#### 2"},
     '{path}:1: no "question" (its fields: prompt, answer); a gsm8k line is {"question": …, "answer": "… #### 7"}'),
    ("humaneval", {"task_id": "T/0", "prompt": "def f():\n", "entry_point": "f", "test": 3},
     '{path}:1: "test" is not text (int); a humaneval line is {"task_id", "prompt", "entry_point", "test"} '
     '(strings)'),
])
def test_a_line_without_the_suites_field_names_it_and_the_format(tmp_path: Path, suite: str, row: dict[str, object],
                                                                  message: str) -> None:
    path = tmp_path / f"{suite}.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ConfigError) as info:
        load_suite(suite).load(path, dedupe=False)
    assert str(info.value) == message.replace("{path}", str(path))


@pytest.mark.parametrize("suite", ["hle", "frames", "healthbench", "chat"])
def test_the_example_line_a_message_shows_is_one_the_suite_reads(tmp_path: Path, suite: str) -> None:
    path = tmp_path / "one.jsonl"
    example = load_suite(suite).dataset_example
    path.write_text(example + "\n")
    assert len(load_suite(suite).load(path, dedupe=False)) == 1
