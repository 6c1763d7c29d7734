"""The `frames` suite: FRAMES through the ToolOrchestra orchestrator agent loop.

Dataset lines are `{"id", "question", "answer"}` (the bundled file is synthetic: pass `--dataset`
for the real 824). Search prefers the `wiki_retrieval` service when the topology declares it
(else `retrieval`), asks for 150 documents, and is offered only until a search returned
documents. Grading is ToolOrchestra's: exact match, then the `<correct>` judge.
"""

from __future__ import annotations

from orchestra_ops.evals.agent.protocol import FRAMES
from orchestra_ops.evals.agent.suite import TEMPLATE_FIELDS, AgentSuite, agent_options, packaged_templates
from orchestra_ops.evals.bundled import packaged


class FramesSuite(AgentSuite):
    """FRAMES with the orchestrator agent loop (search until documents, enhance_reasoning, answer)."""

    name = "frames"
    dataset_example = '{"id": "f1", "question": "Which city hosted the 1900 Summer Olympics?", "answer": "Paris"}'
    protocol = FRAMES
    default_dataset = packaged("agent/data/frames_synthetic.jsonl")
    options = agent_options(FRAMES)
    template_files = packaged_templates({"orchestrator": "agent/templates/frames_orchestrator.txt",
                                         "query_writer": "agent/templates/frames_query_writer.txt",
                                         "answerer": "agent/templates/frames_answerer.txt"})
    template_fields = TEMPLATE_FIELDS
