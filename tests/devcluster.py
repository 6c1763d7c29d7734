"""A single-node SLURM with fake GPUs and an sshd on a loopback address, in one directory, stopped by pid.

    cluster = DevCluster(Path("/tmp/x")).start()   # munged, slurmctld, slurmd (4 GPUs), sshd on 127.0.0.2
    env = cluster.env                               # SLURM_CONF for sbatch/squeue/scancel
    cluster.stop()                                  # cancels its jobs, then stops each daemon by pid

Everything lives under the directory: configs, spool, pid and log files, the munge key and socket,
the fake GPU device nodes (`mknod c 195 N`: slurm refuses plain files), the ssh host key, a client
key and a known_hosts file holding the host key (so strict host-key checking works). Nothing under
/etc is read or written; the only path outside it is /run/sshd, which sshd insists on. The daemons
run in the foreground as our children (or as orphans of `scripts/dev-cluster.sh up`), recorded in
`pids.json` with their start times, so `stop` signals exactly them and nothing else.
Needs root (slurmd, sshd); `DevCluster.unavailable()` says why it cannot run here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

from tests.ports import free_port, free_port_block

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld", "slurmd": "/usr/sbin/slurmd",
           "sshd": "/usr/sbin/sshd"}
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "munge", "ssh-keygen", "tmux")
PARTITION = "dev"
GPUS = 4
START_TIMEOUT_S = 90.0


def node_identity() -> tuple[str, str]:
    """(slurm node name, the address it resolves to): the short hostname when it resolves to a loopback
    address (so servers on the node can bind loopback and still answer to its name), else localhost."""
    name = socket.gethostname().split(".")[0]
    try:
        address = socket.gethostbyname(name)
    except OSError:
        address = ""
    if address.startswith("127."):
        return name, address
    return "localhost", "127.0.0.1"


class DevCluster:
    def __init__(self, root: Path, *, ssh_address: str = "127.0.0.2", ssh_port: int | None = None,
                 slurm_ports: tuple[int, int] | None = None, path_prefix: str | None = None) -> None:
        self.root = root.resolve()
        self.ssh_address = ssh_address
        self.ssh_port = ssh_port or free_port()
        if slurm_ports is None:
            first = free_port_block(2)
            slurm_ports = (first, first + 1)
        self.slurmctld_port, self.slurmd_port = slurm_ports
        self.node, self.node_address = node_identity()
        self.path_prefix = path_prefix  # put first on PATH of ssh sessions (e.g. a venv's bin)

    # ---- where things are -------------------------------------------------------------------------

    @property
    def slurm_conf(self) -> Path:
        return self.root / "slurm" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.slurm_conf)}

    @property
    def identity_file(self) -> Path:
        return self.root / "ssh" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.root / "ssh" / "known_hosts"

    @property
    def pids_file(self) -> Path:
        return self.root / "pids.json"

    @staticmethod
    def unavailable() -> str | None:
        """Why the dev cluster cannot run here (None when it can)."""
        if os.geteuid() != 0:
            return "needs root (slurmd and sshd); CI runs as root"
        missing = [path for path in DAEMONS.values() if not os.access(path, os.X_OK)]
        missing += [name for name in CLIENTS if shutil.which(name) is None]
        if missing:
            return f"not installed: {', '.join(missing)} (`make setup` as root installs them)"
        return None

    # ---- start ------------------------------------------------------------------------------------

    def start(self, *, slurm: bool = True, sshd: bool = True) -> DevCluster:
        reason = self.unavailable()
        if reason:
            raise RuntimeError(f"cannot start the dev cluster: {reason}")
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        try:
            if slurm:
                self._start_slurm()
            if sshd:
                self._start_sshd()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_slurm(self) -> None:
        munge, slurm = self.root / "munge", self.root / "slurm"
        for directory in (munge, slurm, slurm / "ctld", slurm / "d", slurm / "log", slurm / "dev"):
            directory.mkdir(parents=True, exist_ok=True)
        os.chmod(munge, 0o755)
        key = munge / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(128))
        os.chmod(key, 0o400)
        for index in range(GPUS):
            device = slurm / "dev" / f"nvidia{index}"
            if not device.exists():
                os.mknod(device, 0o666 | 0o020000, os.makedev(195, index))
        socket_path = munge / "munge.socket"
        self._spawn("munged", [DAEMONS["munged"], "-F", "-f", f"--socket={socket_path}", f"--key-file={key}",
                               f"--log-file={munge / 'munged.log'}", f"--pid-file={munge / 'munged.pid'}",
                               f"--seed-file={munge / 'munged.seed'}"])
        self._wait("munged", lambda: self._ok(["munge", "-n", "-S", str(socket_path)]))
        self.slurm_conf.write_text(self._slurm_conf(socket_path))
        (slurm / "gres.conf").write_text(f"AutoDetect=off\nName=gpu File={slurm / 'dev'}/nvidia[0-{GPUS - 1}]\n")
        (slurm / "plugstack.conf").write_text("")
        self._spawn("slurmctld", [DAEMONS["slurmctld"], "-D", "-c"])
        self._wait("slurmctld", lambda: "UP" in self._out(["scontrol", "ping"]))
        self._spawn("slurmd", [DAEMONS["slurmd"], "-D", "-N", self.node])
        self._wait("slurmd", self.node_idle)

    def _slurm_conf(self, munge_socket: Path) -> str:
        slurm = self.root / "slurm"
        return "\n".join([
            "ClusterName=opsdev",
            f"SlurmctldHost={self.node}({self.node_address})",
            f"SlurmctldPort={self.slurmctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={munge_socket}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "SlurmdParameters=config_overrides", "ReturnToService=2", "GresTypes=gpu",
            "SchedulerType=sched/builtin", "KillWait=5",
            "MinJobAge=300", "MessageTimeout=20",
            f"StateSaveLocation={slurm / 'ctld'}", f"SlurmdSpoolDir={slurm / 'd'}",
            f"SlurmctldPidFile={slurm / 'slurmctld.pid'}", f"SlurmdPidFile={slurm / 'slurmd.pid'}",
            f"SlurmctldLogFile={slurm / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={slurm / 'log' / 'slurmd.log'}",
            f"PlugStackConfig={slurm / 'plugstack.conf'}",
            f"NodeName={self.node} NodeAddr={self.node_address} CPUs=8 RealMemory=4000 Gres=gpu:{GPUS} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
            "",
        ])

    def _start_sshd(self) -> None:
        ssh = self.root / "ssh"
        ssh.mkdir(parents=True, exist_ok=True)
        host_key = ssh / "host_ed25519"
        for key in (host_key, self.identity_file):
            if not key.exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ops-dev-cluster", "-f",
                                str(key)], check=True)
        (ssh / "authorized_keys").write_text(Path(f"{self.identity_file}.pub").read_text())
        host_pub = Path(f"{host_key}.pub").read_text().split()
        self.known_hosts.write_text(f"[{self.ssh_address}]:{self.ssh_port} {host_pub[0]} {host_pub[1]}\n")
        lines = [f"ListenAddress {self.ssh_address}:{self.ssh_port}", f"HostKey {host_key}",
                 f"PidFile {ssh / 'sshd.pid'}", f"AuthorizedKeysFile {ssh / 'authorized_keys'}",
                 "PermitRootLogin prohibit-password", "PasswordAuthentication no",
                 "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no", "LogLevel VERBOSE",
                 "MaxSessions 64", "MaxStartups 64"]
        if self.path_prefix:
            lines.append(f"SetEnv PATH={self.path_prefix}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        (ssh / "sshd_config").write_text("\n".join(lines) + "\n")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        self._spawn("sshd", [DAEMONS["sshd"], "-D", "-e", "-f", str(ssh / "sshd_config")])
        self._wait("sshd", lambda: self._banner(self.ssh_address, self.ssh_port))

    # ---- the daemons ------------------------------------------------------------------------------

    def _records(self) -> list[dict[str, object]]:
        if not self.pids_file.exists():
            return []
        data: list[dict[str, object]] = json.loads(self.pids_file.read_text())
        return data

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        log = open(self.root / f"{name}.out", "ab")  # noqa: SIM115 -- the child keeps it
        env = {**os.environ, **self.env}
        child = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 env=env, start_new_session=True, close_fds=True)
        log.close()
        record = {"name": name, "pid": child.pid, "create_time": psutil.Process(child.pid).create_time()}
        self.pids_file.write_text(json.dumps([*self._records(), record], indent=1))

    def _alive(self, name: str) -> bool:
        for record in self._records():
            if record["name"] == name:
                return _ours(record) is not None
        return False

    def _wait(self, name: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if ready():
                return
            if not self._alive(name):
                raise RuntimeError(f"{name} exited at start; its output:\n{self._tail(name)}")
            time.sleep(0.2)
        raise RuntimeError(f"{name} not ready after {START_TIMEOUT_S:.0f} s; its output:\n{self._tail(name)}")

    def _tail(self, name: str) -> str:
        path = self.root / f"{name}.out"
        return "\n".join(path.read_text(errors="replace").splitlines()[-20:]) if path.exists() else "(none)"

    def _ok(self, argv: Sequence[str]) -> bool:
        return subprocess.run(list(argv), capture_output=True, env={**os.environ, **self.env}, check=False,
                              timeout=30).returncode == 0

    def _out(self, argv: Sequence[str]) -> str:
        result = subprocess.run(list(argv), capture_output=True, text=True, env={**os.environ, **self.env},
                                check=False, timeout=30)
        return result.stdout if result.returncode == 0 else ""

    def node_state(self) -> str:
        return self._out(["sinfo", "-h", "-n", self.node, "-o", "%T"]).strip()

    def node_idle(self) -> bool:
        state = self.node_state()
        if state.startswith(("drain", "down")):  # left drained by an earlier run: give it back
            self.resume()
        return state == "idle"

    def resume(self) -> None:
        subprocess.run(["scontrol", "update", f"nodename={self.node}", "state=resume"], capture_output=True,
                       env={**os.environ, **self.env}, check=False, timeout=30)

    def jobs(self) -> list[str]:
        """Ids of every job of this cluster that may still run."""
        return self._out(["squeue", "-h", "-o", "%i"]).split()

    @staticmethod
    def _banner(host: str, port: int) -> bool:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=2) as sock:
            sock.settimeout(5)
            return sock.recv(64).startswith(b"SSH-")
        return False

    # ---- stop -------------------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Cancel this cluster's jobs, stop every daemon we started (by pid); the names still alive."""
        if self._alive("slurmctld"):
            jobs = self.jobs()
            if jobs:
                subprocess.run(["scancel", *jobs], env={**os.environ, **self.env}, capture_output=True,
                               check=False, timeout=30)
                deadline = time.monotonic() + 60
                while self.jobs() and time.monotonic() < deadline:
                    time.sleep(0.5)
        left = []
        for record in reversed(self._records()):
            proc = _ours(record)
            if proc is None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except psutil.TimeoutExpired:
                proc.kill()
                with contextlib.suppress(psutil.TimeoutExpired):
                    proc.wait(10)
            if _ours(record) is not None:
                left.append(str(record["name"]))
        if not left:
            self.pids_file.unlink(missing_ok=True)
        return left

    def describe(self) -> str:
        return "\n".join([
            f"slurm: node {self.node} ({self.node_address}) with {GPUS} fake GPUs, partition {PARTITION}",
            f"  export SLURM_CONF={self.slurm_conf}",
            f"sshd: {self.ssh_address}:{self.ssh_port}, key {self.identity_file}, known_hosts {self.known_hosts}",
        ])


def _ours(record: dict[str, object]) -> psutil.Process | None:
    """The live process of a record (same pid and start time), or None."""
    try:
        proc = psutil.Process(int(str(record["pid"])))
        if abs(proc.create_time() - float(str(record["create_time"]))) > 0.05:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            proc.wait(0)
            return None
        return proc
    except (psutil.NoSuchProcess, psutil.TimeoutExpired):
        return None


def main(argv: list[str]) -> int:
    """`python -m tests.devcluster up|down|status [DIR]` (what scripts/dev-cluster.sh runs)."""
    if len(argv) < 2 or argv[1] not in ("up", "down", "status"):
        print("usage: scripts/dev-cluster.sh up|down|status [DIR]", file=sys.stderr)
        return 2
    root = Path(argv[2] if len(argv) > 2 else ".dev-cluster")
    venv_bin = str(Path(sys.executable).parent)
    cluster = DevCluster(root, ssh_port=int(os.environ.get("DEV_SSH_PORT", "2222")),
                         slurm_ports=(int(os.environ.get("DEV_SLURMCTLD_PORT", "16817")),
                                      int(os.environ.get("DEV_SLURMD_PORT", "16818"))),
                         path_prefix=venv_bin)
    if argv[1] == "up":
        if cluster._records() and any(_ours(r) for r in cluster._records()):
            print(f"already up (pids in {cluster.pids_file}); `scripts/dev-cluster.sh down` first", file=sys.stderr)
            return 1
        cluster.pids_file.unlink(missing_ok=True)
        try:
            cluster.start()
        except RuntimeError as exc:
            print(str(exc), file=sys.stderr)
            return 1
        print(cluster.describe())
        return 0
    if argv[1] == "status":
        for record in cluster._records():
            print(f"{record['name']}: pid {record['pid']} {'up' if _ours(record) else 'gone'}")
        return 0
    left = cluster.stop()
    if left:
        print(f"still running: {', '.join(left)}", file=sys.stderr)
        return 1
    print("dev cluster stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
