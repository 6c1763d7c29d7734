"""Write the bundled synthetic humaneval, bbh, hellaswag, ARC and cmmlu sets and the bbh example files.

    .venv/bin/python scripts/make_oc_synthetic.py
    (rewrites evals/opencompass/data/{humaneval,bbh,hellaswag,ARC,cmmlu} and evals/opencompass/templates/bbh_hints/)
Our own made-up items; gold answers are the sim's truths (services/simllm/opencompass_synthetic.py).
"""

from __future__ import annotations

from pathlib import Path

from orchestra_ops.evals.opencompass import bbh, cmmlu_data
from orchestra_ops.services.simllm import opencompass_synthetic as syn

OPENCOMPASS = Path(__file__).resolve().parent.parent / "evals" / "opencompass"


def main() -> None:
    data = OPENCOMPASS / "data"
    syn.write_humaneval(data / "humaneval" / "human-eval-v2-20210705.jsonl",
                        [syn.humaneval_problem(f"shift_{i}") for i in range(12)])
    syn.write_bbh(data / "bbh", {s: [syn.bbh_example(s, i, s in bbh.MULTIPLE_CHOICE) for i in range(3)]
                                 for s in bbh.SUBSETS})
    hints = OPENCOMPASS / "templates" / "bbh_hints"
    hints.mkdir(parents=True, exist_ok=True)
    for subset in bbh.SUBSETS:
        shots = []
        for i in (101, 102):
            example = syn.bbh_example(subset, i, subset in bbh.MULTIPLE_CHOICE)
            shots.append(f"Q: {example['input']}\nA: Let's think step by step.\nThe made-up rule settles it.  "
                         f"So the answer is {example['target']}.")
        (hints / f"{subset}.txt").write_text(f"A synthetic stand-in for {subset}'s examples.\n\n"
                                             + "\n\n".join(shots), encoding="utf-8")
    syn.write_hellaswag(data / "hellaswag", [f"scene {i}: someone starts a made-up task" for i in range(12)],
                        [f"shot scene {i}: someone demonstrates a made-up task" for i in range(10)])
    syn.write_arc(data / "ARC", [syn.arc_line("ARC-c", f"Synthetic challenge question {i}?") for i in range(10)]
                  + [syn.arc_line("ARC-c", "A synthetic question with three choices (skipped)?", "ABC")],
                  [syn.arc_line("ARC-e", f"Synthetic easy question {i}?", "1234" if i == 0 else "ABCD")
                   for i in range(10)])
    syn.write_cmmlu(data / "cmmlu", {s: [f"关于{name}的合成题目{i}：哪个选项符合规则？" for i in range(2)]
                                     for s, name in cmmlu_data.NAMES.items()})


if __name__ == "__main__":
    main()
