"""The eval suites, one package per suite or family, each with its prompt templates (`templates/`) and bundled
synthetic data (`data/`) beside its code, all registered by name in registry.py (imported only when asked for):

    chat/          chat: one call per sample to the model under test
    agent/         hle, frames: the ToolOrchestra orchestrator agent loop with its experts and retrieval
    tau2/          tau2: τ²-bench's agent / user-simulator / environment loop and reward, its domains
    healthbench/   healthbench: a candidate response, then one judge call per rubric item
    opencompass/   gsm8k, mmlu, humaneval, bbh, hellaswag, arc, cmmlu, and `opencompass` (several in one run)

This folder is `evals/` at the top of the repository but installs as `orchestra_ops.evals` (setuptools
`package-dir` in pyproject.toml): no generic `evals` module lands in site-packages, and code imports it as
`orchestra_ops.evals…`. The same holds for `services/` (`orchestra_ops.services`: the simulated engine and
the retrieval server). A suite sees the fleet only through its task context (orchestra_ops/runner/suite.py:
routed, bounded, retried and profiled by the engine), and the simulated engine plays each suite's parts with
rules named after it (services/simllm/<suite>_rules.py).
"""
