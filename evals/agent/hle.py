"""The `hle` suite: Humanity's Last Exam through the ToolOrchestra orchestrator agent loop.

Dataset lines are HLE's (`id`, `question`, `answer`, `image`, …; the bundled file is synthetic,
never the real HLE: pass `--dataset`). Lines with an image are left out unless `--include-images`
(the reference's set is text-only) and counted in the summary. Grading is ToolOrchestra's (exact
match, then the `<correct>` judge) or, with `--judge-protocol cais`, the official HLE judge with
accuracy, its 95% half-width and calibration error. See evals/agent/ for the loop.
"""

from __future__ import annotations

from orchestra_ops.evals.agent.protocol import HLE
from orchestra_ops.evals.agent.suite import TEMPLATE_FIELDS, AgentSuite, agent_options, packaged_templates
from orchestra_ops.evals.bundled import packaged

from orchestra_ops.runner.suite import SuiteOption


class HleSuite(AgentSuite):
    """Humanity's Last Exam with the orchestrator agent loop (search, enhance_reasoning, answer)."""

    name = "hle"
    dataset_example = '{"id": "h1", "question": "How many sides has a hexagon? Give the number only.", "answer": "6"}'
    protocol = HLE
    default_dataset = packaged("agent/data/hle_synthetic.jsonl")
    options = (*agent_options(HLE),
               SuiteOption("include_images", "--include-images", "flag",
                           "Keep questions that carry an image (their text alone is sent, as the original)."))
    template_files = packaged_templates({"orchestrator": "agent/templates/hle_orchestrator.txt",
                                         "query_writer": "agent/templates/hle_query_writer.txt",
                                         "answerer": "agent/templates/hle_answerer.txt",
                                         "cais_judge": "agent/templates/hle_cais_judge.txt"})
    template_fields = TEMPLATE_FIELDS
