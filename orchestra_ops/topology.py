"""The topology file: one YAML that declares nodes, models, services, providers and roles.

`load_topology(path)` parses the YAML keeping each node's line, validates it with the pydantic
schema below (`extra="forbid"` everywhere) and then runs the cross-field checks of `checks.py`.
Every problem becomes one line `FILE:LINE: dotted.path: message`, and all of them are raised
together as a TopologyError.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestra_ops.errors import TopologyError
from orchestra_ops.yamlpos import PositionedYaml, load_positioned

Port = Annotated[int, Field(ge=1, le=65535)]
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TOPOLOGY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Defaults(Strict):
    ulimit_nofile: int = Field(65536, ge=1024)
    log_dir: str | None = None  # default: <OPS_HOME>/<name>/logs
    ready_timeout_s: float = Field(900, gt=0)
    request_timeout_s: float = Field(600, gt=0)
    vllm_cache_root: str = "/tmp/orchestra-ops/vllm-cache"
    vllm_command: list[str] = Field(default_factory=lambda: ["vllm"], min_length=1)
    ops_command: list[str] = Field(default_factory=lambda: ["ops"], min_length=1)


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
    set it to keep servers on one interface, e.g. `bind: 127.0.0.2` for a node at that address.
    """

    host: str | None = None
    gpus: int | None = Field(None, ge=0)
    bind: str | None = None
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

    @model_validator(mode="after")
    def _host_or_slurm(self) -> Node:
        if self.host is None and self.slurm is None:
            raise ValueError("a node needs either 'host' or 'slurm'")
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

    def backend(self, this_machine: str) -> Backend:
        """slurm, ssh, or `this_machine` (local or tmux) for a node on this machine."""
        if self.slurm is not None:
            return "slurm"
        if not self.is_local:
            return "ssh"
        return "tmux" if this_machine == "tmux" else "local"


class SimSettings(Strict):
    """How the simulated engine behaves (`engine: sim`); see `ops serve sim --help`."""

    latency_ms: float = Field(20.0, ge=0)
    prefill_ms_per_token: float = Field(0.0, ge=0)
    decode_ms_per_token: float = Field(0.0, ge=0)
    jitter: float = Field(0.0, ge=0, le=1)
    startup_delay_s: float = Field(0.0, ge=0)
    fail: str | None = None  # "500:0.05,429:0.02"
    malformed_rate: float = Field(0.0, ge=0, le=1)
    hang_rate: float = Field(0.0, ge=0, le=1)
    crash_after: int | None = Field(None, ge=1)
    seed: int = 0

    @field_validator("fail")
    @classmethod
    def _fail_spec(cls, value: str | None) -> str | None:
        if value is None:
            return value
        for part in value.split(","):
            match = re.fullmatch(r"\s*(\d{3})\s*:\s*([0-9.]+)\s*", part)
            if not match or not 0 <= float(match.group(2)) <= 1:
                raise ValueError(f"'{part.strip()}' is not STATUS:RATE (e.g. 500:0.05)")
        return value


class ModelSpec(Strict):
    model: str = Field(min_length=1)
    engine: Literal["vllm", "sim"] = "vllm"
    node: str
    replicas: int = Field(1, ge=1, le=1024)
    gpus_per_replica: int = Field(1, ge=0)
    gpus: list[Annotated[int, Field(ge=0)]] | None = None  # explicit GPU indices, in replica order
    port: Port
    served_model_name: str | None = None
    tool_parser: str | None = None
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=1)
    request_defaults: dict[str, Any] = Field(default_factory=dict)
    engine_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    sim: SimSettings | None = None

    @property
    def served_name(self) -> str:
        return self.served_model_name or self.model

    @property
    def gpu_count(self) -> int:
        return self.replicas * self.gpus_per_replica


class RetrievalService(Strict):
    kind: Literal["retrieval"]
    node: str
    port: Port
    gpu: int | None = Field(None, ge=0)  # None: the encoder runs on the CPU
    index_dir: str
    encoder: str | None = None
    max_batch_size: int = Field(64, ge=1)
    max_wait_ms: float = Field(5.0, ge=0)
    max_queue: int = Field(4096, ge=1)
    batching: bool = True
    examples: str | None = None
    env: dict[str, str] = Field(default_factory=dict)


class Provider(Strict):
    """An external OpenAI-compatible API. The key is read from `api_key_env` at call time."""

    kind: Literal["openai"] = "openai"
    model: str
    base_url: str
    api_key_env: str | None = None
    max_concurrency: int = Field(32, ge=1)
    request_defaults: dict[str, Any] = Field(default_factory=dict)

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.match(value):
            raise ValueError(f"'{value}' is not an environment variable name (the key itself never goes here)")
        return value


class Topology(Strict):
    name: str
    # how nodes on this machine run their processes (local | tmux); slurm nodes and nodes on other
    # hosts choose their own backend (see Node). `slurm` says every node is a slurm node.
    backend: Literal["local", "tmux", "slurm"] = "local"
    defaults: Defaults = Field(default_factory=Defaults)
    nodes: dict[str, Node] = Field(min_length=1)
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    services: dict[str, RetrievalService] = Field(default_factory=dict)
    providers: dict[str, Provider] = Field(default_factory=dict)
    roles: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TOPOLOGY_NAME.match(value):
            raise ValueError(f"'{value}' must be letters, digits, '.', '_' or '-' (it names a directory)")
        return value

    @field_validator("nodes", "models", "services", "providers")
    @classmethod
    def _keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if not KEY_NAME.match(str(key)):
                raise ValueError(f"'{key}' must be letters, digits, '.', '_' or '-'")
        return value


def load_topology(path: str | Path) -> Topology:
    """Read, validate and check a topology file; raise TopologyError listing every problem."""
    source = Path(path)
    doc = load_positioned(source)
    return validate_topology(doc)


def validate_topology(doc: PositionedYaml) -> Topology:
    """Validate an already parsed document (used by tests that mutate topologies in memory)."""
    from orchestra_ops.checks import check_topology  # the checks import this module's models

    problems: list[str] = []
    if not isinstance(doc.data, dict):
        raise TopologyError([f"{doc.source}:1: the top level must be a mapping (name:, nodes:, models: …)"])
    problems.extend(_secret_key_problems(doc))
    try:
        topology = Topology.model_validate(doc.data)
    except ValidationError as exc:
        errors = [err for err in exc.errors() if not _is_secret_key_error(err)]
        problems.extend(_describe(doc, err) for err in errors)
        raise TopologyError(sorted(set(problems), key=_line_order)) from None
    problems.extend(doc.where(path, message) for path, message in check_topology(topology))
    if problems:
        raise TopologyError(sorted(set(problems), key=_line_order))
    return topology


def _line_order(problem: str) -> tuple[int, str]:
    match = re.match(r"^.*?:(\d+): ", problem)
    return (int(match.group(1)) if match else 0, problem)


def _secret_key_problems(doc: PositionedYaml) -> list[str]:
    """A key written into the topology is refused outright, before anything else is said."""
    providers = doc.data.get("providers") if isinstance(doc.data, dict) else None
    problems = []
    if isinstance(providers, dict):
        for name, body in providers.items():
            if isinstance(body, dict) and "api_key" in body:
                problems.append(
                    doc.where(
                        ("providers", name, "api_key"),
                        "never put a key in the topology; name its environment variable with api_key_env",
                    )
                )
    return problems


def _is_secret_key_error(err: Any) -> bool:
    loc = tuple(err["loc"])
    return err["type"] == "extra_forbidden" and len(loc) == 3 and loc[0] == "providers" and loc[2] == "api_key"


def _describe(doc: PositionedYaml, err: Any) -> str:
    loc = tuple(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        valid = ", ".join(_fields_at(loc[:-1])) or "none"
        return doc.where(loc, f"unknown key '{loc[-1]}'; valid keys: {valid}")
    if kind == "missing":
        return doc.where(loc, "required")
    if kind == "literal_error":
        return doc.where(loc, f"{_input(err)} is not one of {err['ctx']['expected']}")
    if loc and loc[-1] == "port" and kind in {"less_than_equal", "greater_than_equal"}:
        return doc.where(loc, f"port {_input(err)} is outside 1-65535")
    message = str(err["msg"])
    message = message.removeprefix("Value error, ")
    if kind in {"int_parsing", "float_parsing", "bool_parsing", "string_type", "int_type", "dict_type",
                "list_type", "model_type", "greater_than_equal", "less_than_equal", "greater_than",
                "less_than", "too_short", "int_from_float"}:
        message = f"{message} (got {_input(err)})"
    return doc.where(loc, message)


def _input(err: Any) -> str:
    value = err.get("input")
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The valid keys of the model found at `loc` in the schema (for 'unknown key' errors)."""
    model: Any = Topology
    for part in loc:
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(part))
            if field is None:
                return []
            model = _unwrap(field.annotation)
        elif getattr(model, "__origin__", None) is dict:
            model = _unwrap(model.__args__[1])
        elif getattr(model, "__origin__", None) is list:
            model = _unwrap(model.__args__[0])
        else:
            return []
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """Strip Optional/Annotated so `_fields_at` can keep walking."""
    args = getattr(annotation, "__args__", None)
    if args and getattr(annotation, "__origin__", None) not in (dict, list):
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if models:
            return models[0]
    return annotation
