"""The nodes of a topology: a machine (`host`, reached over ssh when it is not this one) or a slurm
allocation (`slurm`), and the settings of each (`topology.py` composes them into a Topology).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Port = Annotated[int, Field(ge=1, le=65535)]
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SshSettings(Strict):
    """How `ops` reaches a node on another host (fabric). Unset fields come from ~/.ssh/config, as for ssh.

    `host_key_check: strict` (the default) connects only to a host whose key is in `known_hosts`
    (default ~/.ssh/known_hosts); `accept-new` also accepts and records a host never seen before.
    A changed key is always refused.
    """

    user: str | None = None
    port: Port | None = None  # default: ~/.ssh/config, else 22
    identity_file: str | None = None  # default: the ssh agent and ~/.ssh/id_*
    jump: str | None = None  # a jump host, `[user@]host[:port]` (ProxyJump)
    known_hosts: str | None = None
    host_key_check: Literal["strict", "accept-new"] = "strict"
    connect_timeout_s: float = Field(10.0, gt=0)
    tmux_socket: str | None = None  # tmux -L NAME on the node (default: the default tmux server)
    workdir: str | None = None  # where processes start and relative log paths live (default: home)
    python: str = "python3"  # runs the small stdlib helper that checks, polls and stops processes there

    @field_validator("user", "identity_file", "jump", "known_hosts", "tmux_socket", "workdir", "python")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(c in value for c in "\n\r\0")):
            raise ValueError(f"{value!r} must be one non-empty line")
        return value


SLURM_TIME = re.compile(r"^(\d+-\d{1,2}(:\d{1,2}){0,2}|\d+(:\d{1,2}){0,2})$")
SBATCH_WORD = re.compile(r"^[^\s#'\"\\]+$")


class SlurmSettings(Strict):
    """One sbatch job per node: its `#SBATCH` lines. `extra_args` are more of them, e.g. `--constraint=a100`."""

    partition: str | None = None  # default: the cluster's default partition
    gpus: int = Field(0, ge=0)  # --gres=gpu:N
    nodes: int = Field(1, ge=1)  # --nodes=N (a model across them: config/parallel.py)
    time: str = "1:00:00"
    account: str | None = None
    qos: str | None = None
    exclusive: bool = False
    cpus_per_task: int | None = Field(None, ge=1)
    mem: str | None = None
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("partition", "account", "qos", "mem")
    @classmethod
    def _word(cls, value: str | None) -> str | None:
        if value is not None and not SBATCH_WORD.match(value):
            raise ValueError(f"{value!r} must be one word (no spaces, quotes or '#')")
        return value

    @field_validator("time", mode="before")
    @classmethod
    def _time_is_text(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            raise ValueError(f"quote the time limit, e.g. time: \"4:00:00\" (YAML read an unquoted H:MM:SS "
                             f"as the number {value})")
        return value

    @field_validator("time")
    @classmethod
    def _time(cls, value: str) -> str:
        if not SLURM_TIME.match(value):
            raise ValueError(f"{value!r} is not a slurm time limit (MINUTES, HH:MM:SS, D-HH, D-HH:MM:SS)")
        return value

    @field_validator("extra_args")
    @classmethod
    def _extra(cls, value: list[str]) -> list[str]:
        for arg in value:
            if not arg.startswith("-") or any(c in arg for c in "\n\r\0"):
                raise ValueError(f"{arg!r} is not one sbatch option (e.g. --constraint=a100)")
        return value


Backend = Literal["local", "tmux", "ssh", "slurm"]


class Node(Strict):
    """A machine (`host`) or a slurm allocation (`slurm`).

    Its backend follows from where it is: a slurm node runs in a slurm job, a host that is not this
    machine is reached over ssh (the tmux backend there), and a node on this machine uses the
    topology's `backend` (local or tmux). `bind` is the address its servers listen on: default
    loopback on this machine (nothing outside can reach it) and 0.0.0.0 elsewhere (as vLLM does);
    set it to keep servers on one interface, e.g. `bind: 127.0.0.2` for a node at that address. On a node
    with `hosts:`, `bind` is the address of its host on this machine (the others bind their own loopback
    address, or 0.0.0.0).
    """

    host: str | None = None
    hosts: list[str] | None = Field(None, min_length=2)  # one node over several machines (config/parallel.py)
    gpus: int | None = Field(None, ge=0)  # per host
    cpus: int | None = Field(None, ge=1)  # cores for CPU vLLM replicas (checked when given)
    bind: str | None = None
    vllm_command: list[str] | None = Field(None, min_length=1)  # this node's vLLM (e.g. a venv's bin/vllm)
    ssh: SshSettings | None = None
    slurm: SlurmSettings | None = None

    @field_validator("bind")
    @classmethod
    def _bind(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ipaddress.ip_address(value)
            except ValueError:
                raise ValueError(f"{value!r} is not an IP address to listen on (e.g. 0.0.0.0, 127.0.0.2)") from None
        return value

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if any(not host.strip() or any(c in host for c in " \n\r\0") for host in value):
                raise ValueError("each host is one name or address")
            twice = sorted({host for host in value if value.count(host) > 1})
            if twice:
                raise ValueError(f"{twice[0]} is listed twice")
            if sum(host in LOCAL_HOSTS for host in value) > 1:
                raise ValueError("this machine is listed twice (localhost, 127.0.0.1 and ::1 are one machine)")
        return value

    @model_validator(mode="after")
    def _host_or_slurm(self) -> Node:
        if self.hosts is not None:
            if self.host is not None or self.slurm is not None:
                raise ValueError("a node has one of 'host', 'hosts' or 'slurm'")
            return self
        if self.host is None and self.slurm is None:
            raise ValueError("a node needs either 'host', 'hosts' or 'slurm'")
        if self.host is not None and self.slurm is not None:
            raise ValueError("a node has either 'host' (a fixed machine) or 'slurm' (allocated), not both")
        if self.slurm is not None and self.gpus is not None and self.gpus != self.slurm.gpus:
            raise ValueError(f"gpus: {self.gpus} differs from slurm.gpus: {self.slurm.gpus}")
        if self.slurm is not None and self.ssh is not None:
            raise ValueError("'ssh' does not apply to a slurm node")
        return self

    @property
    def gpu_count(self) -> int:
        if self.slurm is not None:
            return self.slurm.gpus
        return self.gpus or 0

    @property
    def is_local(self) -> bool:
        return self.host is not None and self.host in LOCAL_HOSTS

    def host_nodes(self) -> list[Node]:
        """A `hosts:` node as one node per host (its settings, one host each); any other node as itself."""
        if not self.hosts:
            return [self]
        return [self.model_copy(update={"hosts": None, "host": host,
                                        "bind": self.bind if host in LOCAL_HOSTS else None})  # see above
                for host in self.hosts]

    def backend(self, this_machine: str) -> Backend:
        """slurm, ssh, or `this_machine` (local or tmux) for a node on this machine."""
        if self.slurm is not None:
            return "slurm"
        if not self.is_local:
            return "ssh"
        return "tmux" if this_machine == "tmux" else "local"
