"""The multi-round loop of the affinity test and benchmarks: agent-shaped tasks whose prompt is the whole growing
history, sent through the eval engine's own client (FleetClient -> ModelClient -> ReplicaPool), affine or least
loaded.

A task is a session (callctx.session_scope). Round k's prompt is: a system message (shared by every task
of the run, salted per run), the task's problem, then for each earlier round the model's reply and a tool
result of `grow` words, which the task waits for (`tool_s`) before its next round, as an agent waits for
its search or code. (Without that wait, least loaded sends a task back to the replica its last call just
left, the one with a free slot: an affinity by accident that agent runs, busy in their tools between
rounds, do not have.) The number of rounds of task i is drawn from [min_rounds, max_rounds] by a stable
hash of i, so both modes run the same work. Every reply is kept (their digest proves both modes got the
same answers from a deterministic engine), with each call's latency and replica, and the session moves.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from orchestra_ops.client.affinity import Move
from orchestra_ops.client.callctx import session_scope
from orchestra_ops.client.chat import CallEvent
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.routing import Routing

# words the tiny models' tokenizer learned whole (scripts/build_tiny_model.py), so a word is about a token
WORDS_TEXT = ("the of and to in is you that it was for on are as with they at be this have from or one had by word but "
         "not what all were we when your can said there use an each which do how their if will up other about out "
         "many then them these so some would make like into time has look two more write go see number no way "
         "could people than first water been call who now find long down day did get come made may part weather "
         "city paris rome london tokyo search query result answer question tool function name arguments")
WORDS = WORDS_TEXT.split()


@dataclass(frozen=True)
class LoopShape:
    tasks: int
    min_rounds: int
    max_rounds: int
    system_words: int  # the shared system message
    problem_words: int
    grow_words: int  # the tool result added each round
    max_tokens: int
    salt: str  # starts the system message: a run never finds another run's cache
    tool_s: float = 0.0  # mean time in the tool between two rounds (each draw uniform in [0.5, 1.5] x this)
    ignore_eos: bool = False  # vLLM: every answer max_tokens long

    def tool_time(self, task: int, step: int) -> float:
        return self.tool_s * random.Random(f"tool-time-{task}-{step}").uniform(0.5, 1.5)

    def rounds(self, task: int) -> int:
        draw = int.from_bytes(hashlib.blake2b(f"rounds-{task}".encode(), digest_size=4).digest(), "big")
        return self.min_rounds + draw % (self.max_rounds - self.min_rounds + 1)

    def text(self, what: str, words: int) -> str:
        rng = random.Random(f"{self.salt}/{what}")
        return " ".join(rng.choice(WORDS) for _ in range(words))

    def system(self) -> str:
        return f"run {self.salt}. You solve problems by calling tools. " + self.text("system", self.system_words)

    def problem(self, task: int) -> str:
        return f"Problem {task}: " + self.text(f"problem-{task}", self.problem_words)

    def tool_result(self, task: int, step: int) -> str:
        return f"result of round {step}: " + self.text(f"tool-{task}-{step}", self.grow_words)


@dataclass
class LoopResult:
    mode: str
    wall_s: float
    latencies: list[float]
    calls: Counter[str]  # replica -> calls
    moves: list[Move]
    prompts: dict[int, list[list[dict[str, Any]]]]  # task -> the messages of each round, in order
    replies: dict[int, list[str]] = field(default_factory=dict)
    placements: dict[int, list[str]] = field(default_factory=dict)  # task -> the replica of each round

    @property
    def stayed(self) -> float:
        """The share of rounds after the first that went to the replica of the round before."""
        pairs = [(a, b) for rounds in self.placements.values() for a, b in itertools.pairwise(rounds)]
        return sum(a == b for a, b in pairs) / len(pairs) if pairs else 0.0

    @property
    def digest(self) -> str:
        """The replies of every round of every task: equal digests = the same answers."""
        text = repr(sorted(self.replies.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0

    def max_over_mean(self, replicas: int) -> float:
        mean = sum(self.calls.values()) / replicas
        return max(self.calls.values()) / mean if mean else 0.0

    @property
    def mean_latency(self) -> float:
        return statistics.fmean(self.latencies) if self.latencies else 0.0


async def run_loop(routing: Routing, model: str, shape: LoopShape, concurrency: int, mode: str,
                   request_timeout_s: float = 600.0) -> LoopResult:
    """Every task of `shape` through a fresh FleetClient with affinity `mode` ("session" or "none")."""
    fleet = FleetClient(routing.with_affinity("session" if mode == "session" else "none"),
                  retry=RetryPolicy(attempts=1), request_timeout_s=request_timeout_s)
    events: list[CallEvent] = []
    moves: list[Move] = []
    fleet.on_call = events.append
    fleet.on_move = lambda pool, move: moves.append(move)
    prompts: dict[int, list[list[dict[str, Any]]]] = {}
    replies: dict[int, list[str]] = {}
    slots = asyncio.Semaphore(concurrency)
    system = shape.system()

    async def task(i: int) -> None:
        async with slots:
            key = f"{shape.salt}-task-{i}"
            history: list[dict[str, Any]] = [{"role": "system", "content": system},
                                             {"role": "user", "content": shape.problem(i)}]
            prompts[i], replies[i] = [], []
            with session_scope(key):
                for step in range(shape.rounds(i)):
                    prompts[i].append(list(history))
                    reply = await fleet.chat(model, history, task=i, max_tokens=shape.max_tokens, temperature=0,
                                             **({"ignore_eos": True} if shape.ignore_eos else {}))
                    content = reply.content or ""
                    replies[i].append(content)
                    history += [{"role": "assistant", "content": content},
                                {"role": "user", "content": shape.tool_result(i, step)}]
                    if shape.tool_s:
                        await asyncio.sleep(shape.tool_time(i, step))
            fleet.end_session(key)

    start = time.perf_counter()
    try:
        await asyncio.gather(*(task(i) for i in range(shape.tasks)))
    finally:
        wall = time.perf_counter() - start
        await fleet.close()
    failed = [e for e in events if e.status != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} call(s) failed, e.g. {failed[0].status}: {failed[0].error}")
    placements: dict[int, list[str]] = {}
    for event in events:
        placements.setdefault(int(str(event.task)), []).append(str(event.replica))
    return LoopResult(mode, wall, [e.latency_s for e in events], Counter(str(e.replica) for e in events), moves,
                      prompts, replies, placements)


def block_ideal(rounds: list[list[int]], block: int = 128) -> int:
    """Prefix-cache hits of one task's prompts (token ids, in order) if each round k found every whole block
    it shares with round k-1 (vLLM never counts the block holding a prompt's last token)."""
    total = 0
    previous: list[int] = []
    for ids in rounds:
        shared = 0
        for a, b in zip(ids, previous, strict=False):
            if a != b:
                break
            shared += 1
        total += min(shared, len(ids) - 1) // block * block
        previous = ids
    return total
