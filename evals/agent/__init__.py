"""The ToolOrchestra orchestrator agent loop, shared by the `hle` and `frames` suites.

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

The reference is ../shared/reference/toolorchestra-protocol.md (sections cited as §n).
"""
