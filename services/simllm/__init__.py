"""The simulated engine: an OpenAI-compatible vLLM stand-in (`ops serve sim`).

Modules, each small:

    config.py   SimConfig (every option, validated) and the --fail spec parser
    rules.py    what it answers (orchestrator / expert / judge) and whether an answer is right:
                pure functions of the request, documented there; tests import them for exact scores
    rubric_rules.py  the rubric (HealthBench) judge: one deterministic verdict per rubric item
    orchestrator_rules.py  the generic orchestrator: the non-answer tools in turn, then the answer tool
    agent_rules.py  the ToolOrchestra agent roles (orchestrator, query/code writer, answerer, <correct> judge)
    tokens.py   the tokenizer behind /tokenize and /detokenize (tokenize_routes.py serves them)
    faults.py   FaultPlan: error statuses, hangs, malformed judge JSON, jitter; deterministic per seed
    metrics.py  SimMetrics: vLLM's gauges and counters plus sim_max_requests_in_flight, as Prometheus text
    benchmark_rules.py  gsm8k- and mmlu-shaped prompts: each persona's reply (pure; tests import it)
    lora.py     LoRA adapters as vLLM serves them: --lora-modules, the runtime load/unload routes
    prefix_cache.py  PrefixCache: vLLM's prefix-cache accounting (whole 128-token blocks, in tokens)
    wire.py     the shapes of vLLM 0.32's answers: chat completions, model cards, usage, error bodies
    app.py      the aiohttp.web server (health, version, models, chat completions JSON/SSE, metrics) and serve()

Only app.py, lora.py, wire.py and tokenize_routes.py import aiohttp; the CLI imports them inside
`ops serve sim`. tests/integration/test_sim_conformance.py holds the wire to a real vLLM replica.
"""
