"""How the slurm backend reads job state: squeue/scontrol parsing, one call for every job, backoff,
and the job log telling it about a start, an exit or a cancellation before squeue does."""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from orchestra_ops.fleet.backends import slurm as slurm_module
from orchestra_ops.fleet.backends.slurm import POLL_FIRST_S, POLL_GROWTH, POLL_MAX_S, SlurmBackend
from orchestra_ops.fleet.backends.slurmctl import GONE, SlurmCli
from orchestra_ops.fleet.state import NodeRecord, ProcessRecord


class FakeCli(SlurmCli):
    """Answers like squeue/scontrol from a table of job states; records every call."""

    def __init__(self, states: dict[str, str]) -> None:
        super().__init__()
        self.states = states
        self.argvs: list[list[str]] = []

    def run(self, args: Sequence[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        self.calls[args[0]] += 1
        self.argvs.append(list(args))
        if args[0] == "squeue":
            ids = args[args.index("-j") + 1].split(",")
            rows = [f"{j}|{self.states[j]}|{'Resources' if self.states[j] == 'PENDING' else 'None'}|"
                    f"{'' if self.states[j] == 'PENDING' else 'node7'}|2026-01-01T10:00:00"
                    for j in ids if j in self.states and self.states[j] != "FORGOTTEN"]
            return subprocess.CompletedProcess(args, 0, "\n".join(rows) + "\n", "")
        if args[0] == "scontrol":
            return subprocess.CompletedProcess(args, 1, "", "slurm_load_jobs error: Invalid job id specified")
        raise AssertionError(args)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _node(tmp_path: Path, job: str) -> NodeRecord:
    log = tmp_path / f"{job}.slurm.log"
    log.touch()
    return NodeRecord(name=f"n{job}", backend="slurm", host=None,
                      handle={"job_id": job, "job_log": str(log), "job_log_offset": 0})


def _record(name: str, node: str, tmp_path: Path) -> ProcessRecord:
    return ProcessRecord(name=name, group=name.split("/")[0], kind="sim", node=node, backend="slurm", host=None,
                         port=1, log=str(tmp_path / f"{name.replace('/', '-')}.log"), argv=["x"], env={},
                         served_model_name="m", endpoint_key="m")


def test_squeue_output_is_parsed_and_a_forgotten_job_is_gone() -> None:
    cli = FakeCli({"12": "RUNNING", "13": "PENDING", "14": "FORGOTTEN"})
    jobs = cli.jobs(["13", "12", "14"])
    assert cli.argvs[0] == ["squeue", "-h", "-t", "all", "-j", "12,13,14", "-o", "%i|%T|%r|%N|%S"]
    assert (jobs["12"].state, jobs["12"].nodes, jobs["12"].running) == ("RUNNING", "node7", True)
    assert (jobs["13"].describe(), jobs["13"].waiting) == ("slurm job 13 PENDING (Resources)", True)
    assert (jobs["14"].state, jobs["14"].active) == (GONE, False)
    assert cli.calls == {"squeue": 1, "scontrol": 1}  # scontrol only for the job squeue forgot


def test_polling_backs_off_and_asks_once_for_every_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(slurm_module.time, "monotonic", clock)
    cli = FakeCli({"1": "PENDING", "2": "PENDING"})
    backend = SlurmBackend(cli)
    nodes = [_node(tmp_path, "1"), _node(tmp_path, "2")]
    for node in nodes:
        backend.watch(node.handle["job_id"])  # as launch does for the jobs it submits
    queried_at = []
    for _ in range(600):  # ten minutes of readiness rounds, 0.1 s apart, both nodes each round
        before = cli.calls["squeue"]
        for node in nodes:
            view = backend.poll(node, [_record(f"m{node.name}/0", node.name, tmp_path)], {})
            assert view.state == f"slurm job {node.handle['job_id']} PENDING (Resources)"
        if cli.calls["squeue"] > before:
            queried_at.append(clock.now)
        clock.now += 0.1
    gaps = [round(b - a, 1) for a, b in itertools.pairwise(queried_at)]
    assert queried_at[0] == 1000.0  # the first round asks at once
    assert gaps[:4] == [0.5, 0.8, 1.2, 1.7]  # POLL_FIRST_S growing by POLL_GROWTH (rounded to 0.1 s rounds)
    assert max(gaps) == pytest.approx(POLL_MAX_S, abs=0.11)
    assert cli.calls["squeue"] == len(queried_at) <= 60 + 10  # about 6 a minute once backed off
    assert all(argv[5] == "1,2" for argv in cli.argvs if argv[0] == "squeue")  # one call for both jobs
    assert (POLL_FIRST_S, POLL_GROWTH) == (0.5, 1.5)


def test_the_job_log_reports_start_exit_and_cancel_before_squeue(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(slurm_module.time, "monotonic", clock)
    cli = FakeCli({"5": "PENDING"})
    backend = SlurmBackend(cli)
    node = _node(tmp_path, "5")
    records = [_record("a/0", node.name, tmp_path), _record("a/1", node.name, tmp_path)]
    view = backend.poll(node, records, {})
    assert [v.started for v in view.processes.values()] == [False, False] and view.node.host is None

    cli.states["5"] = "RUNNING"  # slurm started it; the job log says so before the backoff asks again
    log = Path(node.handle["job_log"])
    log.write_text("ops-job: job 5 on node7 with CUDA_VISIBLE_DEVICES=0,1\n")
    calls = cli.calls["squeue"]
    view = backend.poll(node, records, {})
    assert cli.calls["squeue"] == calls + 1  # new job-log lines: asked at once
    assert view.node.host == "node7" and [v.alive for v in view.processes.values()] == [True, True]

    with open(log, "a") as handle:
        handle.write("ops-job: exited a/1 status=2\n")
    view = backend.poll(node, records, {})
    assert (view.processes["a/1"].alive, view.processes["a/1"].exit_code) == (False, 2)
    assert view.processes["a/0"].alive and view.failure is None

    with open(log, "a") as handle:
        handle.write("slurmstepd: error: *** JOB 5 ON node7 CANCELLED AT 2026-01-01T10:05:00 DUE TO TIME LIMIT ***\n")
    view = backend.poll(node, records, {})
    assert view.failure == "slurm job 5 on node7: CANCELLED AT 2026-01-01T10:05:00 DUE TO TIME LIMIT"
    assert view.failure_log[-1].endswith("DUE TO TIME LIMIT ***")
    assert not view.processes["a/0"].alive
