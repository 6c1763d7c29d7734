"""AgentConfig: everything one run of the agent loop fixed at start (built by AgentSuite.prepare)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestra_ops.evals.agent.protocol import Protocol
from orchestra_ops.evals.agent.toolspec import ToolSpec

from orchestra_ops.client.retrieval import RetrievalSettings
from orchestra_ops.runner.templates import Template
from orchestra_ops.sandbox import SandboxPolicy


@dataclass
class AgentConfig:
    protocol: Protocol  # with the --budget overrides applied
    tools: ToolSpec
    templates: dict[str, Template]
    sampling: dict[str, dict[str, Any]]
    orchestrator: str  # the role or model the orchestrator calls go to
    judge: str
    judge_protocol: str  # "toolorchestra" | "cais"
    answer_format: str  # "auto" | "answer" | "boxed"
    aliases: dict[str, str]  # every allowed alias -> the role or model it goes to
    served: dict[str, str]  # role or model name -> served model name (what records call `model`)
    max_rounds: int
    judge_attempts: int
    retrieval: RetrievalSettings
    sandbox: SandboxPolicy
    trajectories: Path  # where per-task trajectory files go
    answer_formats: dict[str, str] = field(default_factory=dict)  # alias -> "answer" | "boxed"
    on_retrieval_error: str = "fail"  # "fail": the task fails as retrieval_unavailable; "continue": no documents
