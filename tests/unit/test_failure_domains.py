"""Processes that step together are one failure domain: health takes the group's servers out when one
member is not serving, and repair restarts the whole group."""

from __future__ import annotations

import contextvars

from orchestra_ops.client.callctx import current_task
from orchestra_ops.client.dp_ranks import RANK_HEADER, rank_for, rank_headers
from orchestra_ops.fleet.probes import Probe, State
from orchestra_ops.fleet.repair import with_failure_domains
from orchestra_ops.fleet.state import FleetState, ProcessRecord
from orchestra_ops.fleet.views import one_failure_domain


def _record(name: str, domain: str | None, role: str = "server") -> ProcessRecord:
    return ProcessRecord(name=name, group=name.split("/")[0], kind="vllm", host="h", port=1, log="x", argv=[],
                         env={}, served_model_name="m", endpoint_key="m", role=role, domain=domain)


STATE = FleetState(name="t", topology_file="t.yaml", status="up", started_at=0.0, cwd="/", processes=[
    _record("big/ray0", "big", "ray-head"), _record("big/0", "big"), _record("big/ray1", "big", "ray-worker"),
    _record("moe/0", "moe"), _record("moe/1", "moe"), _record("dense/0", None), _record("dense/1", None)])


def _probe(name: str, state: State) -> Probe:
    return Probe(name=name, host="h", port=1, state=state, latency_ms=1.0, pid=None, model="m")


def test_one_dead_member_restarts_its_whole_group_and_nothing_else() -> None:
    assert with_failure_domains(STATE, ["big/ray1"]) == ["big/ray0", "big/0", "big/ray1"]
    assert with_failure_domains(STATE, ["moe/1", "dense/0"]) == ["moe/0", "moe/1", "dense/0"]
    assert with_failure_domains(STATE, ["dense/1"]) == ["dense/1"]  # independent servers stay independent


def test_a_member_down_takes_the_groups_servers_out_of_health() -> None:
    probes = [_probe("big/ray0", State.READY), _probe("big/0", State.READY), _probe("big/ray1", State.DOWN),
              _probe("dense/0", State.READY), _probe("dense/1", State.DEAD)]
    out = {p.name: (p.state, p.detail) for p in one_failure_domain(STATE, probes)}
    assert out == {
        "big/ray0": (State.UNHEALTHY, "big/ray1 of its group is DOWN: the group serves only whole"),
        "big/0": (State.UNHEALTHY, "big/ray1 of its group is DOWN: the group serves only whole"),
        "big/ray1": (State.DOWN, ""), "dense/0": (State.READY, ""), "dense/1": (State.DEAD, "")}


def test_a_tasks_calls_carry_one_rank_and_calls_outside_a_task_none() -> None:
    def in_task(task: str | None) -> dict[str, str]:
        current_task.set(task)
        return rank_headers(4)

    assert contextvars.Context().run(in_task, None) == {}  # no task: vLLM balances
    assert rank_headers(1, "task-1") == {}  # one rank: nothing to pin
    assert contextvars.Context().run(in_task, "task-7") == {RANK_HEADER: str(rank_for("task-7", 4))}
    ranks = {rank_for(f"task-{i}", 4) for i in range(64)}
    assert ranks == {0, 1, 2, 3}  # a stable hash spreads tasks over every rank
    assert [rank_for("task-3", 4)] * 3 == [rank_for("task-3", 4) for _ in range(3)]


def test_a_job_of_several_nodes_gives_each_process_its_own_host() -> None:
    from dataclasses import replace

    from orchestra_ops.fleet.state import NodeRecord

    state = FleetState(name="t", topology_file="t.yaml", status="up", started_at=0.0, cwd="/",
                       nodes=[NodeRecord(name="alloc", backend="slurm", host=None)],
                       processes=[replace(_record("big/ray0", "big", "ray-head"), node="alloc", host=None),
                                  replace(_record("big/0", "big"), node="alloc", host=None),
                                  replace(_record("big/ray1", "big", "ray-worker"), node="alloc", host=None,
                                          host_index=1)])
    known = state.with_node(NodeRecord(name="alloc", backend="slurm", host="n1", handle={"hosts": ["n1", "n2"]}))
    assert [(p.name, p.host) for p in known.processes] == [("big/ray0", "n1"), ("big/0", "n1"), ("big/ray1", "n2")]
