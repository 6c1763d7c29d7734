"""τ²-bench's NL-assertion judge (reference §1.8 item 5) for `ops eval tau2`: the request as its judge gets
it (the grading instructions as the system message, every message of the trajectory as `role: content`, the
expected outcomes as a Python list) and its {"results": [...]} reply parsed into NLAssertionCheck dicts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.runner.suite import TaskContext
from orchestra_ops.runner.templates import Template


async def judge_nl_assertions(task: dict[str, Any], messages: list[dict[str, Any]], ctx: TaskContext,
                              templates: Mapping[str, Template], judge: str,
                              judge_args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The judge's verdicts on a task's NL assertions over a simulation's messages (none: no call)."""
    assertions = list((task.get("evaluation_criteria") or {}).get("nl_assertions") or [])
    if not assertions:
        return []
    # as τ²-bench's judge sees it: every message as `role: content` (tool results and empty turns too),
    # the outcomes as a Python list, the grading instructions as the system message
    conversation = "\n".join(f"{m['role']}: {m.get('content')}" for m in messages)
    prompt = templates["nl_judge"].render(conversation=conversation, assertions=repr(assertions))
    request = [{"role": "system", "content": templates["nl_judge_system"].render()},
               {"role": "user", "content": prompt}]
    reply = await ctx.chat(judge, request, **judge_args)
    checks = parse_verdicts(reply.content or "")
    if checks is None:
        shown = (reply.content or "")[:200]
        raise CallError("grader_error", f"the judge's reply is not the expected JSON: {shown!r}")
    return checks


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_verdicts(text: str) -> list[dict[str, Any]] | None:
    """The judge's {"results": [...]} as τ²-bench's NLAssertionCheck dicts; None when it does not parse."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start, end = body.find("{"), body.rfind("}")
    try:
        data = json.loads(body[start:end + 1]) if start >= 0 else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("results", []), list):
        return None
    checks = []
    for item in data.get("results", []):
        if not isinstance(item, dict) or not isinstance(item.get("metExpectation"), bool):
            return None
        checks.append({"nl_assertion": item.get("expectedOutcome"), "met": item["metExpectation"],
                       "justification": item.get("reasoning")})
    return checks
