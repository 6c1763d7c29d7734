"""The ssh backend: the tmux backend on another host, reached with fabric (one connection per host).

Every step on the node is one ssh round trip running `ssh_agent.py` there (stdlib Python):
preflight checks commands, ports, tmux and the session before anything starts anywhere; launch
starts each process in a window of the node's tmux session `ops-<topology>-<node>` with the same
script as the local tmux backend (quoted argv and env, `ulimit -n` capped at the node's hard limit,
line-buffered `tee -a` to the log on the node); poll reads liveness (pid + start ticks) and new log
bytes, at most every POLL_S; stop kills the process groups there and verifies that no process,
listening port or session is left. Logs stay on the node: `ops logs` reads them over ssh.
"""

from __future__ import annotations

import base64
import posixpath
import shlex
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestra_ops.config.nodes import SshSettings
from orchestra_ops.errors import LaunchError
from orchestra_ops.fleet.backends import ssh_agent
from orchestra_ops.fleet.backends.base import LaunchContext, Launched, NodeGroup, NodeView, ProcessView, StopReport
from orchestra_ops.fleet.backends.sshconn import SshError, SshPool, SshTarget
from orchestra_ops.fleet.backends.tmux import session_name, window_script
from orchestra_ops.fleet.process_spec import ProcessSpec
from orchestra_ops.fleet.state import NodeRecord, ProcessRecord

POLL_S = 0.5  # at most one liveness/log round trip per node this often while waiting
AGENT_SOURCE = Path(ssh_agent.__file__).read_text(encoding="utf-8")


def target_of(node: NodeRecord) -> SshTarget:
    return SshTarget.from_json(node.name, node.handle)


class SshBackend:
    name = "ssh"

    def __init__(self) -> None:
        self.pool = SshPool(AGENT_SOURCE)
        self._checked: dict[str, dict[str, Any]] = {}  # node -> the agent's `check` answer
        self._last_poll: dict[str, tuple[float, NodeView]] = {}

    # ---- the helper on the node ---------------------------------------------------------------

    def agent(self, node: NodeRecord, action: str, payload: dict[str, Any], timeout: float = 120.0) -> Any:
        session = self.pool.agent(target_of(node), node.handle.get("python") or "python3")
        return session.request(action, payload, timeout)

    # ---- the Backend protocol -------------------------------------------------------------------

    def node_record(self, group: NodeGroup, ctx: LaunchContext) -> NodeRecord:
        settings = group.node.ssh or SshSettings()
        host = group.node.host or ""
        target = SshTarget(
            node=group.name, host=host, user=settings.user, port=settings.port,
            identity_file=_absolute(settings.identity_file, ctx.cwd), jump=settings.jump,
            known_hosts=_absolute(settings.known_hosts, ctx.cwd) or "~/.ssh/known_hosts",
            host_key_check=settings.host_key_check, connect_timeout_s=settings.connect_timeout_s)
        handle = {**target.to_json(), "socket": ctx.tmux_socket or settings.tmux_socket,
                  "session": session_name(ctx.topology, group.name), "python": settings.python,
                  "workdir": settings.workdir}
        return NodeRecord(name=group.name, backend=self.name, host=host, handle=handle)

    def preflight(self, group: NodeGroup, ctx: LaunchContext) -> list[str]:
        node = self.node_record(group, ctx)
        try:
            answer = self.agent(node, "check", {
                "commands": sorted({word for spec in group.specs for word in (spec.argv[0], spec.engine_argv[0])}
                                   | {"tmux"}),
                "ports": [[spec.bind_host, port] for spec in group.specs for port in (spec.port, *spec.more_ports)],
                "socket": node.handle["socket"], "session": node.handle["session"]})
        except SshError as exc:
            return [str(exc)]
        self._checked[group.name] = answer
        label = self.pool.label(target_of(node))
        problems = []
        for command in answer["missing"]:
            users = [spec.name for spec in group.specs if command in (spec.argv[0], spec.engine_argv[0])]
            what = f" (for {', '.join(users[:3])}{' …' if len(users) > 3 else ''})" if users else ""
            problems.append(f"{label}: command not found there: {command}{what}; PATH there is {answer['path']}")
        for port in answer["ports_taken"]:
            problems.append(f"{label}: port {port} is already in use there")
        if answer["session_exists"]:
            problems.append(f"{label}: tmux session '{node.handle['session']}' already exists there; "
                            f"`ops down {ctx.topology}` first")
        return problems

    def run_on_node(self, group: NodeGroup, ctx: LaunchContext, argv: list[str], env: dict[str, str],
                    timeout: float) -> tuple[int, str, str]:
        """Run one command to its end on the node, in its workdir (else the login's home)."""
        node = self.node_record(group, ctx)
        try:
            answer = self.agent(node, "run", {"argv": argv, "env": env, "cwd": node.handle["workdir"],
                                              "timeout": timeout}, timeout=timeout + 30)
        except SshError as exc:
            return 255, "", str(exc)
        return int(answer["code"]), str(answer["stdout"]), str(answer["stderr"])

    def launch(self, group: NodeGroup, ctx: LaunchContext) -> Launched:
        node = self.node_record(group, ctx)
        checked = self._checked.get(group.name)
        if checked is None:
            problems = self.preflight(group, ctx)
            if problems:
                raise LaunchError("\n".join(problems))
            checked = self._checked[group.name]
        workdir = node.handle["workdir"] or checked["home"]
        node = replace(node, handle={**node.handle, "workdir": workdir})
        stdbuf = ["stdbuf", "-oL", "-eL"] if checked["stdbuf"] else []
        windows = []
        for spec in group.specs:
            log = spec.log if posixpath.isabs(spec.log) else posixpath.join(workdir, spec.log)
            script = window_script([*stdbuf, *spec.argv], spec.env, log, ctx.nofile, checked["path"])
            windows.append({"name": spec.name, "log": log, "header": spec.reproduce, "script": script})
        answer = self.agent(node, "launch", {"socket": node.handle["socket"], "session": node.handle["session"],
                                             "workdir": workdir, "windows": windows})
        by_name = {spec.name: spec for spec in group.specs}
        logs = {window["name"]: window["log"] for window in windows}
        records = [_record(by_name[item["name"]], group.name, logs[item["name"]], item) for item in answer["started"]]
        if answer["error"]:
            self.stop(node, records, timeout=5)
            raise LaunchError(f"{self.pool.label(target_of(node))}: {answer['error']}")
        return Launched(node, records)

    def poll(self, node: NodeRecord, records: Sequence[ProcessRecord],
             log_offsets: Mapping[str, int] | None = None) -> NodeView:
        now = time.monotonic()
        last = self._last_poll.get(node.name)
        if last is not None and now - last[0] < POLL_S:
            return NodeView(node=node, processes={name: replace(view, log=b"", log_end=None)
                                                  for name, view in last[1].processes.items()},
                            failure=last[1].failure)
        procs = [{"name": r.name, "pid": r.pid, "start_ticks": r.handle.get("start_ticks"), "log": r.log,
                  "offset": None if log_offsets is None else log_offsets.get(r.name, r.log_offset)}
                 for r in records if r.pid is not None]
        try:
            answer = self.agent(node, "poll", {"procs": procs})["procs"]
        except SshError as exc:
            view = NodeView(node=node, processes={}, state="unreachable", failure=str(exc))
        else:
            views = {}
            for name, item in answer.items():
                data = base64.b64decode(item["log"]) if "log" in item else b""
                views[name] = ProcessView(alive=item["alive"], uptime_s=item["uptime_s"], log=data,
                                          log_end=item.get("log_end"))
            view = NodeView(node=node, processes=views)
        self._last_poll[node.name] = (now, view)
        return view

    def stop(self, node: NodeRecord, records: Sequence[ProcessRecord], timeout: float) -> StopReport:
        report = StopReport()
        label = self.pool.label(target_of(node))
        payload = {"procs": [{"name": r.name, "pid": r.pid, "start_ticks": r.handle.get("start_ticks")}
                             for r in records if r.pid is not None],
                   "socket": node.handle.get("socket"), "session": node.handle.get("session"),
                   "ports": [[r.handle.get("bind", "0.0.0.0"), port] for r in records for port in r.all_ports],
                   "timeout": timeout}
        try:
            answer = self.agent(node, "stop", payload, timeout=timeout * 2 + 60)
        except SshError as exc:
            report.errors.append(f"{exc} (its processes may still run there; the fleet stays recorded as up: "
                                 "`ops down` again once the node is reachable)")
            return report
        report.terminated += answer["terminated"]
        report.killed += answer["killed"]
        report.already_gone += answer["already_gone"]
        report.leftovers += answer["leftovers"]
        report.ports_listening += answer["ports_listening"]
        if answer["session_left"]:
            report.sessions_left.append(f"{answer['session_left']} on {label}")
        return report

    def tail(self, node: NodeRecord, record: ProcessRecord, lines: int, *, settle: bool = False) -> list[str]:
        answer = self.agent(node, "tail", {"log": record.log, "offset": record.log_offset, "lines": lines,
                                           "settle": settle})
        if answer["lines"] is None:
            raise SshError(f"{self.pool.label(target_of(node))}: {record.log}: no such log file there")
        return list(answer["lines"])

    def follow(self, node: NodeRecord, record: ProcessRecord) -> Iterator[str]:
        return self.pool.stream(target_of(node), f"tail -n 0 -F {shlex.quote(record.log)}")

    def close(self) -> None:
        self.pool.close()


def _absolute(path: str | None, cwd: Path) -> str | None:
    """A path from the topology, as an absolute path on this machine (`~` expanded)."""
    if path is None:
        return None
    expanded = Path(path).expanduser()
    return str(expanded if expanded.is_absolute() else cwd / expanded)


def _record(spec: ProcessSpec, node: str, log: str, started: dict[str, Any]) -> ProcessRecord:
    pid = int(started["pid"])
    return ProcessRecord(
        name=spec.name, group=spec.group, kind=spec.kind, node=node, backend=SshBackend.name, host=spec.host,
        port=spec.port, log=log, argv=list(spec.argv), env=dict(spec.env), served_model_name=spec.served_model_name,
        endpoint_key=spec.endpoint_key, adapters=list(spec.adapters), pid=pid, pgid=pid, sid=pid,
        log_offset=started["offset"],
        handle={"window": started["window"], "start_ticks": started["start_ticks"], "bind": spec.bind_host},
        **spec.layout_fields(),
    )
