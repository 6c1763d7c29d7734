"""The simulated engine: an OpenAI-compatible vLLM stand-in (`ops serve sim`).

Modules, each small:

    config.py   SimConfig (every option, validated) and the --fail spec parser
    rules.py    which part the sim plays for a request (judge / orchestrator / a suite's persona / expert):
                pure functions of the request, documented there; tests import them for exact scores
    replies.py  what every part builds on: the Reply, the answer tokens and which are right, message
                texts, token estimates, the cut at the completion budget
    orchestrator_rules.py  the generic orchestrator: the non-answer tools in turn, then the answer tool
    The parts each suite needs, named after it:
    agent_rules.py  hle, frames: the ToolOrchestra agent roles (orchestrator, query/code writer, answerer,
                    <correct> judge)
    tau2_rules.py   tau2: the agent, the user simulator and the NL judge
    healthbench_rules.py  healthbench: the rubric judge, one deterministic verdict per rubric item
    opencompass_rules.py  gsm8k and mmlu prompts: each persona's reply (personas.py: a persona's skill);
                    opencompass_more_rules.py the other five; opencompass_synthetic.py their bundled sets
    tokens.py   the tokenizer behind /tokenize and /detokenize (tokenize_routes.py serves them)
    faults.py   FaultPlan: error statuses, hangs, malformed judge JSON, jitter; deterministic per seed
    metrics.py  SimMetrics: vLLM's gauges and counters plus sim_max_requests_in_flight, as Prometheus text
    lora.py     LoRA adapters as vLLM serves them: --lora-modules, the runtime load/unload routes
    prefix_cache.py  PrefixCache: vLLM's prefix-cache accounting (whole 128-token blocks, in tokens)
    wire.py     the shapes of vLLM 0.32's answers: chat completions, model cards, usage, error bodies
    app.py      the aiohttp.web server (health, version, models, chat completions JSON/SSE, metrics) and serve()
    chat_stream.py  ChatAnswer (one chat request's answer) and its SSE stream as vLLM sends it

Only app.py, chat_stream.py, lora.py, wire.py and tokenize_routes.py import aiohttp; the CLI imports them inside
`ops serve sim`. tests/integration/test_sim_conformance.py holds the wire to a real vLLM replica.
"""
