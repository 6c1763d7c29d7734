"""The reward exactly as τ²-bench computes it (reference §1.8).

1. A simulation that did not end with `user_stop` or `agent_stop` gets 0; a task with no
   evaluation_criteria gets 1.
2. ENV: the *predicted* env is a fresh env (initial state applied) plus a replay of every
   state-changing tool call of the trajectory, in order (user calls on the user side; errors are
   swallowed, unknown names are no-ops); the *gold* env is a fresh env plus the gold actions in
   order, exceptions swallowed, with no sync between or after them (τ²-bench's `make_tool_call`).
   db_reward = 1 iff both the agent-DB and the user-DB hashes agree.
   Env assertions run on the predicted env: 1 iff the function returns `assert_value` (default true).
   When the criteria have neither `actions` nor `env_assertions` (absent, not empty) nothing is
   replayed: ENV is 1 with db_match true and no DB breakdown, as τ²-bench's evaluator_env does.
3. ACTION: a gold action matches if any tool call (assistant or user) has its name and agrees on
   `compare_args` (null: the predicted call's keys; []: the name only; else the listed keys).
4. COMMUNICATE: each string must occur, lower-cased, in some assistant text with commas removed.
5. NL_ASSERTION: the judge's verdicts (reward 1 iff every returned item is met).
6. reward = the product of the components whose bases meet the task's reward_basis.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from orchestra_ops.evals.tau2.domain import Env
from orchestra_ops.evals.tau2.tasks import Task, reward_basis

NORMAL_ENDINGS = ("user_stop", "agent_stop")
ENV_BASES = {"DB", "ENV_ASSERTION"}


def tool_calls(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool call of the trajectory, assistant and user, in order."""
    return [call for m in messages if m.get("role") in ("assistant", "user") for call in m.get("tool_calls") or ()]


def replay(env: Env, messages: Sequence[dict[str, Any]]) -> Env:
    for call in tool_calls(messages):
        requestor = call.get("requestor", "assistant")
        kit = env.domain.user if requestor == "user" else env.domain.agent
        tool = kit.tools.get(call["name"]) if kit is not None else None
        if tool is None or not tool.mutates:
            continue
        env.call(call["name"], call.get("arguments") or {}, requestor)
    return env


def gold_env(env: Env, task: Task) -> Env:
    for action in (task.get("evaluation_criteria") or {}).get("actions") or ():
        try:
            env.invoke(action["name"], action.get("arguments") or {}, action.get("requestor", "assistant"))
        except Exception:  # τ²-bench logs and skips a gold action that raises (issue #499)
            continue
    return env


def action_matches(action: dict[str, Any], call: dict[str, Any]) -> bool:
    if action["name"] != call["name"]:
        return False
    predicted = call.get("arguments") or {}
    compare = action.get("compare_args")
    keys = list(predicted) if compare is None else list(compare)
    if not keys:
        return True
    gold = action.get("arguments") or {}
    return {k: v for k, v in predicted.items() if k in keys} == {k: v for k, v in gold.items() if k in keys}


def communicated(info: str, messages: Sequence[dict[str, Any]]) -> bool:
    return any(info.lower() in str(m.get("content") or "").lower().replace(",", "")
               for m in messages if m.get("role") == "assistant" and m.get("content"))


def evaluate(task: Task, messages: Sequence[dict[str, Any]], termination: str, make_env: Callable[[], Env],
             nl_checks: list[dict[str, Any]] | None) -> dict[str, Any]:
    """τ²-bench's RewardInfo for one simulation; `nl_checks`: the judge's verdicts (None: not judged)."""
    if termination not in NORMAL_ENDINGS:
        return {"reward": 0.0, "reward_basis": None,
                "info": {"note": f"Simulation terminated prematurely. Termination reason: {termination}"}}
    criteria = task.get("evaluation_criteria")
    if criteria is None:
        return {"reward": 1.0, "reward_basis": None, "info": {"note": "No evaluation criteria"}}
    basis = reward_basis(task)
    if criteria.get("actions") is None and criteria.get("env_assertions") is None:
        return _without_env(task, messages, nl_checks)
    predicted = replay(make_env(), messages)
    gold = gold_env(make_env(), task)
    db_match = predicted.hashes() == gold.hashes()
    db_reward = 1.0 if db_match else 0.0
    assertions = []
    for assertion in criteria.get("env_assertions") or ():
        try:
            value = predicted.run_function(str(assertion.get("env_type", "assistant")), assertion["func_name"],
                                           assertion.get("arguments") or {})
            met = value == assertion.get("assert_value", True)
        except Exception:
            met = False
        assertions.append({"env_assertion": assertion, "met": met, "reward": 1.0 if met else 0.0})
    assertion_reward = 1.0
    for check in assertions:
        assertion_reward *= check["reward"]
    env_reward, breakdown = 1.0, {}
    if "DB" in basis:
        env_reward *= db_reward
        breakdown["DB"] = db_reward
    if "ENV_ASSERTION" in basis:
        env_reward *= assertion_reward
        breakdown["ENV_ASSERTION"] = assertion_reward
    calls, action_checks = tool_calls(messages), []
    for action in criteria.get("actions") or ():
        matched = any(action_matches(action, call) for call in calls)
        action_checks.append({"action": action, "action_match": matched, "action_reward": 1.0 if matched else 0.0,
                              "tool_type": predicted.domain.tool_kind(action["name"])})
    info = _combine(task, messages, nl_checks, env_reward if set(basis) & ENV_BASES else 1.0, breakdown,
                    action_checks)
    return {"reward": info.pop("reward"), "db_check": {"db_match": db_match, "db_reward": db_reward},
            "env_assertions": assertions, **info,
            "info": {"db_hashes": {"predicted": list(predicted.hashes()), "gold": list(gold.hashes())}}}


def _without_env(task: Task, messages: Sequence[dict[str, Any]], nl_checks: list[dict[str, Any]] | None
                 ) -> dict[str, Any]:
    """τ²-bench's environment evaluator when the criteria have neither `actions` nor `env_assertions`
    (both absent, not empty): ENV reward 1 with db_match true, no DB/ENV_ASSERTION breakdown, and no
    replay at all, so a DB the agent changed is not checked (evaluator_env.py, parity)."""
    info = _combine(task, messages, nl_checks, 1.0, {}, [])
    return {"reward": info.pop("reward"), "db_check": {"db_match": True, "db_reward": 1.0}, "env_assertions": [],
            **info, "info": {"note": "No expected actions or env assertions"}}


def _combine(task: Task, messages: Sequence[dict[str, Any]], nl_checks: list[dict[str, Any]] | None,
             env_reward: float, breakdown: dict[str, float], action_checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The ACTION, NL_ASSERTION and COMMUNICATE parts, and the product over the task's reward_basis."""
    criteria = task.get("evaluation_criteria") or {}
    basis = reward_basis(task)
    action_reward = 1.0 if all(c["action_match"] for c in action_checks) else 0.0
    communicate_checks = [{"info": info, "met": communicated(info, messages),
                           "justification": "found in an agent message" if communicated(info, messages)
                           else "not found in any agent message"}
                          for info in criteria.get("communicate_info") or ()]
    communicate_reward = 1.0 if all(c["met"] for c in communicate_checks) else 0.0
    nl_reward = 1.0 if all(bool(c.get("met")) for c in nl_checks or ()) else 0.0
    reward = env_reward
    if "ACTION" in basis:
        reward *= action_reward
        breakdown["ACTION"] = action_reward
    if "NL_ASSERTION" in basis:
        if nl_checks is None:
            raise ValueError("the task's reward_basis includes NL_ASSERTION but nothing was judged")
        reward *= nl_reward
        breakdown["NL_ASSERTION"] = nl_reward
    if "COMMUNICATE" in basis:
        reward *= communicate_reward
        breakdown["COMMUNICATE"] = communicate_reward
    return {"reward": reward, "action_checks": action_checks, "nl_assertions": nl_checks,
            "communicate_checks": communicate_checks, "reward_basis": basis, "reward_breakdown": breakdown}
