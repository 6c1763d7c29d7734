r"""The sim's parts in the ToolOrchestra agent protocol (`ops eval hle|frames`): pure, documented rules.

Tests import these to know the exact accuracy of a dataset. Terms: *text* is the last user
message's text; a *paragraph* is text between blank lines; the *instruction* is the last line of
the last paragraph when it mentions ``<query>``, ```` ```python ```` or ``<answer>``. ``T(q)`` is
``replies.answer_token(q)`` and ``digest(q)`` the sha256 hex of q with whitespace collapsed.

*Question key* ``q`` (all roles agree on it when the question has no blank line):

- orchestrator: the text after the first ``Problem:`` up to the first blank line;
- experts: the last paragraph without the instruction line and without a leading ``Problem:`` or
  ``Question:`` label.

*Roles* (checked by ``rules.classify`` after the HLE and rubric judges):

1. **correct judge**: a message mentions ``<correct>``. The graded answer is the text after the last
   ``Student answer:`` (up to ``Reference answer:``); the reply is ``<correct>True</correct>`` iff it
   holds a sim token ``X`` with ``replies.token_is_right(X)``, else ``<correct>False</correct>``
   (``--malformed-rate`` cuts the reply before its closing tag).
2. **orchestrator** (agent): ``tools`` are given (``tool_choice`` not ``"none"``) and every tool's
   only required parameter is ``model``. With ``R = replies.orchestrator_rounds(q)`` (1..3) its
   *plan* is R tool names: all ``enhance_reasoning`` except one ``search`` at index
   ``int(digest[14:16], 16) % R`` when ``uses_search(q)`` (``int(digest[16:18], 16) % 3 != 0``).
   *Progress* ``p`` = the number of ```` ```output ```` blocks in the text plus 1 when a line starts
   with ``Doc <n>:`` (documents are present). While ``p < R`` it calls ``plan[p]`` (the ``answer``
   tool when that tool is not offered), then ``answer``. The ``model`` argument is the tool's
   alias number ``(int(digest[18:20], 16) + p) % n`` of its n aliases (the ``model`` parameter's
   ``enum``, else the ``word-<digit>`` names its description lists, in order).
   A question holding ``[sim:invalid=KIND]`` makes every round invalid instead: ``none`` (text,
   no tool call), ``unknown_tool`` (a call of ``browse``), ``bad_arguments`` (arguments that are
   not JSON), ``missing_model`` (``{}``), ``unknown_alias`` (``{"model": "<tool>-99"}``);
   ``[sim:invalid=KIND+valid]`` sends that invalid call and then the planned valid one.
3. **query writer**: the instruction mentions ``<query>``; reply ``… <query>q</query>``.
4. **code writer**: the instruction mentions ```` ```python ````; reply a fenced program that prints
   ``code_output(q)`` = ``"intermediate: S\n"`` with ``S = a*a + b*b + c*c`` for
   ``a, b, c = int(digest[20:22], 16), int(digest[22:24], 16), int(digest[24:26], 16)``.
   ``[sim:code=loop]`` in q: a program that loops forever and prints nothing.
5. **answerer**: the instruction mentions ``<answer>`` (reply ``<think>…</think><answer>T(q)</answer>``),
   or a system message mentions ``\boxed`` and the last paragraph starts with ``Problem:``
   (reply ``… \boxed{T(q)}``).

Tokenizer (``/tokenize``, ``/detokenize``): see ``tokens.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from orchestra_ops.services.simllm import orchestrator_rules, replies

AGENT_ORCHESTRATOR = "agent_orchestrator"
QUERY_WRITER = "query_writer"
CODE_WRITER = "code_writer"
ANSWERER = "answerer"
ANSWERER_BOXED = "answerer_boxed"
CORRECT_JUDGE = "correct_judge"
ROLES = frozenset({AGENT_ORCHESTRATOR, QUERY_WRITER, CODE_WRITER, ANSWERER, ANSWERER_BOXED, CORRECT_JUDGE})

INVALID_RE = re.compile(r"\[sim:invalid=(none|unknown_tool|bad_arguments|missing_model|unknown_alias)(\+valid)?\]")
DOC_LINE_RE = re.compile(r"(?m)^Doc \d+:")
ALIAS_RE = re.compile(r"\b([a-z]+(?:-[a-z]+)*-\d+)\b")
_LABELS = ("Problem:", "Question:")


def _digest(text: str) -> str:
    return replies._digest(text)


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return replies.message_text(message)
    return ""


def _system_text(messages: list[Any]) -> str:
    return "\n".join(replies.message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "system")


def _last_paragraph(text: str) -> str:
    return text.rstrip().rsplit("\n\n", 1)[-1].strip("\n")


def instruction(text: str) -> str:
    """The instruction line of an expert prompt ('' when its last line is not one)."""
    last = _last_paragraph(text).rsplit("\n", 1)[-1]
    return last if any(mark in last for mark in ("<query>", "```python", "<answer>")) else ""


def expert_question(text: str) -> str:
    """The question key of an expert prompt (see the module docstring)."""
    paragraph = _last_paragraph(text)
    if instruction(text):
        paragraph = paragraph.rsplit("\n", 1)[0] if "\n" in paragraph else ""
    paragraph = paragraph.strip()
    for label in _LABELS:
        if paragraph.startswith(label):
            return paragraph[len(label):].strip()
    return paragraph


def orchestrator_question(text: str) -> str:
    """The question key of an orchestrator prompt: after the first 'Problem:', up to a blank line."""
    _, found, rest = text.partition("Problem:")
    return (rest if found else text).strip().split("\n\n", 1)[0].strip()


def _model_param(tool: Any) -> dict[str, Any] | None:
    function = tool.get("function") if isinstance(tool, dict) else None
    params = function.get("parameters") if isinstance(function, dict) else None
    if not isinstance(params, dict) or params.get("required") != ["model"]:
        return None
    props = params.get("properties")
    model = props.get("model") if isinstance(props, dict) else None
    return model if isinstance(model, dict) else None


def is_agent_tools(tools: Any) -> bool:
    return isinstance(tools, list) and bool(tools) and all(_model_param(t) is not None for t in tools)


def aliases_of(tool: Any) -> list[str]:
    """A tool's aliases: its `model` enum, else the `word-<digit>` names in its description, in order."""
    param = _model_param(tool) or {}
    enum = param.get("enum")
    if isinstance(enum, list) and enum:
        return [str(a) for a in enum]
    found: list[str] = []
    for alias in ALIAS_RE.findall(str(param.get("description", ""))):
        if alias not in found:
            found.append(alias)
    return found


def classify(body: dict[str, Any], texts: list[str]) -> str | None:
    """The agent role of a request, or None when it is none of them."""
    messages = body.get("messages") or []
    if any("<correct>" in text for text in texts):
        return CORRECT_JUDGE
    if body.get("tools") and body.get("tool_choice") != "none":
        return AGENT_ORCHESTRATOR if is_agent_tools(body.get("tools")) else None
    text = _last_user_text(messages)
    line = instruction(text)
    if "<query>" in line:
        return QUERY_WRITER
    if "```python" in line:
        return CODE_WRITER
    if "<answer>" in line:
        return ANSWERER
    if "\\boxed" in _system_text(messages) and _last_paragraph(text).startswith("Problem:"):
        return ANSWERER_BOXED
    return None


def uses_search(question: str) -> bool:
    return int(_digest(question)[16:18], 16) % 3 != 0


def plan(question: str) -> list[str]:
    """The non-answer tools the orchestrator calls for this question, in order."""
    rounds = replies.orchestrator_rounds(question)
    steps = ["enhance_reasoning"] * rounds
    if uses_search(question):
        steps[int(_digest(question)[14:16], 16) % rounds] = "search"
    return steps


def progress(text: str) -> int:
    """How far the task is: code outputs in the context, plus 1 when documents are present."""
    return text.count("```output") + (1 if DOC_LINE_RE.search(text) else 0)


def code_output(question: str) -> str:
    """What the code writer's program prints for this question."""
    digest = _digest(question)
    a, b, c = (int(digest[i:i + 2], 16) for i in (20, 22, 24))
    return f"intermediate: {a * a + b * b + c * c}\n"


def _call(name: str, arguments: Any) -> dict[str, str]:
    return {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}


def _orchestrate(body: dict[str, Any], messages: list[Any]) -> replies.Reply:
    tools = {orchestrator_rules.tool_name(t): t for t in body.get("tools") or []}
    text = _last_user_text(messages)
    question = orchestrator_question(text)
    digest = _digest(question)
    step = progress(text)
    steps = plan(question)
    name = steps[step] if step < len(steps) else "answer"
    if name not in tools:
        name = "answer" if "answer" in tools else next(iter(tools))
    aliases = aliases_of(tools[name]) or [f"{name}-1"]
    valid = _call(name, {"model": aliases[(int(digest[18:20], 16) + step) % len(aliases)]})
    marker = INVALID_RE.search(question)
    if marker is None:
        return replies.Reply(AGENT_ORCHESTRATOR, None, [valid])
    kind, then_valid = marker.group(1), bool(marker.group(2))
    if kind == "none":
        return replies.Reply(AGENT_ORCHESTRATOR, "I will think about which tool to use.")
    invalid = {"unknown_tool": _call("browse", {"model": "search-1"}),
               "bad_arguments": _call(name, "{not json"),
               "missing_model": _call(name, {}),
               "unknown_alias": _call(name, {"model": f"{name}-99"})}[kind]
    return replies.Reply(AGENT_ORCHESTRATOR, None, [invalid, valid] if then_valid else [invalid])


def _code(question: str) -> str:
    if "[sim:code=loop]" in question:
        return "while True:\n    pass\n"
    digest = _digest(question)
    a, b, c = (int(digest[i:i + 2], 16) for i in (20, 22, 24))
    return f"values = [{a}, {b}, {c}]\nprint(\"intermediate:\", sum(v * v for v in values))\n"


def correct_verdict(text: str) -> bool:
    """The correct judge's verdict on a prompt (see the module docstring)."""
    graded = text.rsplit("Student answer:", 1)[-1].split("Reference answer:", 1)[0]
    found = replies.TOKEN_RE.findall(graded)
    return bool(found) and replies.token_is_right(found[0])


def respond(role: str, body: dict[str, Any]) -> replies.Reply:
    messages = body.get("messages") or []
    if role == AGENT_ORCHESTRATOR:
        return _orchestrate(body, messages)
    if role == CORRECT_JUDGE:
        prompt = "\n".join(replies.message_text(m) for m in messages)
        verdict = "True" if correct_verdict(prompt) else "False"
        return replies.Reply(role, f"Comparing the two answers.\n<correct>{verdict}</correct>", judge=True)
    question = expert_question(_last_user_text(messages))
    if role == QUERY_WRITER:
        return replies.Reply(role, f"The missing piece is a fact about the question.\n<query>{question}</query>")
    if role == CODE_WRITER:
        return replies.Reply(role, f"This program computes an intermediate value.\n```python\n{_code(question)}```")
    token = replies.answer_token(question)
    if role == ANSWERER:
        return replies.Reply(role, f"<think>I combine the context with the question.</think>\n<answer>{token}</answer>")
    return replies.Reply(role, f"Reasoning step by step over the context.\nThe final answer is \\boxed{{{token}}}.")
