"""`ops export RUN --format inspect`: a real gsm8k run over a sim, written as an Inspect AI log and read
back by inspect_ai's own `read_eval_log`, field by field; a gateway run dir is refused."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from tests.helpers import free_port, kill_tree, run_ops
from tests.simserver import SimServer


@pytest.fixture(scope="module")
def gsm8k_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inspect")
    with SimServer("m", args=["--latency-ms", "1", "--fail", "500:0"]) as sim:
        config = root / "mc.json"
        config.write_text(json.dumps({"m": [{"ip_addr": "127.0.0.1", "port": sim.port}]}))
        done = run_ops(["eval", "gsm8k", "--no-analyze", "--model-config", str(config), "--model", "m", "--limit", "4",
                        "--run-dir", str(root / "run")], cwd=root, timeout=240)
    assert done.returncode == 0, done.stderr
    return root / "run"


def test_exported_log_reads_back_field_by_field(gsm8k_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "logs" / "gsm8k.eval"
    done = run_ops(["export", str(gsm8k_run), "--format", "inspect", "--out", str(out), "--json"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"out": str(out), "samples": 4, "errors": 0, "suite": "gsm8k"}
    records = [json.loads(line) for line in (gsm8k_run / "results.jsonl").read_text().splitlines()]
    dataset = [json.loads(line) for line in (Path(json.loads((gsm8k_run / "run.json").read_text())["dataset"])
                                             / "test.jsonl").read_text().splitlines()]
    log = read_eval_log(str(out))
    assert (log.status, log.eval.task, log.eval.model) == ("success", "gsm8k", "m")
    assert (log.results.total_samples, log.results.completed_samples) == (4, 4)
    assert log.samples is not None and len(log.samples) == 4
    for sample, record in zip(log.samples, records, strict=True):
        assert sample.id == record["id"]
        assert sample.target == record["gold"]
        assert sample.output.completion == record["prediction"]
        assert sample.scores["correct"].value == ("C" if record["correct"] else "I")
        assert sample.scores["correct"].answer == record["extracted"]
        usage = sample.model_usage["m"]
        assert (usage.input_tokens, usage.output_tokens) == (record["usage"]["prompt_tokens"],
                                                             record["usage"]["completion_tokens"])
        index = int(record["sample"].split("/")[1])
        assert sample.input == dataset[index]["question"]  # the suite's own unit: the question asked
        assert sample.total_time == pytest.approx(record["elapsed"])
    again = run_ops(["export", str(gsm8k_run), "--format", "inspect", "--out", str(out)])
    assert again.returncode == 2 and "exists; pass --overwrite" in again.stderr


def test_inspect_view_opens_the_exported_log(gsm8k_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "gsm8k.eval"
    assert run_ops(["export", str(gsm8k_run), "--format", "inspect", "--out", str(out)]).returncode == 0
    port = free_port()
    view = [str(Path(sys.executable).parent / "inspect"), "view", "--log-dir", str(tmp_path), "--host", "127.0.0.1",
            "--port", str(port)]
    with open(tmp_path / "view.log", "wb") as log:
        proc = subprocess.Popen(view, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp_path)
    try:
        listing = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and listing is None:
            assert proc.poll() is None, (tmp_path / "view.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/logs", timeout=5) as resp:
                    listing = json.loads(resp.read())
            except OSError:
                time.sleep(0.5)
        assert listing is not None, "inspect view did not answer"
        assert [(f["name"], f["task"]) for f in listing["files"]] == [(out.as_uri(), "gsm8k")]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/logs/{out.name}", timeout=30) as resp:
            opened = json.loads(resp.read())
        assert (opened["status"], opened["eval"]["task"], opened["results"]["total_samples"]) == ("success", "gsm8k", 4)
    finally:
        kill_tree(proc.pid)


def test_gateway_run_dir_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "gateway-x"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"suite": "gateway", "topology": "x"}))
    (run_dir / "profile.jsonl").write_text(json.dumps({"type": "model_call", "task": None, "role": "m",
                                                       "model": "m", "replica": "h:1", "start": 1.0, "latency": 0.1,
                                                       "prompt_tokens": 1, "completion_tokens": 1, "attempts": 1,
                                                       "status": "ok"}) + "\n")
    done = run_ops(["export", str(run_dir), "--format", "inspect", "--out", str(tmp_path / "x.eval")])
    assert done.returncode == 2
    assert f"{run_dir} is a gateway run dir" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x.eval").exists()
