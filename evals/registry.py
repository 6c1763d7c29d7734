"""Suites by name, imported only when asked for (`ops eval hle` never imports the chat suite)."""

from __future__ import annotations

import importlib

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.suite import Suite

# suite name -> "module:factory" under orchestra_ops.evals; a later suite adds one line here
SUITES: dict[str, str] = {
    "chat": "chat.suite:ChatSuite",
    "gsm8k": "opencompass.gsm8k:Gsm8kSuite",
    "mmlu": "opencompass.mmlu:MmluSuite",
    "humaneval": "opencompass.humaneval:HumanEvalSuite",
    "bbh": "opencompass.bbh:BbhSuite",
    "hellaswag": "opencompass.hellaswag:HellaswagSuite",
    "arc": "opencompass.arc:ArcSuite",
    "cmmlu": "opencompass.cmmlu:CmmluSuite",
    "opencompass": "opencompass.multi:OpenCompassMultiSuite",  # several opencompass.* suites in one run
    "healthbench": "healthbench.suite:HealthBenchSuite",
    "hle": "agent.hle:HleSuite",
    "frames": "agent.frames:FramesSuite",
    "tau2": "tau2.suite:Tau2Suite",
}


def load_suite(name: str) -> Suite:
    if name not in SUITES:
        raise ConfigError(f"unknown suite '{name}'; suites: {', '.join(sorted(SUITES))}")
    module_name, attr = SUITES[name].split(":")
    module = importlib.import_module(f"orchestra_ops.evals.{module_name}")
    suite: Suite = getattr(module, attr)()
    return suite
