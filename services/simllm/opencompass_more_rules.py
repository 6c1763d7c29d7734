r"""What the simulated engine answers to humaneval-, bbh-, hellaswag-, ARC- and cmmlu-shaped prompts.

The persona scheme of opencompass_rules.py, extended (pure functions; tests import them): the persona is the
request's ``model``; ``skill(model)`` and ``h`` are personas.py's; a persona is right on ``q`` iff
``h(f"right|{dataset}|{model}|{q}") % 100 < skill(model)`` and writes its answer in
``style = h(f"style|{dataset}|{model}|{q}") % 10``. The prompt is the text of the last ``user`` message.

Recognising it (checked before gsm8k/mmlu, which never look like these):

* **bbh** it ends ``A: Let's think step by step.`` after a ``Q: `` line; ``q`` is the text between the last
  ``Q: `` and that line. Truth: with option lines ``(A) …`` in ``q`` the letter ``options[h("bbh|"+q) % n]``;
  else, by what ``q`` asks, ``Yes``/``No``, ``True``/``False``, ``valid``/``invalid`` (``[..][h % 2]``), else
  the number ``2 + h % 98``. A wrong answer is the next option ``1 + h(miss) % (n-1)`` places on, the other
  word, or the number ``+ 1 + h(miss) % 9``.
  Multiple choice: 0-5 ``… So the answer is (X).``; 6 ``So the answer is X.``; 7 ``(x)`` in lower case (read as
  ``(x).``: wrong); 8 no ``answer is``: ``(Y)`` mentioned first (the next letter), then ``(X)`` (read as Y);
  9 ``I cannot tell which option fits.`` (read as ``I``).
  Free form: 0-5 ``So the answer is V.``; 6 ``**V**``; 7 ``The answer is: v`` in lower case (read as V); 8 the
  answer, then a line ``On second thought, the answer is W.`` (W the wrong answer: the last one counts);
  9 no ``answer is`` at all.
* **humaneval** a ``def NAME(`` line and the text ends with ``\"\"\"``; ``q`` is the last such NAME. Truth:
  ``K = 2 + h("humaneval|"+q) % 97``, the function returns ``x + K``; a wrong persona returns
  ``x + K + 1 + h(miss) % 9``. Styles: 0-5 a fenced ```python block with the whole function; 6 the whole
  function unfenced; 7 only the body, indented (left-stripped it is a `return` outside a function); 8 a
  fenced usage example first, then the function fenced (the first block is taken: the stub stays empty);
  9 a sentence, then the function unfenced (a syntax error). Names that ask for trouble, whatever the
  persona: ``hang_*`` loops forever, ``flood_*`` writes to fd 1 without end, ``escape_file_*`` writes the
  file named on a ``Marker: PATH`` docstring line and ``escape_net_*`` connects to the ``Port: N`` line's
  port on 127.0.0.1 before returning the right value, ``exit_*`` calls ``os._exit(0)``.
* **hellaswag** an option block ``A) `` … ``D) `` followed by one last line ending ``?``; ``q`` the lines above
  the block. **arc** the text starts ``Question:``, then ``A. `` … ``D. `` lines and ``Answer:`` ends it; ``q``
  the text between. **cmmlu** an option block ``A) `` … ``D) `` that ends the text and ``答案`` in it; ``q`` the
  nearest line above the block. Truth ``"ABCD"[h(f"{dataset}|{q}") % 4]``; a wrong letter is
  ``1 + h(miss) % 3`` places on. hellaswag and arc: 0-6 ``X``; 7-8 ``The answer is X.``; 9 ``(x)`` (no option
  found). cmmlu: 0-5 ``…\n答案: X``; 6 ``答案：X`` (full-width colon, not matched); 7 ``答案: **X**``; 8
  ``答案: x`` (lower case: wrong); 9 no answer line.
"""

from __future__ import annotations

import re

from orchestra_ops.services.simllm.personas import LETTERS, h, skill

HUMANEVAL = "benchmark_humaneval"
BBH = "benchmark_bbh"
HELLASWAG = "benchmark_hellaswag"
ARC = "benchmark_arc"
CMMLU = "benchmark_cmmlu"
ROLES = (HUMANEVAL, BBH, HELLASWAG, ARC, CMMLU)
COT = "A: Let's think step by step."
DEF = re.compile(r"^def (\w+)\(.*$", re.MULTILINE)
_REASONING = "Let me work through the question one step at a time and check each part."


def is_right(dataset: str, model: str, question: str) -> bool:
    return h(f"right|{dataset}|{model}|{question}") % 100 < skill(model)


def style(dataset: str, model: str, question: str) -> int:
    return h(f"style|{dataset}|{model}|{question}") % 10


def _block(lines: list[str], delim: str) -> int | None:
    found = None
    for index in range(len(lines) - 3):
        if all(lines[index + k].startswith(f"{LETTERS[k]}{delim} ") for k in range(4)):
            found = index
    return found


def kind(text: str) -> str | None:
    stripped = text.rstrip()
    if stripped.endswith(COT) and "Q: " in stripped:
        return BBH
    if DEF.search(text) and stripped.endswith('"""'):
        return HUMANEVAL
    lines = stripped.splitlines()
    paren = _block(lines, ")")
    if paren is not None and paren + 5 == len(lines) and lines[-1].rstrip().endswith("?"):
        return HELLASWAG
    if paren is not None and paren + 4 == len(lines) and "答案" in text:
        return CMMLU
    dot = _block(lines, ".")
    if dot is not None and dot + 5 == len(lines) and stripped.startswith("Question:") and stripped.endswith("Answer:"):
        return ARC
    return None


def question(role: str, text: str) -> str:
    """The `q` of a prompt of kind `role`."""
    stripped = text.rstrip()
    lines = stripped.splitlines()
    if role == BBH:
        return stripped.rsplit("Q: ", 1)[-1].removesuffix(COT).strip()
    if role == HUMANEVAL:
        return DEF.findall(text)[-1]
    if role == HELLASWAG:
        return "\n".join(lines[: _block(lines, ")")]).strip()
    if role == ARC:
        return "\n".join(lines[: _block(lines, ".")]).removeprefix("Question:").strip()
    above = [line.strip() for line in lines[: _block(lines, ")")] if line.strip()]
    return above[-1] if above else ""


# ---- bbh ----------------------------------------------------------------------------------------------

def bbh_options(q: str) -> list[str]:
    return re.findall(r"^\(([A-Z])\) ", q, re.MULTILINE)


def bbh_truth(q: str) -> str:
    options, lowered, value = bbh_options(q), q.lower(), h("bbh|" + q)
    if options:
        return options[value % len(options)]
    for pair in (("Yes", "No"), ("True", "False"), ("valid", "invalid")):
        if f"{pair[0].lower()} or {pair[1].lower()}" in lowered:
            return pair[value % 2]
    return str(2 + value % 98)


def bbh_answer(model: str, q: str) -> str:
    truth = bbh_truth(q)
    if is_right("bbh", model, q):
        return truth
    miss, options = h(f"miss|{model}|{q}"), bbh_options(q)
    if options:
        return options[(options.index(truth) + 1 + miss % (len(options) - 1)) % len(options)]
    for pair in (("Yes", "No"), ("True", "False"), ("valid", "invalid")):
        if truth in pair:
            return pair[1 - pair.index(truth)]
    return str(int(truth) + 1 + miss % 9)


def bbh_reply(model: str, q: str) -> str:
    answer, kind_, options = bbh_answer(model, q), style("bbh", model, q), bbh_options(q)
    if options:
        if kind_ == 6:
            return f"{_REASONING}\nSo the answer is {answer}."
        if kind_ == 7:
            return f"{_REASONING}\nSo the answer is ({answer.lower()})."
        if kind_ == 8:
            other = options[(options.index(answer) + 1) % len(options)]
            return f"Comparing ({other}) with the rest first.\n{_REASONING}\nI will go with ({answer})."
        if kind_ == 9:
            return "I cannot tell which option fits."
        return f"{_REASONING}\nSo the answer is ({answer})."
    if kind_ == 6:
        return f"{_REASONING}\nSo the answer is **{answer}**."
    if kind_ == 7:
        return f"{_REASONING}\nThe answer is: {answer.lower()}"
    if kind_ == 8:
        other = _other(answer)
        return f"{_REASONING}\nSo the answer is {answer}.\nOn second thought, the answer is {other}."
    if kind_ == 9:
        return "I could not settle on a reply to this one."
    return f"{_REASONING}\nSo the answer is {answer}."


def _other(answer: str) -> str:
    for pair in (("Yes", "No"), ("True", "False"), ("valid", "invalid")):
        if answer in pair:
            return pair[1 - pair.index(answer)]
    return str(int(answer) + 1)


# ---- humaneval ---------------------------------------------------------------------------------------

def humaneval_shift(name: str) -> int:
    return 2 + h("humaneval|" + name) % 97


def humaneval_value(model: str, name: str) -> int:
    shift = humaneval_shift(name)
    return shift if is_right("humaneval", model, name) else shift + 1 + h(f"miss|{model}|{name}") % 9


def _special_body(name: str, text: str) -> str | None:
    shift = humaneval_shift(name)
    if name.startswith("hang_"):
        return "    while True:\n        pass\n"
    if name.startswith("flood_"):
        return "    import os\n    while True:\n        os.write(1, b'x' * 65536)\n"
    if name.startswith("exit_"):
        return "    import os\n    os._exit(0)\n"
    if name.startswith("escape_file_"):
        found = re.search(r"Marker: (\S+)", text)
        path = found.group(1) if found else "/tmp/escaped"
        return f"    with open({path!r}, 'w') as handle:\n        handle.write('escaped')\n    return x + {shift}\n"
    if name.startswith("escape_net_"):
        found = re.search(r"Port: (\d+)", text)
        port = int(found.group(1)) if found else 80
        return (f"    import socket\n    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
                f"    return x + {shift}\n")
    return None


def humaneval_reply(model: str, text: str) -> str:
    name = question(HUMANEVAL, text)
    signature = [line for line in text.splitlines() if line.startswith(f"def {name}(")][-1]
    special = _special_body(name, text)
    if special is not None:
        return f"```python\n{signature}\n{special}```"
    body = f"    return x + {humaneval_value(model, name)}\n"
    function = f"{signature}\n{body}"
    kind_ = style("humaneval", model, name)
    if kind_ == 6:
        return function
    if kind_ == 7:
        return body
    if kind_ == 8:
        return f"```python\nprint({name}(1))\n```\nThe function:\n```python\n{function}```"
    if kind_ == 9:
        return f"Here is the function.\n{function}"
    return f"```python\n{function}```"


# ---- hellaswag, arc, cmmlu -----------------------------------------------------------------------------

def choice_truth(dataset: str, q: str) -> str:
    return LETTERS[h(f"{dataset}|{q}") % 4]


def choice_letter(dataset: str, model: str, q: str) -> str:
    truth = choice_truth(dataset, q)
    if is_right(dataset, model, q):
        return truth
    return LETTERS[(LETTERS.index(truth) + 1 + h(f"miss|{model}|{q}") % 3) % 4]


def choice_reply(dataset: str, model: str, q: str) -> str:
    letter, kind_ = choice_letter(dataset, model, q), style(dataset, model, q)
    if dataset == "cmmlu":
        forms = {6: f"答案：{letter}", 7: f"答案: **{letter}**", 8: f"答案: {letter.lower()}"}
        answer = forms.get(kind_, f"答案: {letter}")
        return "我无法在这些选项中做出判断。" if kind_ == 9 else f"先逐项分析各个选项。\n{answer}"
    if kind_ <= 6:
        return letter
    if kind_ <= 8:
        return f"The answer is {letter}."
    return f"({letter.lower()})"


DATASET_OF = {HELLASWAG: "hellaswag", ARC: "arc", CMMLU: "cmmlu"}


def answer_text(role: str, model: str, text: str) -> str:
    """The reply of persona `model` to a prompt of kind `role` (one of ROLES)."""
    if role == BBH:
        return bbh_reply(model, question(BBH, text))
    if role == HUMANEVAL:
        return humaneval_reply(model, text)
    return choice_reply(DATASET_OF[role], model, question(role, text))
