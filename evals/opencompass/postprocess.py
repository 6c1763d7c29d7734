r"""OpenCompass's answer postprocessors of the humaneval, bbh, hellaswag, ARC and cmmlu `*_gen` configs.

Read from OpenCompass a5acc4bb (written here again, behaviour kept quirk for quirk):

first_option(text)   `first_option_postprocess(text, options='ABCD')`, opencompass/utils/text_postprocessors.py
                     (hellaswag_10shot_gen_e42710, ARC_c_gen_1e0de5, ARC_e_gen_1e0de5). Its pattern list, tried
                     in order on the stripped text with re.DOTALL; the first match whose group 1 (else the whole
                     match) holds an option letter gives the first of A, B, C, D (in that order) found in it.
                     Quirks kept: a missing comma in the source joins the `故选` and
                     `只有选项…是对` patterns into one; the group of `(\s|^)[ABCD][…]` is only the space, so it
                     decides only at the start of the text; `1.\s?(.*?)$` takes the text after any `1` and a
                     character.
cmmlu_answer(text)   `match_answer_pattern` with `(?i)答案\s*:\s*[\W]*([A-D])[\W]*` (cmmlu_0shot_cot_gen_305931):
                     group 1 of the first match, else ''. A full-width colon does not match; `答案: b` gives `b`.
bbh_mcq(text)        `bbh_mcq_postprocess` (opencompass/datasets/bbh.py): the text after the first `answer is `,
                     then the first `(X)`, else the first capital letter, else that text unchanged. Applied to
                     predictions and references (its dataset_postprocessor) in bbh_gen_ee62e9.
bbh_freeform(text)   `bbh_freeform_postprocess` (same file): the text after the last `answer is` (any case, an
                     optional colon), its first line, a final `.` dropped, a `**bold**` part taken, a leading
                     yes/no/true/false capitalised, commas to spaces unless between digits, spaces squeezed.
                     BBHEvaluator applies it to both sides and compares casefolded.
humaneval_v2(text)   `humaneval_postprocess_v2` (opencompass/datasets/humaneval.py): the first fenced block
                     (```lang\n…```) when there is one, left-stripped.
"""

from __future__ import annotations

import re

OPTIONS = "ABCD"
_O = f"[{OPTIONS}]"
_FIRST_OPTION = [
    rf"答案是?\s*({_O})", rf"答案是?\s*：\s*({_O})", rf"答案是?\s*:\s*({_O})", rf"答案选项应?该?是\s*({_O})",
    rf"答案选项应?该?为\s*({_O})", rf"答案应该?是\s*({_O})", rf"答案应该?选\s*({_O})", rf"答案选项为?\s*：\s*({_O})",
    rf"答案选项为?\s+\(?\*?\*?({_O})\*?\*?\)?", rf"答案选项是?\s*:\s*({_O})", rf"答案为\s*({_O})", rf"答案选\s*({_O})",
    rf"选择?\s*({_O})",
    rf"故选?\s*({_O})" rf"只有选?项?\s?({_O})\s?是?对",  # joined in the source (no comma between them)
    rf"只有选?项?\s?({_O})\s?是?错", rf"只有选?项?\s?({_O})\s?不?正确", rf"只有选?项?\s?({_O})\s?错误",
    rf"说法不?对选?项?的?是\s?({_O})", rf"说法不?正确选?项?的?是\s?({_O})", rf"说法错误选?项?的?是\s?({_O})",
    rf"({_O})\s?是正确的", rf"({_O})\s?是正确答案", rf"选项\s?({_O})\s?正确", rf"所以答\s?({_O})",
    rf"所以\s?({_O}[.。$]?$)", rf"所有\s?({_O}[.。$]?$)", rf"[\s，：:,]({_O})[。，,\.]?$",
    rf"[\s，,：:][故即]({_O})[。\.]?$", rf"[\s，,：:]因此({_O})[。\.]?$", rf"[是为。]\s?({_O})[。\.]?$",
    rf"因此\s?({_O})[。\.]?$", rf"显然\s?({_O})[。\.]?$", r"答案是\s?(\S+)(?:。|$)", r"答案应该是\s?(\S+)(?:。|$)",
    r"答案为\s?(\S+)(?:。|$)", rf"(?i)ANSWER\s*:\s*({_O})", rf"[Tt]he answer is:?\s+\(?({_O})\)?",
    rf"[Tt]he answer is:?\s+\(?\*?\*?({_O})\*?\*?\)?", rf"[Tt]he answer is option:?\s+\(?({_O})\)?",
    rf"[Tt]he correct answer is:?\s+\(?({_O})\)?", rf"[Tt]he correct answer is option:?\s+\(?({_O})\)?",
    rf"[Tt]he correct answer is:?.*?boxed{{({_O})}}", rf"[Tt]he correct option is:?.*?boxed{{({_O})}}",
    rf"[Tt]he correct answer option is:?.*?boxed{{({_O})}}", rf"[Tt]he answer to the question is:?\s+\(?({_O})\)?",
    rf"^选项\s?({_O})", rf"^({_O})\s?选?项", rf"(\s|^){_O}[\s。，,：:\.$]", r"1.\s?(.*?)$",
    rf"1.\s?({_O})[.。$]?$",
    rf"({_O}):", rf"({_O})",  # the cushion patterns
]
FIRST_OPTION_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.DOTALL) for p in _FIRST_OPTION)
CMMLU_ANSWER = re.compile(r"(?i)答案\s*:\s*[\W]*([A-D])[\W]*")
FENCED = re.compile(r"```\w*\n(.*?)```", re.DOTALL)


def first_option(text: str) -> str:
    stripped = text.strip()
    for pattern in FIRST_OPTION_PATTERNS:
        match = pattern.search(stripped)
        if match is None:
            continue
        found = match.group(1) if match.group(1) else match.group(0)
        for letter in OPTIONS:
            if letter in found:
                return letter
    return ""


def cmmlu_answer(text: str) -> str:
    match = CMMLU_ANSWER.search(text)
    return match.group(1) if match else ""


def bbh_mcq(text: str) -> str:
    answer = text
    parts = answer.split("answer is ")
    if len(parts) != 1:
        answer = parts[1].strip()
    match = re.search(r"\(([A-Z])\)*", answer) or re.search(r"([A-Z])", answer)
    return match.group(1) if match else answer


def bbh_freeform(text: str) -> str:
    answer = text
    parts = re.split(r"answer is\s*:?\s*", answer, flags=re.IGNORECASE)
    if len(parts) != 1:
        answer = parts[-1].strip()
    answer = answer.split("\n")[0].strip()
    if answer.endswith("."):
        answer = answer[:-1].strip()
    bold = re.search(r"\*\*(.*?)\*\*", answer)
    if bold:
        answer = bold.group(1).strip()
    for words in (r"^(yes|no)\b", r"^(true|false)\b"):
        match = re.match(words, answer, flags=re.IGNORECASE)
        if match:
            return match.group(1).capitalize()
    if not re.search(r"\d\s*,\s*\d", answer):
        answer = re.sub(r"\s*,\s*", " ", answer)
    return re.sub(r"\s+", " ", answer).strip()


def humaneval_v2(text: str) -> str:
    blocks = FENCED.findall(text)
    return (blocks[0] if blocks else text).lstrip()
