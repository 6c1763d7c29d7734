"""Random mutations of a valid topology give a plan or a TopologyError, never any other exception."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestra_ops.config.loader import validate_topology
from orchestra_ops.config.yamlpos import PositionedYaml
from orchestra_ops.errors import TopologyError
from orchestra_ops.fleet.plan import plan

BASE: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "topologies" / "hle_oss.yaml").read_text())

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10, max_value=70000),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["node1", "coder", "judge", "hermes", "openai", "sim", "vllm", "retrieval", "0.0.0.0"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=6)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _paths(value, (*prefix, index))
    return found


ALL_PATHS = _paths(BASE)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        path = draw(st.sampled_from(ALL_PATHS))
        parent: Any = data
        try:
            for part in path[:-1]:
                parent = parent[part]
            leaf = path[-1]
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                parent[leaf] = draw(values)
            elif action == "delete":
                del parent[leaf]
            elif isinstance(parent, dict):
                parent[draw(st.text(max_size=8))] = draw(values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or reshaped this path
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutations_give_plan_or_config_error(data: dict[str, Any]) -> None:
    try:
        topology = validate_topology(PositionedYaml(source="m.yaml", data=data))
    except TopologyError as exc:
        assert exc.problems and all(p.startswith("m.yaml:") for p in exc.problems)
        return
    launch_plan = plan(topology, state_dir="/s")
    assert len({(s.host, s.port) for s in launch_plan.processes}) == len(launch_plan.processes)
