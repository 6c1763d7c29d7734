"""τ²-bench (`ops eval tau2`): our own implementation of its loop, domains and reward.

    tasks.py        the user's data dir: tasks.json, db.json|toml, policy, splits; task validation
    domain.py       tools (read/write/think/generic), toolkits, Env (DBs, tool calls, hashes)
    synthetic.py    the bundled synthetic domain (a fitness club; data in evals/tau2/data/)
    mock.py         τ²-bench's mock domain, our implementation
    environment.py  the domain registry and a fresh env with a task's initial state
    loop.py         one simulation: greeting, user/agent/env hops, stop tokens, step and error limits
    reward.py       the reward exactly as τ²-bench computes it (DB replay, assertions, actions, ...)
    metrics.py      scores.json: avg reward, pass^k, terminations, infra errors
    suite.py        the suite (options, routing, units per (task, trial), trajectories)
    nl_judge.py     the NL-assertion judge: its request and its verdicts parsed (reference §1.8 item 5)
    export.py       `ops export --format tau2`: τ²-bench's results file
    templates/      the agent, user-simulator and NL-judge prompts; data/ the bundled domains

The reference is ../shared/reference/tau2-protocol.md (sections cited as §n).
"""
