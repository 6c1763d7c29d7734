"""Hostile programs through `Sandbox.run`, as root (how CI and many GPU boxes run `ops`) and as an
ordinary user: every attack must fail, asserted on what the program printed.

Both cases go through the same driver (a subprocess that runs `Sandbox.run` and prints the result as
JSON), so the sandbox's parent holds a secret in its environment, as `ops eval` holds provider keys.
As root the driver is this venv's Python and the program runs under it (the pyenv interpreter under
/root/.pyenv: its prefix is bound, /root is not). As the ordinary user (`ops-sbx-test`, created when missing and removed
afterwards) the driver and the program run under /usr/bin/python3, since /root (mode 700) hides the venv.

Each attack prints `NAME: blocked` or `NAME: BROKEN <what it got>`. A control run of the harmless
part (reads, writes, the socket; never a mount or setns, which as root would act on this machine)
without the sandbox, as the same user, shows that those attacks do succeed outside it: the
sandbox, not the file modes, stops them.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from orchestra_ops.services.simllm import agent_rules, replies

from orchestra_ops.sandbox import detect_isolation
from orchestra_ops.sandbox.layout import interpreter_roots
from tests.helpers import OPS, REPO, free_port, run_ops
from tests.integration.agent_fixtures import expected, questions, read_jsonl, standard_fleet, write_jsonl
from tests.simserver import SimServer

pytestmark = pytest.mark.destructive  # adds a user (tests/conftest.py: its own xdist group)

ISOLATION = detect_isolation()
needs_bwrap = pytest.mark.skipif(ISOLATION.bwrap is None, reason=f"no bubblewrap isolation here: {ISOLATION.reason}")

TEST_USER = "ops-sbx-test"
SYSTEM_PYTHON = "/usr/bin/python3"
SECRET = "sk-hostile-test-secret-4f1c9"

# runs as a subprocess: `driver.py PYTHON` reads the program on stdin, runs it in the sandbox, prints JSON
DRIVER = r'''
import asyncio, json, os, sys
from orchestra_ops.sandbox import Sandbox, SandboxPolicy, detect_isolation
policy = SandboxPolicy(wall_time_s=60, cpu_s=30, workers=1, python=sys.argv[1])
code = sys.stdin.read().replace("__HOST_PID__", str(os.getpid()))  # the sandbox's parent, as seen outside
result = asyncio.run(Sandbox(policy).run(code))
print(json.dumps({"stdout": result.stdout, "stderr": result.stderr, "status": result.status,
                  "isolation": detect_isolation().describe()}))
'''

# the attacks; CONFIG is replaced by a JSON object (paths, port, pids, names that must stay invisible)
ATTACKS = r'''
import ctypes, json, os, socket, urllib.request
config = json.loads(CONFIG)
config["host_pid"] = int(config["host_pid"])
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, action):
    try:
        got = action()
    except Exception:
        print(f"{name}: blocked")
        return
    if got is None or got is False:
        print(f"{name}: blocked")
    else:
        print(f"{name}: BROKEN {got!r}"[:300])

def syscall(rc):
    if rc != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return "succeeded"

def read(path):
    with open(path, "rb") as handle:
        return handle.read().decode(errors="replace")

def environs():
    found = [name for name in os.environ if config["secret"] in os.environ[name]]
    for pid in {"1", str(os.getppid()), str(config["host_pid"]), "self"}:
        try:
            if config["secret"] in read(f"/proc/{pid}/environ"):
                found.append(pid)
        except OSError:
            pass
    return found or None

def listing(path):
    shown = set(os.listdir(path)) & set(config["invisible"][path])
    return sorted(shown) or None

def connect():
    with socket.create_connection(("127.0.0.1", config["port"]), timeout=3):
        return "connected"

def http():
    with urllib.request.urlopen(f"http://127.0.0.1:{config['port']}/health", timeout=3) as response:
        return response.status

def write_outside():
    with open(config["outside"], "w") as handle:
        handle.write("escaped")
    return "wrote"

attempt("read the dataset", lambda: read(config["dataset"]))
attempt("read /etc/shadow", lambda: read("/etc/shadow"))
attempt("read the repository", lambda: read(config["repo_file"]))
attempt("list /root", lambda: listing("/root"))
attempt("list the parent's HOME", lambda: listing(config["home"]))
attempt("write outside", write_outside)
attempt("secret in environ", environs)
attempt("tcp to the sim", connect)
attempt("http to the sim", http)
if not config["safe_only"]:
    attempt("signal the parent", lambda: os.kill(config["host_pid"], 0) or "alive")
    attempt("umount /tmp", lambda: syscall(libc.umount2(b"/tmp", 2)))
    attempt("umount /proc", lambda: syscall(libc.umount2(b"/proc", 2)))
    attempt("mount a tmpfs", lambda: syscall(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
    attempt("remount /usr rw", lambda: syscall(libc.mount(None, b"/usr", None, 32 | 4096, None)))
    for ns in ("net", "mnt", "pid", "user", "ipc", "uts", "cgroup"):
        for pid in ("1", str(os.getppid()), str(config["host_pid"])):
            def join(ns=ns, pid=pid):
                fd = os.open(f"/proc/{pid}/ns/{ns}", os.O_RDONLY)
                return syscall(libc.setns(fd, 0))
            attempt(f"setns {ns}", join)
    print("uid:", os.getuid(), os.getgid())
    print("CapEff:", [line.split()[1] for line in read("/proc/self/status").splitlines() if line.startswith("CapEff")])
    attempt("new user namespace", lambda: syscall(libc.unshare(0x10000000)))  # last: it would change the uid
'''

SAFE_NAMES = ["read the dataset", "read /etc/shadow", "read the repository", "list /root", "list the parent's HOME",
              "write outside", "secret in environ", "tcp to the sim", "http to the sim"]
HARSH_NAMES = ["signal the parent", "umount /tmp", "umount /proc", "mount a tmpfs", "remount /usr rw",
               *[f"setns {ns}" for ns in ("net", "mnt", "pid", "user", "ipc", "uts", "cgroup") for _ in range(3)]]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer("sim-model") as server:
        yield server


CREATED_USERS: list[str] = []  # users this module added, removed when it ends


@pytest.fixture(scope="module", autouse=True)
def remove_created_users() -> Iterator[None]:
    yield
    while CREATED_USERS:
        subprocess.run(["userdel", CREATED_USERS.pop()], check=True, capture_output=True, timeout=60)


def _ordinary_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pass
    if os.geteuid() != 0:
        pytest.skip(f"not root and no user {TEST_USER}: cannot run the ordinary-user case")
    subprocess.run(["useradd", "--system", "--no-create-home", TEST_USER], check=True, capture_output=True, timeout=60)
    CREATED_USERS.append(TEST_USER)
    return pwd.getpwnam(TEST_USER)


class Case:
    """Where one case's files lie and how its driver is started."""

    def __init__(self, who: str, base: Path) -> None:
        self.who = who
        self.base = base
        self.dataset = base / "data" / "gold.jsonl"
        self.dataset.parent.mkdir()
        self.dataset.write_text('{"id": "q1", "answer": "the gold answer"}\n')
        self.outside = base / "out" / "escaped.txt"
        self.outside.parent.mkdir()
        self.home = base / "home"
        self.home.mkdir()
        (self.home / "notes-of-the-user.txt").write_text("private\n")
        self.prefix: list[str] = []
        self.python = sys.executable
        if who == "user":
            user = _ordinary_user()
            if os.geteuid() != 0 and os.getuid() != user.pw_uid:
                pytest.skip(f"cannot switch to {TEST_USER} without root")
            self.python = SYSTEM_PYTHON
            if os.geteuid() == 0:
                self.prefix = ["setpriv", "--reuid", str(user.pw_uid), "--regid", str(user.pw_gid), "--clear-groups"]
            for path in (base, self.dataset.parent, self.outside.parent, self.home):  # the user may read and write
                path.chmod(0o777)
            for path in (self.dataset, self.home / "notes-of-the-user.txt"):
                path.chmod(0o644)
        self.parent_home = "/root" if who == "root" and os.geteuid() == 0 else str(self.home)

    def env(self) -> dict[str, str]:
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": self.parent_home, "PYTHONPATH": str(REPO),
                "PYTHONDONTWRITEBYTECODE": "1", "OPS_HOSTILE_SECRET": SECRET, "LANG": "C.UTF-8"}

    def config(self, port: int, safe_only: bool, host_pid: str) -> dict[str, Any]:
        invisible = {path: self.invisible_in(path) for path in ("/root", self.parent_home)}
        return {"dataset": str(self.dataset), "outside": str(self.outside), "home": self.parent_home,
                "repo_file": str(REPO / "pyproject.toml"), "secret": SECRET, "port": port, "safe_only": safe_only,
                "host_pid": host_pid, "invisible": invisible}

    def invisible_in(self, directory: str) -> list[str]:
        """What of `directory` the program must not see: all of it but the path down to a bound interpreter
        root (the pyenv prefix under /root shows /root/.pyenv, and nothing else of /root)."""
        if not os.access(directory, os.R_OK):
            return []
        on_the_way = {Path(root).relative_to(directory).parts[0] for root in interpreter_roots(self.python)
                      if Path(root).is_relative_to(directory)}
        return sorted(set(os.listdir(directory)) - on_the_way)

    def program(self, port: int, safe_only: bool, host_pid: str = "__HOST_PID__") -> str:
        return ATTACKS.replace("CONFIG", repr(json.dumps(self.config(port, safe_only, host_pid))), 1)

    def sandboxed(self, code: str) -> dict[str, Any]:
        """Run `code` through Sandbox.run in a driver process that runs as this case's user."""
        driver = self.base / "driver.py"
        driver.write_text(DRIVER)
        driver.chmod(0o644)
        done = subprocess.run([*self.prefix, self.python, str(driver), self.python], input=code, env=self.env(),
                              cwd=self.base, capture_output=True, text=True, timeout=240, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def unsandboxed(self, code: str) -> str:
        """Run `code` directly, as the same user: the control."""
        done = subprocess.run([*self.prefix, self.python, "-c", code], env=self.env(), cwd=self.base,
                              capture_output=True, text=True, timeout=120, check=False)
        return done.stdout


@pytest.fixture(params=["root", "user"])
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    if request.param == "root" and os.geteuid() != 0:
        pytest.skip("the root case needs root (CI runs as root)")
    # not under /tmp: the program's private /tmp would hide it whatever else the sandbox shows
    base = Path(tempfile.mkdtemp(prefix="ops-hostile-", dir="/var/tmp"))
    try:
        yield Case(request.param, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@needs_bwrap
def test_every_attack_fails_inside_the_sandbox(case: Case, sim: SimServer) -> None:
    with socket.create_connection(("127.0.0.1", sim.port), timeout=5):
        pass  # the sim does answer on loopback outside the sandbox
    result = case.sandboxed(case.program(sim.port, safe_only=False))
    assert result["status"] == "ok", result
    expected = [f"{name}: blocked" for name in SAFE_NAMES + HARSH_NAMES]
    expected += ["uid: 65534 65534", "CapEff: ['0000000000000000']"]
    if "--disable-userns" in ISOLATION.flags:
        expected.append("new user namespace: blocked")
    lines = result["stdout"].splitlines()
    if "--disable-userns" not in ISOLATION.flags:
        lines = [line for line in lines if not line.startswith("new user namespace:")]
    assert lines == expected, result["stdout"]
    assert not case.outside.exists()
    assert case.dataset.read_text() == '{"id": "q1", "answer": "the gold answer"}\n'


@needs_bwrap
def test_outside_the_sandbox_the_same_reads_writes_and_socket_succeed(case: Case, sim: SimServer) -> None:
    """The control: without the sandbox, as the same user, the harmless attacks break through."""
    out = case.unsandboxed(case.program(sim.port, safe_only=True, host_pid=str(os.getpid())))
    broken = {line.split(": BROKEN")[0] for line in out.splitlines() if ": BROKEN" in line}
    assert {"read the dataset", "write outside", "secret in environ", "tcp to the sim", "http to the sim",
            "list the parent's HOME"} <= broken, out
    assert case.outside.read_text() == "escaped"


@needs_bwrap
def test_a_benign_program_still_works(case: Case) -> None:
    code = ("import json, math, sys\nprint(json.dumps({'pi': round(math.pi, 4)}))\n"
            "try:\n    import numpy\n    print('numpy', int(numpy.arange(5).sum()))\nexcept ImportError:\n"
            "    print('no numpy')\nprint(sys.flags.isolated)\n")
    result = case.sandboxed(code)
    has_numpy = subprocess.run([case.python, "-c", "import numpy"], capture_output=True, check=False).returncode == 0
    assert result["stdout"] == '{"pi": 3.1416}\n' + ("numpy 10\n" if has_numpy else "no numpy\n") + "1\n", result
    assert result["status"] == "ok"
    assert result["isolation"].startswith("bubblewrap: own user namespace")


# `ops eval` where bubblewrap cannot isolate (here: not on PATH, as on a machine without it)

NO_BWRAP = {"PATH": "/nonexistent"}  # ops itself needs no program from PATH; the sandbox finds no bwrap


def _coding_fleet(tmp_path: Path, sim_server: Callable[..., SimServer]) -> tuple[list[str], dict[str, str], Path]:
    """Sims for the hle suite, questions whose plan runs code and never searches (no retrieval needed)."""
    sims = [sim_server(name, args=["--latency-ms", "2"]) for name in ("sim/orchestrator", "sim/experts", "sim/judge")]
    home = tmp_path / "ops"
    topology = standard_fleet(home, *sims, {"retrieval": f"127.0.0.1:{free_port()}"})
    coding = [q for q in questions(40, search=False) if "enhance_reasoning" in agent_rules.plan(q)][:3]
    assert len(coding) == 3
    data = write_jsonl(tmp_path / "coding.jsonl", [{"id": f"q{i}", "question": q, "answer": replies.answer_token(q)}
                                                   for i, q in enumerate(coding)])
    return ["--topology", str(topology), "--dataset", str(data), "--no-analyze"], {"OPS_HOME": str(home)}, data


def test_without_isolation_ops_eval_stops_at_start_with_exit_2(tmp_path: Path,
                                                                sim_server: Callable[..., SimServer]) -> None:
    args, env, _ = _coding_fleet(tmp_path, sim_server)
    run_dir = tmp_path / "run"
    done = run_ops(["eval", "hle", *args, "--run-dir", str(run_dir)], env={**env, **NO_BWRAP})
    assert done.returncode == 2, done.stderr
    assert "model-written code cannot be sandboxed here: bubblewrap is not installed (apt-get install " \
           "bubblewrap). Refusing to run it without isolation; fix bubblewrap, or pass --exec-unsafe" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (run_dir / "results.jsonl").exists() and not (run_dir / "run.json").exists()  # nothing ran


def test_with_exec_unsafe_the_run_header_says_so_in_red_and_run_json_records_it(
        tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    script = shutil.which("script")
    if script is None:
        pytest.skip("no `script` (util-linux) to give ops a pseudo-terminal")
    args, env, data = _coding_fleet(tmp_path, sim_server)
    run_dir = tmp_path / "run"
    command = " ".join(shlex.quote(a) for a in [*OPS, "eval", "hle", *args, "--run-dir", str(run_dir),
                                                  "--exec-unsafe"])
    # under a pseudo-terminal (script), as a user sees it: click keeps the colour
    done = subprocess.run([script, "-qec", command, "/dev/null"], env={**os.environ, **env, **NO_BWRAP},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    note = ("  code runs in the sandbox: NOT ISOLATED (--exec-unsafe): limits alone (bubblewrap is not installed "
            "(apt-get install bubblewrap); the program runs as this user, sees this machine's files and can reach "
            "the network)")
    assert f"\x1b[31m\x1b[1m{note}" in done.stdout  # red (and bold)
    logged = [line for line in (run_dir / "eval.log").read_text().splitlines() if "code runs in the sandbox" in line]
    assert len(logged) == 1 and logged[0].startswith(note + ", no child processes")  # the log: without colour
    assert json.loads((run_dir / "run.json").read_text())["exec_unsafe"] is True
    records = read_jsonl(run_dir / "results.jsonl")
    assert sorted(r["id"] for r in records) == ["q0", "q1", "q2"] and all(r["status"] == "ok" for r in records)
    assert sum(r["correct"] for r in records) == expected(read_jsonl(data))["correct"]
