"""Routing: every role resolves to a declared model, service or provider, and nothing else.

Built from a topology plus the endpoints file `ops up` wrote (`from_topology`), or from an
endpoints file alone (`from_model_config`: its keys are both the models and the roles). No
environment variable can add a target or change where one points; a provider's key is named by
`api_key_env` and read only when a request is sent.

A LoRA adapter (a model's `lora_modules`, or one `ops lora load` put in: `adapters`) is a target of
its own: its base model's settings, the replicas the endpoints file lists under its name, and its
name as the request's `model` (how vLLM picks an adapter).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from orchestra_ops.client.affinity import Affinity, AffinityMode
from orchestra_ops.client.pricing import Price
from orchestra_ops.config.model_spec import ModelSpec, Pricing
from orchestra_ops.config.parallel import ranks_step_together
from orchestra_ops.config.topology import Topology
from orchestra_ops.core.suggest import did_you_mean
from orchestra_ops.errors import ConfigError
from orchestra_ops.fleet.endpoints import Endpoints

TargetKind = Literal["model", "service", "provider"]
DEFAULT_REQUEST_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Target:
    name: str  # model / service / provider key (the endpoints key with --model-config)
    kind: TargetKind
    served_name: str  # what goes in the request's "model" field
    addresses: tuple[tuple[str, int], ...] = ()  # replicas (models and services)
    base_url: str | None = None  # providers
    api_key_env: str | None = None  # providers: the variable's name, never its value
    max_concurrency: int | None = None  # providers
    request_defaults: Mapping[str, Any] = field(default_factory=dict)
    max_model_len: int | None = None
    request_timeout_s: float | None = None  # this target's own per-call timeout (None: the routing's)
    adapter_of: str | None = None  # a LoRA adapter: the model key it runs on
    tokenizer: str | None = None  # declared tokenizer ("estimate" or a path); None: checkpoint dir, else the replica
    checkpoint: str | None = None  # the model as the topology names it (a local checkpoint path, or a hub id)
    revision: str | None = None  # engine_args' --revision (a hub model's revision), for the response cache's key
    adapter_path: str | None = None  # a LoRA adapter: its directory (lora_modules, or lora.json of `ops lora load`)
    price: Price | None = None  # the topology's `pricing` (None: calls are not priced)
    affinity: Affinity = field(default_factory=Affinity)  # how its pool places session calls (topology `routing:`)
    dp_ranks: int = 1  # vLLM internal DP ranks behind its endpoint that a session's calls pin (client/dp_ranks.py)
    lockstep: bool = False  # its endpoints are DP ranks that step together: one down takes all out (pool.py)

    @property
    def where(self) -> str:
        if self.kind == "provider":
            return f"{self.base_url} (external; key from ${self.api_key_env})" if self.api_key_env \
                else f"{self.base_url} (external)"
        where = ", ".join(f"{host}:{port}" for host, port in self.addresses) or "(no replicas)"
        return f"{where} (LoRA adapter on {self.adapter_of})" if self.adapter_of else where


@dataclass(frozen=True)
class Routing:
    source: str  # the topology file or endpoints file this came from
    name: str  # topology name (or the endpoints file's name), used for default run dirs
    endpoints_file: str
    roles: Mapping[str, str]  # role -> target key
    targets: Mapping[str, Target]
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    aliases: Mapping[str, str] = field(default_factory=dict)  # tool alias -> role or target key (topology aliases:)
    runtime_lora: tuple[str, ...] = ()  # model keys that take `ops lora load` (runtime_lora: true)
    workdir: str | None = None  # where the fleet was started (relative model and adapter paths are from there)
    declared: bool = True  # targets come from a topology (False: an endpoints file, which says only names)

    def resolve(self, name: str) -> tuple[str, Target]:
        """(role or "", target) for a role, a model/provider key or a served model name."""
        if name in self.roles:
            return name, self.targets[self.roles[name]]
        if name in self.targets:
            return "", self.targets[name]
        served = [t for t in self.targets.values() if t.kind == "model" and t.served_name == name]
        if served:
            return "", served[0]
        roles = ", ".join(sorted(self.roles)) or "none"
        keys = ", ".join(sorted(self.targets)) or "none"
        hint = did_you_mean(name, [*self.roles, *self.targets])
        if not hint and self.runtime_lora:
            hint = f"; an adapter? load it first: `ops lora load {name} DIR --model {self.runtime_lora[0]}`"
        raise ConfigError(f"'{name}' is neither a role nor a declared model or provider of {self.source} "
                          f"(roles: {roles}; models/providers: {keys}); nothing undeclared is ever called{hint}")

    def chat_target(self, name: str, *, flag: str | None = None, avoid: tuple[str, ...] = (),
                    purpose: str = "") -> Target:
        """The target a chat call to `name` goes to; an error if it cannot take chat calls.

        `flag`: the suite's option that sets `name` (e.g. `--user`); when `name` is a role the routing lacks,
        the error names that flag with a model to try (one not among `avoid`, the other names the run calls)
        and says what the role is for (`purpose`, e.g. "the user simulator").
        """
        try:
            _, target = self.resolve(name)
        except ConfigError:
            if flag is None or name in self.targets:
                raise
            raise ConfigError(self._missing_role(name, flag, avoid, purpose)) from None
        if target.kind == "service":
            raise ConfigError(f"'{name}' is the service '{target.name}', not a chat model")
        if target.adapter_of and not target.addresses:
            raise ConfigError(f"adapter '{target.name}' is served by no replica of {target.adapter_of} in "
                              f"{self.endpoints_file}; `ops lora load {target.name} PATH --model "
                              f"{target.adapter_of}` (a restart drops adapters loaded at run time)")
        if target.kind == "model" and not target.addresses:
            raise ConfigError(f"model '{target.name}' (served as '{target.served_name}') has no replicas in "
                              f"{self.endpoints_file}; run `ops up` for this topology")
        return target

    def _missing_role(self, name: str, flag: str, avoid: tuple[str, ...], purpose: str) -> str:
        taken = {self.resolve(n)[1].name for n in avoid if n in self.roles or n in self.targets}
        chat = [key for key, t in self.targets.items() if t.kind != "service" and not t.adapter_of]
        example = next((key for key in chat if key not in taken), chat[0] if chat else "MODEL")
        roles = ", ".join(sorted(self.roles)) or "none"
        what = f" ({purpose})" if purpose else ""
        return (f"no role '{name}'{what} in {self.source}: name the model it goes to with {flag}, e.g. "
                f"`{flag} {example}` "
                f"(roles: {roles}; models/providers: {', '.join(chat) or 'none'}), or add `{name}: MODEL` "
                "under roles:")

    def secret_variables(self) -> list[str]:
        """The `api_key_env` variable of every provider declared (called by this run or not): what a run redacts."""
        return sorted({t.api_key_env for t in self.targets.values() if t.api_key_env})

    def with_affinity(self, mode: AffinityMode) -> Routing:
        """The same routing with every model's affinity mode set to `mode` (`ops eval --affinity`);
        each keeps its load factor. Providers keep theirs (none: a single endpoint)."""
        targets = {key: replace(t, affinity=Affinity(mode, t.affinity.load_factor)) if t.kind == "model" else t
                   for key, t in self.targets.items()}
        return replace(self, targets=targets)

    def table(self) -> list[tuple[str, str, str, str]]:
        """Rows (role, target, kind, replicas) for the routing table a run prints at start."""
        rows: list[tuple[str, str, str, str]] = []
        for role, key in self.roles.items():
            target = self.targets[key]
            label = key if target.served_name == key else f"{key} ({target.served_name})"
            rows.append((role, label, target.kind, target.where))
        return rows


def from_topology(topology: Topology, endpoints: Endpoints, *, source: str, endpoints_file: str,
                  adapters: Mapping[str, str] | None = None, adapter_paths: Mapping[str, str] | None = None,
                  workdir: str | None = None) -> Routing:
    """`adapters`: adapters loaded at run time (name -> model key), beside the topology's lora_modules;
    `adapter_paths`: their directories (name -> path, lora.json)."""
    targets: dict[str, Target] = {}
    for key, model in topology.models.items():
        addresses = tuple((e["ip_addr"], e["port"]) for e in endpoints.get(model.served_name, []))
        targets[key] = Target(name=key, kind="model", served_name=model.served_name, addresses=addresses,
                              request_defaults=dict(model.request_defaults), max_model_len=model.max_model_len,
                              request_timeout_s=model.request_timeout_s, tokenizer=model.tokenizer,
                              checkpoint=model.model, revision=engine_arg(model.engine_args, "--revision"),
                              price=_price(model.pricing),
                              affinity=Affinity(model.routing.affinity, model.routing.load_factor),
                              dp_ranks=pinned_ranks(model),
                              lockstep=ranks_step_together(model.data_parallel.mode, model.replicas))
    declared = {name: key for key, model in topology.models.items() for name in model.lora_modules}
    paths = {**(adapter_paths or {}),
             **{name: path for model in topology.models.values() for name, path in model.lora_modules.items()}}
    for name, key in {**(adapters or {}), **declared}.items():
        if key in targets and name not in targets:
            addresses = tuple((e["ip_addr"], e["port"]) for e in endpoints.get(name, []))
            targets[name] = replace(targets[key], name=name, served_name=name, addresses=addresses, adapter_of=key,
                                    adapter_path=paths.get(name))
    for key in topology.services:
        addresses = tuple((e["ip_addr"], e["port"]) for e in endpoints.get(key, []))
        targets[key] = Target(name=key, kind="service", served_name=key, addresses=addresses)
    for key, provider in topology.providers.items():
        targets[key] = Target(name=key, kind="provider", served_name=provider.model, base_url=provider.base_url,
                              api_key_env=provider.api_key_env, max_concurrency=provider.max_concurrency,
                              request_defaults=dict(provider.request_defaults),
                              request_timeout_s=provider.request_timeout_s, price=_price(provider.pricing),
                              affinity=Affinity("none"))  # one endpoint; nothing about our tasks leaves
    roles = {role: key for role, key in topology.roles.items() if key in targets}
    return Routing(source=source, name=topology.name, endpoints_file=endpoints_file, roles=roles,
                   targets=targets, request_timeout_s=topology.defaults.request_timeout_s,
                   aliases=dict(topology.aliases), workdir=workdir,
                   runtime_lora=tuple(key for key, model in topology.models.items() if model.runtime_lora))


def engine_arg(argv: Sequence[str], flag: str) -> str | None:
    """The value of `flag` in an argv (`--flag V` or `--flag=V`; the last one wins, as argparse reads it)."""
    value = None
    for index, arg in enumerate(argv):
        if arg == flag and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1:]
    return value


def _price(pricing: Pricing | None) -> Price | None:
    return None if pricing is None else Price(pricing.input_per_mtok, pricing.output_per_mtok)


def pinned_ranks(model: ModelSpec) -> int:
    """The internal DP ranks a session's calls to `model` are pinned among (1: no pinning)."""
    settings = model.data_parallel
    return model.replicas if settings.mode == "vllm-internal" and settings.pin_ranks else 1


def from_model_config(endpoints: Endpoints, *, source: str, name: str) -> Routing:
    """An endpoints file alone: each key is a model (served under that name) and a role of its own."""
    targets = {
        key: Target(name=key, kind="model", served_name=key, checkpoint=key,
                    addresses=tuple((e["ip_addr"], e["port"]) for e in entries))
        for key, entries in endpoints.items()
    }
    return Routing(source=source, name=name, endpoints_file=source, roles={k: k for k in targets},
                   targets=targets, declared=False)
