"""The slurm backend: one sbatch job per node, its processes started by the job's script (sbatch.py).

The log dir must be on a filesystem the compute nodes share with this machine (as a home directory
usually is): replica logs and the job log are read here. While `ops up` waits:

  - job state comes from squeue/scontrol, polled with backoff (POLL_FIRST_S, x POLL_GROWTH, at most
    POLL_MAX_S) and shared by every slurm node of the fleet (one squeue call for all jobs);
  - the job log is read every round (a local file): `ops-job: exited NAME status=N` marks a replica
    dead, and slurmstepd's `*** JOB … CANCELLED …` line ends the wait at once, before squeue says so;
  - once the job runs, the node squeue names is the host of its processes (endpoints are written then).

`ops down` is scancel, then waiting until the job is gone (SIGKILL after the timeout), then a check
that no port of its processes still answers.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from orchestra_ops.config.nodes import SlurmSettings
from orchestra_ops.core.logtail import tail
from orchestra_ops.core.paths import topology_dir
from orchestra_ops.errors import LaunchError
from orchestra_ops.fleet.argv_check import check_argv
from orchestra_ops.fleet.backends.base import LaunchContext, Launched, NodeGroup, NodeView, ProcessView, StopReport
from orchestra_ops.fleet.backends.localprocs import LocalLogs, absolute_log, open_log, read_new, resolve_argv
from orchestra_ops.fleet.backends.sbatch import Replica, SbatchJob, parse_exit, parse_hosts, render_sbatch
from orchestra_ops.fleet.backends.slurmctl import JobInfo, SlurmCli
from orchestra_ops.fleet.state import NodeRecord, ProcessRecord

log = logging.getLogger(__name__)

POLL_FIRST_S = 0.5
POLL_GROWTH = 1.5
POLL_MAX_S = 10.0
JOB_END_LINE = re.compile(r"\*\*\* JOB (\d+) ON (\S+) ((?:CANCELLED|DUE TO)[^*]*?)\s*\*\*\*")
TAIL_LINES = 20


class SlurmBackend(LocalLogs):
    name = "slurm"

    def __init__(self, cli: SlurmCli | None = None) -> None:
        self.cli = cli or SlurmCli()
        self._jobs: dict[str, JobInfo] = {}  # the latest answer for every job this backend has seen
        self._next_query = 0.0
        self._interval = POLL_FIRST_S
        self._job_logs: dict[str, tuple[int, list[str]]] = {}  # node -> (offset read to, ops-job lines)
        self._lock = threading.Lock()

    # ---- launch ---------------------------------------------------------------------------------

    def preflight(self, group: NodeGroup, ctx: LaunchContext) -> list[str]:
        label = f"node {group.name} (slurm)"
        missing = self.cli.missing()
        if missing:
            return [f"{label}: slurm commands not found here: {', '.join(missing)}; run `ops up` on a machine that "
                    "can submit jobs (a login node)"]
        settings = group.node.slurm or SlurmSettings()
        if settings.partition:
            known = self.cli.partitions()
            if known is not None and settings.partition not in known:
                return [f"{label}: slurm has no partition '{settings.partition}' (partitions: "
                        f"{', '.join(known) or 'none'})"]
        return []

    def launch(self, group: NodeGroup, ctx: LaunchContext) -> Launched:
        settings = group.node.slurm or SlurmSettings()
        base = topology_dir(ctx.topology)
        base = base if base.is_absolute() else ctx.cwd / base
        job_log = absolute_log_path(ctx, f"{ctx.log_dir.rstrip('/')}/{group.name}.slurm.log")
        job_log.parent.mkdir(parents=True, exist_ok=True)
        job_offset = job_log.stat().st_size if job_log.exists() else 0
        records, replicas = [], []
        checked: set[str] = set()  # one vLLM check per model, on its first replica
        for spec in group.specs:
            log_file = absolute_log(spec, ctx.cwd)
            offset = open_log(log_file, spec.reproduce)
            argv = resolve_argv(spec.argv)  # `ops` is this installation: the nodes share this filesystem
            check = check_argv(argv[spec.gate:]) if spec.kind == "vllm" and spec.group not in checked else None
            if spec.kind == "vllm":  # (a Ray node of the model comes first: its server is what vLLM checks)
                checked.add(spec.group)
            replicas.append(Replica(spec.name, str(log_file), spec.gpus, dict(spec.env), argv, check, spec.host_index))
            records.append(ProcessRecord(
                name=spec.name, group=spec.group, kind=spec.kind, node=group.name, backend=self.name, host=None,
                port=spec.port, log=str(log_file), argv=argv, env=dict(spec.env),
                served_model_name=spec.served_model_name, endpoint_key=spec.endpoint_key, adapters=list(spec.adapters),
                log_offset=offset, **spec.layout_fields()))
        job = SbatchJob(topology=ctx.topology, node=group.name, settings=settings, nofile=ctx.nofile,
                        job_log=str(job_log), workdir=str(ctx.cwd), replicas=tuple(replicas))
        script = base / "slurm" / f"{group.name}.sbatch"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(render_sbatch(job), encoding="utf-8")
        try:
            job_id = self.cli.submit(str(script))
        except LaunchError as exc:
            raise LaunchError(f"node {group.name} (slurm): {exc} (asked for: {_asked(settings)}; script "
                              f"{script})") from None
        log.info("node %s: submitted slurm job %s", group.name, job_id)
        self.watch(job_id)
        node = NodeRecord(name=group.name, backend=self.name, host=None,
                          handle={"job_id": job_id, "job_log": str(job_log), "job_log_offset": job_offset,
                                  "script": str(script), "bind": group.specs[0].bind_host if group.specs else ""})
        return Launched(node, records)

    # ---- state ----------------------------------------------------------------------------------

    def job(self, node: NodeRecord, *, fresh: bool = False) -> JobInfo | None:
        """The latest known state of the node's job; queries slurm when the backoff allows (or `fresh`)."""
        job_id = node.handle.get("job_id")
        if not job_id:
            return None
        if job_id not in self._jobs:  # a job this backend did not submit: ask about it now
            fresh = True
            self.watch(job_id)
        with self._lock:  # nodes are polled from threads: one squeue call answers all of them
            now = time.monotonic()
            scheduled = now >= self._next_query
            if fresh or scheduled:
                self._jobs.update(self.cli.jobs(list(self._jobs)))
            if scheduled:
                self._next_query = now + self._interval
                self._interval = min(POLL_MAX_S, self._interval * POLL_GROWTH)
            return self._jobs[job_id]

    def watch(self, job_id: str) -> None:
        """Include this job in every squeue call from now on (one call covers all of them)."""
        self._jobs.setdefault(job_id, JobInfo(job_id, "PENDING"))

    def job_events(self, node: NodeRecord) -> list[str]:
        """The `ops-job:` and slurmstepd lines of this run's job log (read incrementally)."""
        path = node.handle.get("job_log")
        if not path:
            return []
        offset, lines = self._job_logs.get(node.name, (int(node.handle.get("job_log_offset", 0)), []))
        data, _ = read_new(path, offset)
        complete = data[:data.rfind(b"\n") + 1]
        for raw in complete.decode("utf-8", errors="replace").splitlines():
            if raw.startswith("ops-job:") or "*** JOB" in raw:  # (`ops-job: hosts …` for a job of several nodes)
                lines.append(raw.strip())
        self._job_logs[node.name] = (offset + len(complete), lines)
        return lines

    def poll(self, node: NodeRecord, records: Sequence[ProcessRecord],
             log_offsets: Mapping[str, int] | None = None) -> NodeView:
        before = len(self._job_logs.get(node.name, (0, []))[1])
        events = self.job_events(node)
        news = events[before:]  # the job began or slurm ended it: ask slurm now rather than at the next backoff
        info = self.job(node, fresh=any(e.startswith("ops-job: job ") or "*** JOB" in e for e in news))
        if info is None:
            return NodeView(node=node, processes={r.name: ProcessView(alive=False) for r in records})
        exits = dict(filter(None, (parse_exit(line) for line in events)))
        ended = next((m for m in map(JOB_END_LINE.search, events) if m), None)
        began = any(line.startswith("ops-job: job ") for line in events)  # the script runs (squeue may lag)
        running = info.running or (began and info.active)
        started = running or bool(exits) or not info.waiting  # an ended job will not start any more
        hosts = next((found for found in map(parse_hosts, events) if found), None)
        if running and hosts and (node.host, node.handle.get("hosts")) != (hosts[0], hosts):
            node = replace(node, host=hosts[0], handle={**node.handle, "hosts": hosts})  # a job of several nodes
        elif running and info.nodes and not hosts and node.host != info.nodes:
            node = replace(node, host=info.nodes)
        node = replace(node, handle={**node.handle, "state": info.state, "reason": info.reason})
        uptime = time.time() - info.start_time if running and info.start_time else None
        views = {}
        for record in records:
            data, end = b"", None
            if log_offsets is not None and started:
                data, end = read_new(record.log, log_offsets.get(record.name, record.log_offset))
            alive = running and record.name not in exits and ended is None
            views[record.name] = ProcessView(alive=alive, started=started, exit_code=exits.get(record.name),
                                             uptime_s=uptime if alive else None, log=data, log_end=end)
        failure = None
        if ended is not None:
            failure = f"slurm job {ended.group(1)} on {ended.group(2)}: {ended.group(3)}"
        elif not info.active and not exits:
            failure = info.describe()
        return NodeView(node=node, processes=views, state=info.describe(), failure=failure,
                        failure_log=tail(node.handle["job_log"], TAIL_LINES,
                                         start=int(node.handle.get("job_log_offset", 0))) if failure else [])

    # ---- down -----------------------------------------------------------------------------------

    def stop(self, node: NodeRecord, records: Sequence[ProcessRecord], timeout: float) -> StopReport:
        report = StopReport()
        names = [record.name for record in records]
        job_id = node.handle.get("job_id")
        if not job_id:
            report.already_gone += names
            return report
        info = self.cli.jobs([job_id])[job_id]
        if not info.active:
            report.already_gone += names
        else:
            error = self.cli.cancel([job_id])
            if error:
                report.errors.append(f"node {node.name}: scancel {job_id} failed: {error}")
                return report
            info = self._wait_gone(job_id, timeout)
            killed = info.active
            if killed:
                log.info("slurm job %s still %s after %.0f s: SIGKILL", job_id, info.state, timeout)
                self.cli.cancel([job_id], kill=True)
                info = self._wait_gone(job_id, max(30.0, timeout))
            (report.killed if killed else report.terminated).extend(names)
        if info.active:
            report.jobs_left.append(f"node {node.name}: {info.describe()} is still there")
        for record in records:  # on a job of several nodes each process's own host; a Ray node's every port
            host = record.host or node.host or info.nodes
            report.ports_listening += [f"port {port} on {host} still answers" for port in record.all_ports
                                       if host and _answers(host, port)]
        return report

    def _wait_gone(self, job_id: str, timeout: float) -> JobInfo:
        deadline, interval = time.monotonic() + timeout, 0.2
        info = self.cli.jobs([job_id])[job_id]
        while info.active and time.monotonic() < deadline:
            time.sleep(interval)
            interval = min(2.0, interval * 1.5)
            info = self.cli.jobs([job_id])[job_id]
        return info

    def close(self) -> None:
        return None


def absolute_log_path(ctx: LaunchContext, path: str) -> Path:
    candidate = Path(path)
    return candidate if candidate.is_absolute() else ctx.cwd / candidate


def _asked(settings: SlurmSettings) -> str:
    parts = [f"partition {settings.partition}" if settings.partition else "the default partition"]
    if settings.gpus:
        parts.append(f"--gres=gpu:{settings.gpus}")
    return ", ".join(parts)


def _answers(host: str, port: int) -> bool:
    """Does something accept TCP connections on host:port?"""
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return True
    except OSError:
        return False

