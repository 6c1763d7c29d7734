"""Resume reads a line from its head (`{"id": …, "status": …`): the same ids and statuses as a full parse."""

from __future__ import annotations

import json
from pathlib import Path

from orchestra_ops.runner.results import ResultsStore


def test_heads_give_what_full_parses_give(tmp_path: Path) -> None:
    records = [{"id": "plain", "status": "ok", "calls": [{"a": 1}]}, {"id": 'quo"te\\d', "status": "error"},
               {"id": "ünïcødé", "status": "ok"}, {"id": 42, "status": "ok"}, {"id": -7, "status": "error"},
               {"id": 1.5, "status": "ok"}, {"status": "ok", "id": "late-id"}, {"id": "x", "status": "ok", "y": None}]
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    lines.insert(3, '{"id": "broken", "status": "ok", "calls": [')  # a complete line that is not JSON
    (tmp_path / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = ResultsStore(tmp_path)
    assert store.final == {"plain": "ok", 'quo"te\\d': "error", "ünïcødé": "ok", 42: "ok", -7: "error",
                           json.dumps(1.5): "ok", "late-id": "ok", "x": "ok"}
    assert (store.lines, store.bad_lines) == (8, 1)
