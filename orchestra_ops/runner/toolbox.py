"""The Toolbox: what a run offers suites besides chat, one instance per run, shared by its tasks.

    retrieve   POST /retrieve on a declared retrieval service (client/retrieval.py)
    execute    run model-written code in the sandbox (orchestra_ops/sandbox), `exec_workers` at once
    tokenizer  a model's own tokenizer for context budgets (client/tokenizer.py)

Nothing here is created before a suite asks for it: a run that never executes code never probes
for bubblewrap, one that never counts tokens never loads a tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.retrieval import RetrievalClient, RetrievalResult, RetrievalSettings
from orchestra_ops.client.tokenizer import ReplicaTokenizer, Tokenizer, declared_tokenizer
from orchestra_ops.sandbox import ExecResult, Sandbox, SandboxPolicy


class Toolbox:
    def __init__(self, fleet: FleetClient, *, exec_workers: int | None = None) -> None:
        self.fleet = fleet
        self.exec_workers = exec_workers
        self._retrieval: RetrievalClient | None = None
        self._sandbox: Sandbox | None = None
        self._tokenizers: dict[str, Tokenizer] = {}

    # retrieval

    async def retrieve(self, services: Sequence[str], query: str, *, topk: int, eid: Any,
                       settings: RetrievalSettings | None = None) -> RetrievalResult:
        if self._retrieval is None:
            self._retrieval = RetrievalClient(self.fleet.routing, self.fleet.transport)
        return await self._retrieval.retrieve(services, query, topk=topk, eid=eid,
                                              settings=settings or RetrievalSettings())

    # the sandbox

    @property
    def sandbox(self) -> Sandbox:
        """The run's sandbox (made on first use): `exec_workers` programs at once (default: the cores)."""
        if self._sandbox is None:
            policy = SandboxPolicy() if self.exec_workers is None else SandboxPolicy(workers=self.exec_workers)
            self._sandbox = Sandbox(policy)
        return self._sandbox

    async def execute(self, code: str, policy: SandboxPolicy | None = None) -> ExecResult:
        """Run `code` under `policy`'s limits (its `workers` is ignored: the run's bound applies)."""
        return await self.sandbox.run(code, policy)

    # tokenizers

    def tokenizer(self, name: str) -> Tokenizer:
        """The tokenizer of the model `name` (a role or model key) resolves to; see client/tokenizer.py."""
        target = self.fleet.routing.chat_target(name)
        found = self._tokenizers.get(target.name)
        if found is None:
            found = declared_tokenizer(target.tokenizer, target.checkpoint)
            if found is None:
                client = self.fleet.client(name)
                found = ReplicaTokenizer(target.name, target.served_name, client.pool,
                                         min(client.request_timeout_s, 60.0), self.fleet.retry)
            self._tokenizers[target.name] = found
        return found
