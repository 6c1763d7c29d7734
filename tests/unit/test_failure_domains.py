"""Processes that step together are one failure domain: health takes the group's servers out when one
member is not serving, and repair restarts the whole group."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Mapping
from pathlib import Path

from orchestra_ops.client.affinity import Affinity, stable_hash
from orchestra_ops.client.callctx import session_scope
from orchestra_ops.client.chat import ModelClient
from orchestra_ops.client.dp_ranks import RANK_HEADER, rank_for, rank_headers
from orchestra_ops.client.pool import ReplicaPool
from orchestra_ops.client.replica import Replica
from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.routing import Routing, from_topology
from orchestra_ops.client.transport import Response
from orchestra_ops.config.loader import load_topology
from orchestra_ops.fleet.probes import Probe, State
from orchestra_ops.fleet.repair import with_failure_domains
from orchestra_ops.fleet.state import FleetState, ProcessRecord
from orchestra_ops.fleet.views import one_failure_domain
from tests.unit.test_client_pool import FakeTransport, replicas


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


class HeaderTransport(FakeTransport):
    """Records the headers of every call it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.headers: list[dict[str, str]] = []

    async def post(self, replica: Replica, url: str, body: bytes, headers: Mapping[str, str],
                   timeout: float) -> Response:
        self.headers.append(dict(headers))
        return await super().post(replica, url, body, headers, timeout)


def _rank_headers_sent(affinity: str, sessions: list[str | None]) -> list[str | None]:
    """The X-data-parallel-rank each call carried, one call per session (None: the call had no session)."""
    async def main() -> list[str | None]:
        transport = HeaderTransport()
        pool = ReplicaPool("m", replicas(1), transport, affinity=Affinity(affinity))  # type: ignore[arg-type]
        client = ModelClient(name="m", served_name="m", pool=pool, request_timeout_s=1,
                             retry=RetryPolicy(attempts=1), dp_ranks=4)
        for session in sessions:
            await client.chat([{"role": "user", "content": "q"}], session=session)
        return [h.get(RANK_HEADER) for h in transport.headers]
    return asyncio.run(main())


def test_a_sessions_calls_carry_one_rank_with_affinity_on_and_none_otherwise() -> None:
    sessions: list[str | None] = ["task-7", "task-7", None, "task-2", "task-7"]
    assert _rank_headers_sent("session", sessions) == [
        str(rank_for("task-7", 4)), str(rank_for("task-7", 4)), None, str(rank_for("task-2", 4)),
        str(rank_for("task-7", 4))]  # the session's rank on every call; no session: vLLM balances
    assert _rank_headers_sent("none", sessions) == [None] * 5  # affinity off (--affinity none): no pinning
    with session_scope("task-7"):  # the calling context's session (callctx), as a suite's task sets it
        assert _rank_headers_sent("session", [None]) == [str(rank_for("task-7", 4))]
    assert rank_headers(1, "task-1") == {} and rank_headers(4, None) == {}  # nothing to pin
    assert {rank_for(f"task-{i}", 4) for i in range(64)} == {0, 1, 2, 3}  # a stable hash spreads sessions
    assert rank_for("task-3", 4) == stable_hash("task-3") % 4  # the affinity ring's hash: same in every process


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


def _dp_routing(tmp_path: Path, models: str) -> Routing:
    """The routing of a topology with nodes gpu8 (one host) and pair (two hosts) and these `models:` lines."""
    path = tmp_path / "dp.yaml"
    path.write_text("name: dp\nnodes: {gpu8: {host: gpu-box, gpus: 8}, pair: {hosts: [10.0.0.1, 10.0.0.2], gpus: 8}}\n"
                    "models:\n" + textwrap.indent(textwrap.dedent(models), "  "))
    return from_topology(load_topology(path), {}, source=str(path), endpoints_file="none")


def test_only_a_vllm_internal_model_pins_ranks_and_pin_ranks_false_turns_it_off(tmp_path: Path) -> None:
    routing = _dp_routing(tmp_path, """\
        internal: {model: org/M, node: gpu8, replicas: 4, port: 8000, data_parallel: {mode: vllm-internal}}
        unpinned: {model: org/N, node: gpu8, replicas: 2, port: 8100,
                   data_parallel: {mode: vllm-internal, pin_ranks: false, rpc_port: 29551}}
        external: {model: org/O, node: gpu8, replicas: 2, port: 8200,
                   data_parallel: {mode: vllm-external, expert_parallel: true, rpc_port: 29552}}
        """)
    assert {key: t.dp_ranks for key, t in routing.targets.items()} == {"internal": 4, "unpinned": 1, "external": 1}


def test_a_lockstep_pool_takes_the_whole_group_out_and_back_together() -> None:
    """External DP ranks step together: one refusing rank takes the others out at once (their calls would
    only hang), and the group serves again once every rank answers its probe, not when the first does."""
    async def main() -> None:
        transport = FakeTransport()
        pool = ReplicaPool("moe", replicas(3), transport, probe_interval_s=0.01, probe_max_interval_s=0.01,
                           unavailable_wait_s=5, lockstep=True)
        ejected: list[tuple[str, str]] = []
        pool.on_eject = lambda _pool, address, reason: ejected.append((address, reason))
        rank0, rank1, rank2 = pool.replicas
        transport.dead.add(rank0.address)  # an idle pool sends its first call to the first replica
        transport.health[rank2.address] = 503  # rank 2 is still starting after the group's restart
        client = ModelClient(name="moe", served_name="moe", pool=pool, request_timeout_s=1,
                             retry=RetryPolicy(attempts=5, backoff_base_s=0.001))
        call = asyncio.ensure_future(client.chat([{"role": "user", "content": "q"}]))
        await asyncio.sleep(0.1)
        assert transport.posts == [rank0.address]  # never sent to a rank whose partner is dead
        assert [r.healthy for r in pool.replicas] == [False, False, False] and not call.done()
        refused = f"{rank0.address}: connection refused"
        group = f"{rank0.address} of its group is out ({refused}): the group serves only whole"
        assert ejected == [(rank0.address, refused), (rank1.address, group),
                           (rank2.address, group)]
        transport.dead.clear()  # rank 0 is back, rank 2 still answers 503: nothing serves yet
        await asyncio.sleep(0.1)
        assert [r.healthy for r in pool.replicas] == [False, False, False] and not call.done()
        transport.health.clear()  # every rank answers: all back at once, and the waiting call goes out
        result = await asyncio.wait_for(call, 5)
        assert result.content == "ok" and [r.healthy for r in pool.replicas] == [True, True, True]
        assert transport.posts[1:] == [result.replica]
        await pool.close()
    asyncio.run(main())


def test_only_hybrid_and_external_dp_targets_are_lockstep(tmp_path: Path) -> None:
    routing = _dp_routing(tmp_path, """\
        internal: {model: org/M, node: gpu8, replicas: 2, port: 8000, data_parallel: {mode: vllm-internal}}
        external: {model: org/O, node: gpu8, replicas: 2, port: 8200,
                   data_parallel: {mode: vllm-external, rpc_port: 29552}}
        alone: {model: org/P, node: gpu8, replicas: 1, port: 8300, data_parallel: {mode: vllm-external,
                rpc_port: 29553}}
        hybrid: {model: org/H, node: pair, replicas: 4, port: 8500,
                 data_parallel: {mode: vllm-hybrid, rpc_port: 13400}}
        dense: {model: org/D, node: gpu8, replicas: 2, port: 8400}
        """)
    assert {key: t.lockstep for key, t in routing.targets.items()} == {
        "internal": False, "external": True, "alone": False, "hybrid": True, "dense": False}
