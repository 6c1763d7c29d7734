"""Exports fail fast and clearly: an MLflow server that refuses or never answers is exit 3 in seconds; a
bad tracking URI, a filesystem store, a database in a read-only folder and a read-only `--out` are one
line and exit 2; W&B writes nothing outside `--out` (HOME and TMPDIR stay empty), and a read-only `--out`
is refused instead of W&B falling back to a temp dir. The read-only places are a real read-only tmpfs
(mounted by the test as root) or, for a user, a folder without write permission."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import free_port, run_ops
from tests.integration.eval_fixtures import dataset, model_config
from tests.simserver import SimServer


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished chat run for the module: the exports only read it."""
    work = tmp_path_factory.mktemp("export-faults")
    out = work / "run"
    with SimServer("m", args=["--latency-ms", "1"], log_dir=work) as sim:
        done = run_ops(["eval", "chat", "--model-config", str(model_config(work / "mc.json", {"m": [sim]})),
                        "--dataset", str(dataset(work / "d.jsonl", ["a", "b", "c"])), "--run-dir", str(out),
                        "--no-analyze"],
                       timeout=180)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder nothing can be written into: a read-only tmpfs as root, else a folder without write permission."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True,
                             text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def _why(_folder: Path) -> str:
    return "Read-only file system" if os.geteuid() == 0 else "Permission denied"


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr  # one line, no traceback
    return lines[0]


def test_an_mlflow_server_that_refuses_is_exit_3_in_seconds(run_dir: Path) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    result = run_ops(["export", str(run_dir), "--format", "mlflow", "--tracking-uri", uri], timeout=60)
    assert result.returncode == 3
    assert _one_error_line(result) == (f"error: MLflow at {uri} does not answer: connection refused (nothing listens "
                                       "there); start the server (`mlflow server …`) or point --tracking-uri elsewhere")


def test_an_mlflow_server_that_never_answers_is_exit_3(run_dir: Path) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", free_port()))
        silent.listen(8)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        result = run_ops(["export", str(run_dir), "--format", "mlflow", "--tracking-uri", uri], timeout=60)
    assert result.returncode == 3
    assert _one_error_line(result) == (f"error: MLflow at {uri} does not answer: no answer within 5 s; start the "
                                       "server (`mlflow server …`) or point --tracking-uri elsewhere")


FILESYSTEM = ("MLflow's filesystem backend (a path or file://) is in maintenance mode; point to a database, "
              "e.g. sqlite:///PATH/mlflow.db, or to an MLflow server (http://HOST:PORT)")


@pytest.mark.parametrize(("uri", "expected"), [
    ("notascheme://x y", "error: --tracking-uri 'notascheme://x y': not a tracking URI MLflow can use: an MLflow "
                         "server (http(s)://HOST:PORT) or a database (sqlite:///PATH, postgresql://…, mysql://…, "
                         "mssql://…), or databricks"),
    ("http://host name:5000", "error: --tracking-uri 'http://host name:5000': not a tracking URI MLflow can use: an "
                              "MLflow server (http(s)://HOST:PORT) or a database (sqlite:///PATH, postgresql://…, "
                              "mysql://…, mssql://…), or databricks"),
    ("file:///tmp/mlruns", f"error: --tracking-uri file:///tmp/mlruns: {FILESYSTEM}"),
    ("./mlruns", f"error: --tracking-uri ./mlruns: {FILESYSTEM}"),
])
def test_a_bad_tracking_uri_is_one_line_and_exit_2(run_dir: Path, uri: str, expected: str) -> None:
    result = run_ops(["export", str(run_dir), "--format", "mlflow", "--tracking-uri", uri], timeout=60)
    assert result.returncode == 2
    assert _one_error_line(result) == expected


def test_a_sqlite_store_in_a_read_only_folder_is_exit_2(run_dir: Path, read_only: Path) -> None:
    uri = f"sqlite:///{read_only}/mlflow.db"
    result = run_ops(["export", str(run_dir), "--format", "mlflow", "--tracking-uri", uri], timeout=60)
    assert result.returncode == 2
    assert _one_error_line(result) == (f"error: --tracking-uri {uri}: the folder {read_only}: cannot write there "
                                       f"({_why(read_only)})")


def test_wandb_writes_nothing_outside_out_and_refuses_a_read_only_out(
        run_dir: Path, read_only: Path, tmp_path: Path) -> None:
    home, temp, out = tmp_path / "home", tmp_path / "tmp", tmp_path / "out"
    home.mkdir()
    temp.mkdir()
    env = {"HOME": str(home), "TMPDIR": str(temp), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_CONFIG_HOME": str(home / ".config")}
    written = run_ops(["export", str(run_dir), "--format", "wandb", "--out", str(out), "--json"], env=env, timeout=180)
    assert written.returncode == 0, written.stderr
    offline = Path(json.loads(written.stdout)["offline_run_dir"])
    assert offline.parent == out / "wandb" and offline.is_dir()
    assert list(home.iterdir()) == [] and list(temp.iterdir()) == []  # nothing outside --out

    run_key = offline.name.rsplit("-", 1)[1]
    fallback = Path(tempfile.gettempdir()) / "wandb"
    before = set(fallback.glob(f"offline-run-*-{run_key}")) if fallback.is_dir() else set()
    refused = run_ops(["export", str(run_dir), "--format", "wandb", "--out", str(read_only)], env=env, timeout=180)
    assert refused.returncode == 2
    assert _one_error_line(refused) == f"error: --out {read_only}: cannot write there ({_why(read_only)})"
    assert list(home.iterdir()) == [] and list(temp.iterdir()) == []
    after = set(fallback.glob(f"offline-run-*-{run_key}")) if fallback.is_dir() else set()
    assert after == before  # no fallback run in the machine's temp dir


def test_tau2_and_toolorchestra_exports_refuse_a_read_only_out(tmp_path: Path, read_only: Path) -> None:
    for suite in ("tau2", "hle"):
        (tmp_path / suite).mkdir()
        (tmp_path / suite / "run.json").write_text(json.dumps({"suite": suite}))
    tau2 = run_ops(["export", str(tmp_path / "tau2"), "--format", "tau2", "--out", str(read_only / "r.json")])
    assert tau2.returncode == 2
    assert _one_error_line(tau2) == (f"error: --out {read_only / 'r.json'}: its folder {read_only}: cannot write "
                                     f"there ({_why(read_only)})")
    agent = run_ops(["export", str(tmp_path / "hle"), "--format", "toolorchestra", "--out", str(read_only / "x")])
    assert agent.returncode == 2
    assert _one_error_line(agent) == f"error: --out {read_only / 'x'}: cannot write there ({_why(read_only)})"
