"""The ToolOrchestra agent family: the `hle` and `frames` suites and the orchestrator agent loop they share.

    hle.py       the hle suite (HLE's questions, the CAIS judge; the bundled data/hle_synthetic.jsonl)
    frames.py    the frames suite (FRAMES's questions; the bundled data/frames_synthetic.jsonl)

    protocol.py  what differs between HLE and FRAMES, budgets, sampling, tool roles, invalid-call codes
    toolspec.py  the tool definitions (a data file) and the validation of a tool call
    context.py   the orchestrator's and the experts' context under token budgets
    grading.py   answer extraction, exact match, the <correct> judge and the CAIS HLE judge
    tools.py     search, enhance_reasoning and answer: one expert call each (+ retrieval, exec, judge)
    loop.py      one task: rounds of orchestrator call -> first valid tool call -> context
    records.py   the compact results line and the per-task trajectory file (written atomically)
    scoring.py   scores.json: accuracy, errors by type, rounds, tools, aliases; CAIS metrics
    suite.py     the suite class both suites derive from (options, routing, load, score)
    export.py    `ops export --format toolorchestra`: ToolOrchestra's per-task files
    templates/   the prompts (agent_* shared, hle_*, frames_*); data/ the bundled sets and the demo's corpus

The reference is ../shared/reference/toolorchestra-protocol.md (sections cited as §n).
"""
