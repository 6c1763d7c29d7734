"""The sandbox with real programs: no provider key, no network (with bubblewrap), no writes outside
its directory, no fork bomb, no endless loop, no flood of output; and the next program still runs.

The fork-bomb test keeps its own blast radius small: it first runs a bounded program (at most 20
forks, each child sleeping then exiting) and only if every fork was refused does it run the real
bomb, for at most 2 s, while a watcher counts the sandbox's processes."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from orchestra_ops.errors import ConfigError
from orchestra_ops.sandbox import ExecResult, Isolation, Sandbox, SandboxPolicy, SandboxUnavailable, detect_isolation
from orchestra_ops.sandbox.layout import interpreter_roots
from tests.helpers import REPO, free_port

ISOLATION = detect_isolation()
needs_bwrap = pytest.mark.skipif(ISOLATION.bwrap is None, reason=f"no bubblewrap here: {ISOLATION.reason}")
needs_seccomp = pytest.mark.skipif(ISOLATION.seccomp is None, reason="no seccomp filter for this CPU")


def run(code: str, policy: SandboxPolicy | None = None) -> object:
    return asyncio.run(Sandbox(policy or SandboxPolicy(wall_time_s=20, workers=2)).run(code))


def test_a_program_runs_in_its_own_empty_directory_and_prints() -> None:
    result = run(f"import os\nprint(sorted(os.listdir('.')), os.getcwd() != {os.getcwd()!r})\n")
    assert result.stdout == "['main.py'] True\n"  # type: ignore[attr-defined]
    assert (result.returncode, result.status) == (0, "ok")  # type: ignore[attr-defined]


def test_a_provider_key_and_our_variables_are_invisible() -> None:
    """The key is in the real environment of the process that runs the sandbox (as it is for `ops eval`)."""
    code = ("import os\nnames = sorted(os.environ)\ntexts = [repr(dict(os.environ))]\n"
            "for pid in ['self', '1', str(os.getppid())] + [p for p in os.listdir('/proc') if p.isdigit()]:\n"
            "    try:\n        texts.append(open(f'/proc/{pid}/environ', 'rb').read().decode(errors='replace'))\n"
            "    except OSError as exc:\n        texts.append(str(exc))\n"
            "print(names)\nprint('sk-secret' in ''.join(texts), 'OPS_HOME' in ''.join(texts))\n")
    runner = ("import asyncio, sys\nfrom orchestra_ops.sandbox import Sandbox, SandboxPolicy\n"
              "print(asyncio.run(Sandbox(SandboxPolicy(wall_time_s=20)).run(sys.stdin.read())).stdout, end='')\n")
    env = {**os.environ, "OPENAI_API_KEY": "sk-secret-from-the-test", "OPS_HOME": "/secret/ops/home"}
    done = subprocess.run([sys.executable, "-c", runner], input=code, env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    names, leaked = done.stdout.splitlines()
    assert leaked == "False False"
    assert set(ast.literal_eval(names)) <= {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "PYTHONIOENCODING",
                                            "PYTHONDONTWRITEBYTECODE", "MPLBACKEND", "PWD", "LC_CTYPE"}


@needs_bwrap
def test_connecting_to_a_local_port_fails() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", free_port()))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        result = run("import socket\ns = socket.socket()\ns.settimeout(3)\n"
                     f"print(s.connect_ex(('127.0.0.1', {port})) != 0)\n")
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert result.stdout == "True\n"  # type: ignore[attr-defined]
    assert accepted == []


@needs_bwrap
def test_writing_outside_its_directory_fails(tmp_path: Path) -> None:
    outside = Path(tempfile.mkdtemp(prefix="sandbox-target-", dir=REPO))  # a writable dir outside /tmp
    try:
        targets = [tmp_path / "outside.txt", outside / "outside.txt", Path(sys.executable).parent / "outside.txt"]
        code = "open('inside.txt', 'w').write('ok')\n"
        for target in targets:
            code += (f"try:\n    open({str(target)!r}, 'w').write('x')\n    print('wrote')\n"
                     "except OSError:\n    print('blocked')\n")
        result = run(code)
        assert result.stdout == "blocked\n" * 3  # type: ignore[attr-defined]
        assert not any(target.exists() for target in targets)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_the_interpreter_roots_are_its_venv_and_installation_and_nothing_above(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        venv = Path(tmp) / "clone" / ".venv"
        (venv / "bin").mkdir(parents=True)
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (venv / "bin" / "python").symlink_to("/usr/bin/python3")
        unpacked = Path(tmp) / "python" / "bin"
        unpacked.mkdir(parents=True)
        (unpacked / "python3").touch()
        assert interpreter_roots(str(venv / "bin" / "python")) == (str(venv),)  # not the clone
        assert interpreter_roots(str(unpacked / "python3")) == (str(unpacked.parent),)
        home = Path(tmp) / "home"
        (home / "bin").mkdir(parents=True)
        (home / "bin" / "python3").touch()
        monkeypatch.setenv("HOME", str(home))
        with pytest.raises(ConfigError, match=f"would need {home} bound into the sandbox"):
            interpreter_roots(str(home / "bin" / "python3"))
    assert interpreter_roots("/usr/bin/python3") == ()
    ours = REPO / ".venv"
    if (ours / "pyvenv.cfg").is_file():  # this checkout's venv: the venv and its base prefix, never the repo
        assert interpreter_roots(str(ours / "bin" / "python")) == tuple(sorted(
            {str(ours), str(Path(sys.base_prefix).resolve())} - {"/usr"}))


@needs_bwrap
def test_an_interpreter_under_tmp_still_runs_and_cannot_be_written() -> None:
    """A clone checked out in /tmp runs its programs with its own venv: the private /tmp binds it back read-only."""
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        code = (f"import sys\nprint(sys.prefix)\ntry:\n    open({str(venv / 'x.txt')!r}, 'w')\n    print('wrote')\n"
                "except OSError:\n    print('blocked')\n")
        result = run(code, SandboxPolicy(wall_time_s=20, workers=1, python=str(venv / "bin" / "python")))
        assert result.stdout == f"{venv}\nblocked\n"  # type: ignore[attr-defined]
        assert not (venv / "x.txt").exists()


@needs_bwrap
def test_its_disk_is_a_bounded_tmpfs_of_its_own() -> None:
    code = ("import os\nwritten = 0\ntry:\n    for i in range(8):\n        with open(f'f{i}', 'wb') as f:\n"
            "            f.write(b'x' * 2 ** 20)\n        written += 1\nexcept OSError as exc:\n"
            "    print(written, exc.errno)\nprint(os.getcwd())\n")
    result = run(code, SandboxPolicy(wall_time_s=20, disk_bytes=4 * 2 ** 20, workers=1))
    full, cwd = result.stdout.splitlines()  # type: ignore[attr-defined]
    assert full.split()[1] == "28" and int(full.split()[0]) < 4 and cwd == "/tmp/work"  # ENOSPC


def _processes_under(pid: int) -> int:
    try:
        return len(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return 0


@needs_seccomp
def test_a_fork_bomb_gets_no_process_and_the_next_program_runs() -> None:
    bounded = ("import os, time\nmade = refused = 0\nfor _ in range(20):\n    try:\n        pid = os.fork()\n"
               "    except OSError:\n        refused += 1\n        continue\n    if pid == 0:\n        time.sleep(3)\n"
               "        os._exit(0)\n    made += 1\nprint(made, refused)\n")
    result = run(bounded)
    assert result.stdout == "0 20\n", "forks were not refused: the real bomb is not run"  # type: ignore[attr-defined]
    bomb = ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    most = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal most
        me = os.getpid()
        while not done.is_set():
            most = max(most, _processes_under(me))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        bombed = run(bomb, SandboxPolicy(wall_time_s=2, cpu_s=3, workers=1))
    finally:
        done.set()
        watcher.join()
    assert bombed.timed_out  # type: ignore[attr-defined]
    assert most <= 3  # the program, and bubblewrap with its reaper when it is used
    assert run("print('still here')").stdout == "still here\n"  # type: ignore[attr-defined]


def test_an_endless_loop_is_killed_at_its_wall_time() -> None:
    result = run("while True:\n    pass\n", SandboxPolicy(wall_time_s=1, cpu_s=5, workers=1))
    assert (result.timed_out, result.returncode, result.status) == (True, None, "timeout")  # type: ignore[attr-defined]
    assert result.duration_s < 30  # type: ignore[attr-defined]


def test_a_flood_of_output_is_cut_and_stopped() -> None:
    code = "import sys\nchunk = 'x' * 1_000_000\nfor _ in range(100):\n    sys.stdout.write(chunk)\nprint('end')\n"
    result = run(code, SandboxPolicy(wall_time_s=30, output_bytes=64 * 1024, workers=1))
    assert (result.truncated, result.status, len(result.stdout)) == (True, "output_limit", 64 * 1024)  # type: ignore[attr-defined]


def test_memory_beyond_the_limit_is_refused() -> None:
    code = "try:\n    b = bytearray(3 * 1024 ** 3)\n    print('allocated')\nexcept MemoryError:\n    print('refused')\n"
    result = run(code, SandboxPolicy(wall_time_s=20, memory_bytes=1024 ** 3, workers=1))
    assert result.stdout == "refused\n"  # type: ignore[attr-defined]


def test_at_most_workers_run_at_once_and_a_cancelled_caller_kills_its_program() -> None:
    async def main() -> tuple[int, list[str]]:
        sandbox = Sandbox(SandboxPolicy(wall_time_s=20, workers=2))
        results = await asyncio.gather(*(sandbox.run(f"import time\ntime.sleep(0.3)\nprint({i})") for i in range(6)))
        slow = asyncio.get_running_loop().create_task(sandbox.run("import time\ntime.sleep(60)\n"))
        while sandbox.running == 0:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        slow.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await slow
        return sandbox.most_running, [r.stdout for r in results]

    most, outputs = asyncio.run(main())
    assert most == 2 and outputs == [f"{i}\n" for i in range(6)]
    leftovers = [p for p in psutil.Process().children(recursive=True) if "runpy.run_path" in " ".join(p.cmdline())]
    assert leftovers == []  # nothing of the cancelled program is left


@needs_seccomp
def test_without_bubblewrap_nothing_runs_unless_unsafe_and_then_the_limits_and_the_filter_hold() -> None:
    alone = Isolation(None, ISOLATION.seccomp, "bubblewrap left out by the test")
    assert alone.describe().startswith("NOT ISOLATED (--exec-unsafe): limits alone (bubblewrap left out by the "
                                       "test; the program runs as this user, sees this machine's files")
    refused = Sandbox(SandboxPolicy(wall_time_s=5, workers=1), isolation=alone)
    with pytest.raises(SandboxUnavailable, match="cannot be sandboxed here: bubblewrap left out by the test"):
        asyncio.run(refused.run("open('/tmp/ran', 'w')\n"))

    async def main() -> list[ExecResult]:
        sandbox = Sandbox(SandboxPolicy(wall_time_s=5, workers=2, unsafe=True), isolation=alone)
        return list(await asyncio.gather(
            sandbox.run("import os\nmade = 0\nfor _ in range(20):\n    try:\n        pid = os.fork()\n"
                        "    except OSError:\n        continue\n    if pid == 0:\n        os._exit(0)\n"
                        "    made += 1\nprint(made, sorted(os.environ))\n"),
            sandbox.run("while True:\n    pass\n", SandboxPolicy(wall_time_s=1, cpu_s=5, unsafe=True))))

    forks, loop = asyncio.run(main())
    made, names = forks.stdout.split(" ", 1)
    assert made == "0" and "OPENAI_API_KEY" not in names and "'HOME'" in names
    assert loop.timed_out
