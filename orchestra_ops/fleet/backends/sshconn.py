"""ssh connections for the ssh backend (fabric): one per host, host keys checked, errors that name the node.

`SshTarget` is everything needed to reach a node (it is stored in the node's state handle, so a later
`ops down` reconnects the same way). Host keys are checked against `known_hosts` (default
~/.ssh/known_hosts): `strict` refuses a host not listed there, `accept-new` appends its key to that
file (as OpenSSH's StrictHostKeyChecking=accept-new does); a key that differs is always refused.
Unset user/port/identity come from ~/.ssh/config as for `ssh`.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import socket
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import paramiko
from fabric import Connection

from orchestra_ops.errors import LaunchError

log = logging.getLogger(__name__)


class SshError(LaunchError):
    """A node could not be reached or a command on it could not run; the message names the node."""


@dataclass(frozen=True)
class SshTarget:
    node: str  # the topology's node name, for messages
    host: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None  # absolute
    jump: str | None = None
    known_hosts: str = "~/.ssh/known_hosts"
    host_key_check: str = "strict"
    connect_timeout_s: float = 10.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, node: str, data: dict[str, Any]) -> SshTarget:
        fields = {k: data[k] for k in ("host", "user", "port", "identity_file", "jump", "known_hosts",
                                       "host_key_check", "connect_timeout_s") if k in data}
        return cls(node=node, **fields)

    def label(self, conn: Connection | None = None) -> str:
        """`node far (me@gpu-box:22)`."""
        user = conn.user if conn is not None else self.user
        port = conn.port if conn is not None else self.port
        where = f"{user + '@' if user else ''}{self.host}{f':{port}' if port else ''}"
        return f"node {self.node} ({where})"


class _UnknownHostKey(paramiko.SSHException):
    pass


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """strict: refuse a host that known_hosts does not list; accept-new: append its key there."""

    def __init__(self, mode: str, known_hosts: Path) -> None:
        self.mode = mode
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if self.mode != "accept-new":
            raise _UnknownHostKey(hostname)
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        with open(self.known_hosts, "a", encoding="utf-8") as handle:
            handle.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)
        log.info("added the host key of %s to %s", hostname, self.known_hosts)


class AgentSession:
    """A helper process on the node (`PYTHON -c SOURCE serve`) answering one JSON line per request.

    Starting it costs one remote shell (the user's ~/.bashrc runs for every ssh command, which can
    take half a second); every request after that is one line each way on the open channel.
    """

    def __init__(self, target: SshTarget, channel: paramiko.Channel, python: str, label: str) -> None:
        self.target = target
        self.label = label
        self.python = python
        self.channel = channel
        self.reader = channel.makefile("rb")
        self.errors = channel.makefile_stderr("rb")
        self.lock = threading.Lock()

    def request(self, action: str, payload: dict[str, Any], timeout: float) -> Any:
        line = json.dumps({"action": action, "payload": payload}).encode() + b"\n"
        with self.lock:
            try:
                self.channel.settimeout(timeout)
                self.channel.sendall(line)
                answer = self.reader.readline()
            except TimeoutError:
                raise SshError(f"{self.label}: the ops helper did not answer {action} in "
                               f"{timeout:.0f} s") from None
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise SshError(f"{self.label}: the ssh connection failed: {exc}") from None
        if not answer:
            raise self._ended()
        reply = json.loads(answer)
        if reply.get("error"):
            raise SshError(f"{self.label}: the ops helper failed ({action}): {reply['error']}")
        return reply["result"]

    def _ended(self) -> SshError:
        status = self.channel.recv_exit_status() if self.channel.exit_status_ready() else None
        try:
            self.channel.settimeout(2.0)
            err = self.errors.read().decode("utf-8", errors="replace").strip()
        except (OSError, paramiko.SSHException):
            err = ""
        if status == 127 or "not found" in err:
            return SshError(f"{self.label}: {self.python} not found there; ops runs a small stdlib "
                            f"helper on each ssh node (set nodes.{self.target.node}.ssh.python to a Python 3.8 "
                            "or newer)")
        detail = err.splitlines()[-1] if err else f"exit status {status}"
        return SshError(f"{self.label}: the ops helper stopped: {detail}")

    def close(self) -> None:
        self.channel.close()


class SshPool:
    """One open connection per target (threads share it: paramiko multiplexes channels), one helper
    session per target."""

    def __init__(self, agent_source: str) -> None:
        self.agent_source = agent_source
        self._connections: dict[SshTarget, Connection] = {}
        self._agents: dict[tuple[SshTarget, str], AgentSession] = {}
        self._lock = threading.Lock()
        self._target_locks: dict[SshTarget, threading.RLock] = {}

    def _locked(self, target: SshTarget) -> threading.RLock:
        """One lock per target: connecting to a host that does not answer holds up no other host."""
        with self._lock:
            return self._target_locks.setdefault(target, threading.RLock())

    def connection(self, target: SshTarget) -> Connection:
        with self._locked(target):
            conn = self._connections.get(target)
            if conn is not None and conn.is_connected:
                return conn
            conn = _connect(target)
            self._connections[target] = conn
            return conn

    def label(self, target: SshTarget) -> str:
        """`node far (me@gpu-box:22)`, with the user and port ~/.ssh/config resolved once connected."""
        return target.label(self._connections.get(target))

    def agent(self, target: SshTarget, python: str) -> AgentSession:
        """The helper session on the target (started on first use)."""
        key = (target, python)
        with self._locked(target):
            session = self._agents.get(key)
            if session is not None and not session.channel.closed and not session.channel.exit_status_ready():
                return session
            channel = self._channel(target)
            try:
                channel.exec_command(f"{shlex.quote(python)} -c {shlex.quote(self.agent_source)} serve")
            except (paramiko.SSHException, OSError, EOFError) as exc:
                raise SshError(f"{self.label(target)}: cannot start the ops helper: {exc}") from None
            session = AgentSession(target, channel, python, self.label(target))
            self._agents[key] = session
            return session

    def _channel(self, target: SshTarget) -> paramiko.Channel:
        conn = self.connection(target)
        transport = conn.client.get_transport()
        if transport is None or not transport.is_active():
            raise SshError(f"{target.label(conn)}: the ssh connection is closed")
        try:
            return transport.open_session()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise SshError(f"{target.label(conn)}: the ssh connection failed: {exc}") from None

    def stream(self, target: SshTarget, command: str) -> Iterator[str]:
        """The lines a long-running command prints (e.g. `tail -F`), until the caller stops iterating."""
        channel = self._channel(target)
        try:
            channel.exec_command(command)
            partial = b""
            while True:
                data = channel.recv(65536)
                if not data:
                    break
                *complete, partial = (partial + data).split(b"\n")
                for raw in complete:
                    yield raw.decode("utf-8", errors="replace")
        finally:
            channel.close()

    def close(self) -> None:
        with self._lock:
            for session in self._agents.values():
                session.close()
            self._agents.clear()
            for conn in self._connections.values():
                conn.close()
            self._connections.clear()


def _connect(target: SshTarget) -> Connection:
    known_hosts = Path(os.path.expanduser(target.known_hosts))
    gateway = _connection(target, target.jump, known_hosts, None) if target.jump else None
    conn = _connection(target, target.host, known_hosts, gateway, user=target.user, port=target.port)
    try:
        conn.open()
    except paramiko.BadHostKeyException as exc:
        raise SshError(f"{target.label(conn)}: its host key does not match {known_hosts} ({exc.key.get_name()} "
                       f"{exc.key.get_fingerprint().hex()}); refusing to connect. If the host was reinstalled, "
                       f"remove its old key: ssh-keygen -R {shlex.quote(exc.hostname)} -f {known_hosts}") from None
    except _UnknownHostKey as exc:
        raise SshError(f"{target.label(conn)}: the host key of {exc} is not in {known_hosts}; connect once with "
                       f"`ssh` to check and accept it, or set nodes.{target.node}.ssh.host_key_check: accept-new"
                       ) from None
    except paramiko.AuthenticationException as exc:
        keys = target.identity_file or "the ssh agent and ~/.ssh keys"
        raise SshError(f"{target.label(conn)}: the server refused our key ({keys}): {exc}") from None
    except (paramiko.ssh_exception.NoValidConnectionsError, ConnectionError, TimeoutError) as exc:
        raise SshError(f"{target.label(conn)}: cannot connect: {_reason(exc)}") from None
    except socket.gaierror as exc:
        raise SshError(f"{target.label(conn)}: cannot resolve host {target.host!r}: {exc.strerror}") from None
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise SshError(f"{target.label(conn)}: ssh failed: {_reason(exc)}") from None
    return conn


def _connection(target: SshTarget, host: str, known_hosts: Path, gateway: Connection | None,
                user: str | None = None, port: int | None = None) -> Connection:
    connect_kwargs: dict[str, Any] = {"banner_timeout": target.connect_timeout_s,
                                      "auth_timeout": target.connect_timeout_s}
    if target.identity_file:  # this key (and the agent), not whatever ~/.ssh holds; the jump host too
        connect_kwargs.update(key_filename=[target.identity_file], look_for_keys=False)
    conn = Connection(host, user=user, port=port, connect_timeout=int(max(1, target.connect_timeout_s)),
                      connect_kwargs=connect_kwargs, gateway=gateway)
    if known_hosts.is_file():
        conn.client.load_host_keys(str(known_hosts))
    conn.client.set_missing_host_key_policy(_HostKeyPolicy(target.host_key_check, known_hosts))
    return conn


def _reason(exc: BaseException) -> str:
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        errors = {str(e.strerror or e).lower() for e in exc.errors.values()}
        return "; ".join(sorted(errors)) or str(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__
