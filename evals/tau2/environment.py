"""Which domains we implement, and a fresh environment for a task (initial state applied)."""

from __future__ import annotations

import copy
from typing import Any

from orchestra_ops.evals.tau2.airline import AIRLINE
from orchestra_ops.evals.tau2.domain import Domain, Env, deep_merge
from orchestra_ops.evals.tau2.mock import MOCK
from orchestra_ops.evals.tau2.retail import RETAIL
from orchestra_ops.evals.tau2.synthetic import SYNTHETIC
from orchestra_ops.evals.tau2.tasks import DomainData, Task
from orchestra_ops.evals.tau2.telecom_scenario import TELECOM

from orchestra_ops.errors import ConfigError

DOMAINS: dict[str, Domain] = {"synthetic": SYNTHETIC, "mock": MOCK, "airline": AIRLINE, "retail": RETAIL,
                              "telecom": TELECOM}
DOMAIN_NAMES = tuple(DOMAINS)


def get_domain(name: str) -> Domain:
    if name not in DOMAINS:
        raise ConfigError(f"--domain {name}: not a domain ({', '.join(DOMAIN_NAMES)})")
    return DOMAINS[name]


def base_env(domain: Domain, data: DomainData) -> Env:
    """The domain's DBs as loaded, synced (τ²-bench's environment syncs when it is built)."""
    db = domain.normalize_db(copy.deepcopy(data.db))
    user_source = data.user_db if data.user_db is not None else domain.default_user_db
    user_db = domain.normalize_user_db(copy.deepcopy(dict(user_source))) if user_source is not None else None
    env = Env(domain, db, user_db)
    env.sync()
    return env


def fresh_env(domain: Domain, data: DomainData, task: Task) -> Env:
    """A new environment with the task's initialization_data merged in and its initialization_actions run
    (each followed by the sync, as τ²-bench's `run_env_function_call` does)."""
    env = base_env(domain, data)
    initial: dict[str, Any] = task.get("initial_state") or {}
    patches = initial.get("initialization_data") or {}
    if patches.get("agent_data"):
        env.db = domain.normalize_db(deep_merge(env.db, patches["agent_data"]))
    if patches.get("user_data") and env.user_db is not None:
        env.user_db = domain.normalize_user_db(deep_merge(env.user_db, patches["user_data"]))
    for action in initial.get("initialization_actions") or ():
        env.run_function(str(action.get("env_type", "assistant")), str(action["func_name"]),
                         action.get("arguments") or {})
        env.sync()
    env.sync()
    return env
