"""`aliases:` (tool alias -> role or model) and `tokenizer:` in a topology, and how routing carries them."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestra_ops.client.routing import from_topology
from orchestra_ops.config.loader import load_topology
from orchestra_ops.errors import TopologyError

BASE = """\
name: t
backend: local
nodes:
  n: {host: localhost, gpus: 0}
models:
  orch: {model: /ckpt/orchestrator, engine: sim, node: n, gpus_per_replica: 0, port: 9000, tokenizer: estimate}
  math: {model: sim/math, engine: sim, node: n, gpus_per_replica: 0, port: 9001}
services:
  retrieval: {kind: retrieval, node: n, port: 9100, index_dir: /i}
roles:
  orchestrator: orch
  answer: math
  index: retrieval
"""


def _load(tmp_path: Path, extra: str) -> object:
    path = tmp_path / "t.yaml"
    path.write_text(BASE + extra)
    return load_topology(path)


def test_aliases_and_tokenizer_reach_the_routing(tmp_path: Path) -> None:
    topology = _load(tmp_path, "aliases:\n  answer-math-1: math\n  answer-2: answer\n")
    routing = from_topology(topology, {"/ckpt/orchestrator": [{"ip_addr": "h", "port": 9000}]},  # type: ignore[arg-type]
                            source="t.yaml", endpoints_file="e.json")
    assert dict(routing.aliases) == {"answer-math-1": "math", "answer-2": "answer"}
    assert (routing.targets["orch"].tokenizer, routing.targets["orch"].checkpoint) == ("estimate", "/ckpt/orchestrator")


@pytest.mark.parametrize(("extra", "message"), [
    ("aliases:\n  search-1: retrieval\n",
     "t.yaml:15: aliases.search-1: 'retrieval' is a service; an alias names a role or a model that answers chats"),
    ("aliases:\n  search-1: index\n", "t.yaml:15: aliases.search-1: role 'index' names the service 'retrieval', "
                                      "not a model"),
    ("aliases:\n  search-1: nowhere\n", "t.yaml:15: aliases.search-1: 'nowhere' names no role, model or provider "
                                        "(answer, index, math, orch, orchestrator)"),
    ("aliases:\n  'bad alias': math\n", "t.yaml:14: aliases: 'bad alias' must be letters, digits, '.', '_' or '-'"),
])
def test_a_bad_alias_names_its_line(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(TopologyError) as caught:
        _load(tmp_path, extra)
    assert [p.removeprefix(f"{tmp_path}/") for p in caught.value.problems] == [message]
