"""A unit whose own files do not fit (a trajectory on a full disk) is missing, not failed, and stops the run."""

from __future__ import annotations

import asyncio
import errno
from typing import Any

from orchestra_ops.errors import DiskFull
from orchestra_ops.runner.engine import Controller, run_tasks
from orchestra_ops.runner.progress import Progress


def test_enospc_in_a_unit_stops_the_run_and_records_nothing_for_it() -> None:
    started: list[Any] = []
    recorded: list[Any] = []

    async def work(sample: dict[str, Any]) -> dict[str, Any]:
        started.append(sample["id"])
        if sample["id"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device", "/runs/x/trajectories/2.json")
        return {"answer": sample["id"]}

    controller = Controller()
    asyncio.run(run_tasks([{"id": i} for i in range(6)], work, concurrency=1, task_timeout_s=10,
                          on_done=lambda record, _: recorded.append(record), progress=Progress(total=6),
                          controller=controller))
    assert [r["id"] for r in recorded] == [0, 1] and all(r["status"] == "ok" for r in recorded)
    assert started == [0, 1, 2]  # no new task after the full disk
    assert isinstance(controller.failure, DiskFull)
    assert str(controller.failure).startswith("/runs/x/trajectories/2.json: no space left on device; the run stopped")
    assert controller.failure.exit_code == 4


def test_other_os_errors_cost_one_task() -> None:
    async def work(sample: dict[str, Any]) -> dict[str, Any]:
        if sample["id"] == 1:
            raise PermissionError(errno.EACCES, "Permission denied", "/x")
        return {}

    recorded: list[Any] = []
    controller = Controller()
    asyncio.run(run_tasks([{"id": i} for i in range(3)], work, concurrency=1, task_timeout_s=10,
                          on_done=lambda record, _: recorded.append(record), progress=Progress(total=3),
                          controller=controller))
    assert [(r["id"], r["status"]) for r in recorded] == [(0, "ok"), (1, "error"), (2, "ok")]
    assert recorded[1]["error"] == "PermissionError: [Errno 13] Permission denied: '/x'"
    assert controller.failure is None
