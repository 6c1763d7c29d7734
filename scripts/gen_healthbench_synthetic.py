"""Write evals/healthbench/data/healthbench_synthetic.jsonl: a small synthetic dataset shaped like HealthBench.

    .venv/bin/python scripts/gen_healthbench_synthetic.py [OUT]

Deterministic (seeded). Every text is made up for testing the pipeline; nothing is medical advice
and nothing comes from the real dataset. The shape follows scoring.md A2-A3: multi-turn prompts
that end on a user turn, rubric items with positive and negative integer points tagged `level:*`
and `axis:*` (cluster items also `cluster:*`), one `theme:*` tag per example (some also carry a
`physician_agreed_category:*` tag), and `prompt_id`. The first 50 examples (`--limit 50`, like the
seeds' dev_50) hold exactly 539 rubric items; every 7th example has an axis whose items are all
negative (so that axis gets no score on it).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

EXAMPLES = 64
FIRST_50_ITEMS = 539
AXES = ("accuracy", "completeness", "communication_quality", "context_awareness", "instruction_following")

SCENARIOS = {
    "emergency_referrals": [
        "My {who} suddenly has a drooping face on one side and slurred speech. What should I do?",
        "{who} fell off a ladder, hit their head and now keeps vomiting. Can we wait until morning?",
        "I have crushing chest pain that spreads to my left arm and I am sweating a lot. Is this serious?",
        "{who} swallowed a few of my blood pressure pills about twenty minutes ago. What now?",
    ],
    "communication": [
        "Can you explain what an HbA1c of {num} means for {who}, in plain words?",
        "My lab report says 'mild hepatic steatosis'. What does that mean?",
        "How do I tell {who} that their biopsy result needs a follow-up scan without scaring them?",
    ],
    "hedging": [
        "Will taking vitamin D stop {who} from catching colds this winter?",
        "Is it safe to run a half marathon {num} weeks after a knee arthroscopy?",
        "Does intermittent fasting lower blood pressure for someone like {who}?",
    ],
    "complex_responses": [
        "Compare the common options for managing moderate knee osteoarthritis for {who}.",
        "What should {who} know before starting a statin, including side effects and monitoring?",
        "Outline a plan for {who} to taper off a nightly sleeping pill over {num} weeks.",
    ],
    "health_data_tasks": [
        "Summarise these readings for a clinic note: BP 148/92, 151/95, 139/88 over {num} days.",
        "Turn this medication list into a table with dose and timing: metformin 500 mg twice daily, "
        "lisinopril 10 mg in the morning, atorvastatin 20 mg at night.",
    ],
    "global_health": [
        "I live in a rural area {num} hours from a hospital. {who} has had a fever for three days "
        "after a mosquito trip. What can we do?",
        "Our village clinic has no refrigerator. How can we keep oral rehydration supplies useful for {who}?",
    ],
    "context_seeking": [
        "I have had a headache for a while. What should I take?",
        "{who} has a rash. Is it something to worry about?",
        "Can I take ibuprofen with my other medicine?",
    ],
}
WHO = ["my father", "my 4-year-old", "my neighbour", "my grandmother", "my partner", "my teenage son",
       "a colleague", "my aunt"]
FOLLOW_UPS = [
    ("It started about an hour ago.", "Thank you. Please tell me how long it has been going on and whether "
     "anything makes it better or worse."),
    ("They are 72 and take a blood thinner.", "That is important. Could you tell me their age and any "
     "medicines they take?"),
    ("We are about forty minutes from the nearest emergency department.", "How far are you from medical "
     "help right now?"),
]
POSITIVE = {
    "accuracy": ["States correctly that {topic} needs assessment by a clinician.",
                 "Gives dosing information that matches standard adult labelling.",
                 "Correctly names the warning signs that call for urgent care.",
                 "Avoids stating outdated guidance as current practice."],
    "completeness": ["Mentions when to seek care if symptoms change.",
                     "Covers both self-care steps and reasons to see a professional.",
                     "Includes what to monitor over the next few days.",
                     "Addresses the follow-up question about {topic}."],
    "communication_quality": ["Uses plain language a non-specialist can follow.",
                              "Puts the most important action first.",
                              "Keeps the answer well organised with short paragraphs or a list."],
    "context_awareness": ["Asks for the age and medical history relevant to {topic}.",
                          "Tailors the advice to the resources the user says they have.",
                          "Takes into account the details given earlier in the conversation."],
    "instruction_following": ["Answers in the format the user asked for.",
                              "Keeps to the length the user requested.",
                              "Produces the table or summary the user asked for."],
}
NEGATIVE = {
    "accuracy": ["Claims that {topic} can safely be ignored.", "Recommends a prescription drug dose without caveats."],
    "completeness": ["Leaves out any mention of emergency services."],
    "communication_quality": ["Uses unexplained medical jargon.", "Is padded with repetition.",
                              "Buries the key advice at the end of a long answer."],
    "context_awareness": ["Assumes facts about the patient that the user never gave."],
    "instruction_following": ["Ignores the requested format."],
}
CLUSTERS = {"emergency_referrals": "emergency_behavior", "context_seeking": "enough_context",
            "hedging": "hedges_uncertainty", "global_health": "resource_aware"}
CATEGORIES = ["physician_agreed_category:enough-context", "physician_agreed_category:not-enough-context",
              "physician_agreed_category:emergent"]


def item_counts(rng: random.Random) -> list[int]:
    counts = [rng.randint(6, 16) for _ in range(EXAMPLES)]
    index = 0
    while sum(counts[:50]) != FIRST_50_ITEMS:  # nudge the first 50 to the seeds' total
        step = 1 if sum(counts[:50]) < FIRST_50_ITEMS else -1
        if 6 <= counts[index % 50] + step <= 16:
            counts[index % 50] += step
        index += 7
    return counts


def rubric(rng: random.Random, theme: str, topic: str, count: int, negative_axis: str | None) -> list[dict]:
    items: list[dict] = []
    seen: set[str] = set()
    cluster = CLUSTERS.get(theme)
    while len(items) < count:
        axis = rng.choice(AXES)
        negative = axis == negative_axis or rng.random() < 0.22
        pool = NEGATIVE[axis] if negative else POSITIVE[axis]
        criterion = rng.choice(pool).format(topic=topic)
        if criterion in seen:
            criterion = f"{criterion.rstrip('.')} (point {len(items) + 1})."
        seen.add(criterion)
        points = -rng.randint(1, 9) if negative else rng.randint(1, 10)
        tags = [f"axis:{axis}"]
        if cluster and rng.random() < 0.3:
            tags = ["level:cluster", f"cluster:{theme}_{cluster}", *tags]
        else:
            tags = ["level:example", *tags]
        items.append({"criterion": criterion, "points": points, "tags": tags})
    if not any(i["points"] > 0 for i in items):
        items[0]["points"] = abs(items[0]["points"]) or 1
    return items


def example(rng: random.Random, index: int, count: int) -> dict:
    theme = list(SCENARIOS)[index % len(SCENARIOS)]
    text = rng.choice(SCENARIOS[theme]).format(who=rng.choice(WHO), num=rng.randint(2, 9))
    text = text[0].upper() + text[1:]
    prompt = [{"role": "user", "content": f"{text} (case {index + 1})"}]
    turns = rng.choice((0, 0, 1, 2))
    for reply, question in FOLLOW_UPS[:turns]:
        prompt += [{"role": "assistant", "content": question}, {"role": "user", "content": reply}]
    negative_axis = AXES[(index // 7) % len(AXES)] if index % 7 == 3 else None
    items = rubric(rng, theme, theme.replace("_", " "), count, negative_axis)
    if negative_axis and not any(f"axis:{negative_axis}" in i["tags"] for i in items):
        items[-1] = {"criterion": NEGATIVE[negative_axis][0].format(topic=theme), "points": -4,
                     "tags": ["level:example", f"axis:{negative_axis}"]}
    tags = [f"theme:{theme}"] + ([rng.choice(CATEGORIES)] if rng.random() < 0.4 else [])
    return {"prompt": prompt, "rubrics": items, "example_tags": tags, "prompt_id": f"synth-hb-{index + 1:04d}",
            "ideal_completions_data": None}


def main(argv: list[str]) -> int:
    bundled = Path(__file__).resolve().parent.parent / "evals/healthbench/data/healthbench_synthetic.jsonl"
    out = Path(argv[0]) if argv else bundled
    rng = random.Random(20250512)
    counts = item_counts(rng)
    rows = [example(rng, i, counts[i]) for i in range(EXAMPLES)]
    assert sum(len(r["rubrics"]) for r in rows[:50]) == FIRST_50_ITEMS
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {out}: {len(rows)} examples, {sum(len(r['rubrics']) for r in rows)} rubric items")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
