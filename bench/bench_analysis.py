"""`ops analyze` and `ops compare` on run dirs the size of real ones.

1. Stats: a synthetic run dir with 10,000 tasks, 60,000 model calls and 15,000 tool calls (a full
   HLE run is ~1,900 tasks and ~10,000 calls); `compute` (every table, histogram and the timeline,
   no plots) against the floor of reading the same files (json.loads of every line).
2. Plots and report: the same run with matplotlib (Agg) and report.html.
3. Paired bootstrap (pure Python, 2,000 resamples) over 1,900 and 10,000 shared ids, against numpy
   doing the same resampling (the cost of keeping the CLI free of numpy).
Never asserts; returns 0.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

from orchestra_ops.analysis.analyze import analyze_run, compute
from orchestra_ops.analysis.rundata import load_run
from orchestra_ops.analysis.significance import paired_bootstrap
from tests.runfactory import model_event, tool_event, write_run

TASKS = 10_000
CALLS_PER_TASK = 6
TOOLS = ("search", "enhance_reasoning", "answer")


def _run_dir(root: Path) -> Path:
    rng = random.Random(1)
    events, results = [], []
    for task in range(TASKS):
        start = task * 0.05
        for call in range(CALLS_PER_TASK):
            role = "orchestrator" if call % 2 == 0 else "answer"
            events.append(model_event(role, start + call, rng.lognormvariate(0, 1), task=f"t{task}",
                                      prompt_tokens=rng.randint(100, 20_000), completion_tokens=rng.randint(1, 2000)))
        for tool in TOOLS[: 1 + task % 3]:
            latency = rng.lognormvariate(1, 1)
            events.append(tool_event(tool, start + 1, latency, expert=latency * 0.7,
                                     parts={"retrieval" if tool == "search" else "judge": latency * 0.3},
                                     task=f"t{task}"))
        results.append({"id": f"t{task}", "status": "ok", "correct": rng.random() < 0.4,
                        "elapsed": rng.lognormvariate(3, 1)})
    return write_run(root / "run", results=results, events=events, run_info={"suite": "hle"})


def _best(func: object, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        run = _run_dir(Path(tmp))
        events = (run / "profile.jsonl").read_bytes().count(b"\n")

        def floor() -> None:
            for name in ("profile.jsonl", "results.jsonl"):
                with open(run / name, "rb") as handle:
                    for line in handle:
                        json.loads(line)

        floor_s = _best(floor)
        stats_s = _best(lambda: compute(load_run(run)))
        start = time.perf_counter()
        analysis = analyze_run(run)
        full_s = time.perf_counter() - start
        plots = sum(len(files) for files in analysis.plots.values())
        print(f"run dir: {TASKS:,} tasks, {events:,} profile events")
        print(f"{'step':<44}{'seconds':>10}{'x floor':>10}")
        print(f"{'read + json.loads every line (floor)':<44}{floor_s:>10.2f}{1:>10.1f}")
        print(f"{'ops analyze: every table and histogram':<44}{stats_s:>10.2f}{stats_s / floor_s:>10.1f}")
        print(f"{f'ops analyze with {plots} plots and report.html':<44}{full_s:>10.2f}{full_s / floor_s:>10.1f}")

    rng = random.Random(2)
    print(f"\n{'paired bootstrap, 2,000 resamples':<44}{'python s':>10}{'numpy s':>10}{'ratio':>8}")
    for n in (1_900, 10_000):
        a = [float(rng.random() < 0.4) for _ in range(n)]
        b = [float(rng.random() < 0.45) for _ in range(n)]
        python_s = _best(lambda a=a, b=b: paired_bootstrap(a, b, resamples=2000), repeat=1)
        try:
            import numpy as np
        except ImportError:
            print(f"{f'n = {n:,} ids':<44}{python_s:>10.2f}{'-':>10}{'-':>8}")
            continue
        diff = np.array(b) - np.array(a)

        def with_numpy(diff: object = diff, n: int = n) -> None:
            gen = np.random.default_rng(0)
            means = np.empty(2000)
            for i in range(2000):
                means[i] = diff[gen.integers(0, n, n)].mean()  # type: ignore[index]
            np.percentile(means, [2.5, 97.5])

        numpy_s = _best(with_numpy, repeat=1)
        print(f"{f'n = {n:,} ids':<44}{python_s:>10.2f}{numpy_s:>10.2f}{python_s / numpy_s:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
