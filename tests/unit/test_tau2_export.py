"""The tau2 export's pieces as τ²-bench's Results model takes them (found by scripts/tau2_crosscheck.py,
which loads our file with τ²-bench itself)."""

from __future__ import annotations

from orchestra_ops.evals.tau2.environment import get_domain
from orchestra_ops.evals.tau2.export import tool_signatures


def test_tool_defs_are_tau2_tool_signatures_not_openai_schemas() -> None:
    signatures = tool_signatures(get_domain("mock").agent_schemas())
    assert list(signatures) == ["create_task", "get_users", "update_task_status", "transfer_to_human_agents"]
    assert signatures["create_task"] == {
        "name": "create_task", "doc": "Create a new task for a user.", "returns": None,
        "params": {"type": "object", "properties": {
            "user_id": {"type": "string", "description": "The ID of the user creating the task"},
            "title": {"type": "string", "description": "The title of the task"},
            "description": {"type": "string", "description": "Optional description of the task"}},
            "required": ["user_id", "title"]}}
    assert signatures["get_users"] == {"name": "get_users", "doc": "Get all users in the database.",
                                       "params": {"type": "object", "properties": {}, "required": []},
                                       "returns": None}
