"""τ²-bench's `mock` domain (reference §1.4): our own implementation of its tools and data model,
changing the DB as its toolkit does, so DB hashes agree on the user's `domains/mock/` data.

Agent DB: `tasks` {task_id: {task_id, title, description (default null), status: pending|completed}},
`users` {user_id: {user_id, name, tasks: [task ids]}}. User DB: `notifications` {id: {notification_id,
message, status (default unread), task_id (default null)}}; with no user_db file it is empty.
"""

from __future__ import annotations

from typing import Any

from orchestra_ops.evals.tau2.domain import GENERIC, READ, WRITE, Domain, ToolError, Toolkit, param

agent = Toolkit()
user = Toolkit()
STATUSES = ("pending", "completed")


def _normalize(db: dict[str, Any]) -> dict[str, Any]:
    tasks = {k: {"task_id": v["task_id"], "title": v["title"], "description": v.get("description"),
                 "status": v["status"]} for k, v in (db.get("tasks") or {}).items()}
    users = {k: {"user_id": v["user_id"], "name": v["name"], "tasks": list(v.get("tasks") or [])}
             for k, v in (db.get("users") or {}).items()}
    return {"tasks": tasks, "users": users}


def _normalize_user(db: dict[str, Any]) -> dict[str, Any]:
    return {"notifications": {k: _notification(v["notification_id"], v["message"], v.get("task_id"),
                                               v.get("status", "unread"))
                              for k, v in (db.get("notifications") or {}).items()}}


def _notification(notification_id: str, message: str, task_id: str | None, status: str = "unread") -> dict[str, Any]:
    return {"notification_id": notification_id, "message": message, "status": status, "task_id": task_id}


@agent.tool(WRITE, "Create a new task for a user.", _required=("user_id", "title"),
            user_id=param("string", "The ID of the user creating the task"),
            title=param("string", "The title of the task"),
            description=param("string", "Optional description of the task"))
def create_task(db: dict[str, Any], user_id: str, title: str, description: str | None = None) -> dict[str, Any]:
    if user_id not in db["users"]:
        raise ToolError(f"User {user_id} not found")
    task_id = f"task_{len(db['tasks']) + 1}"
    task = {"task_id": task_id, "title": title, "description": description, "status": "pending"}
    db["tasks"][task_id] = task
    db["users"][user_id]["tasks"].append(task_id)
    return task


@agent.tool(READ, "Get all users in the database.")
def get_users(db: dict[str, Any]) -> list[dict[str, Any]]:
    return list(db["users"].values())


@agent.tool(WRITE, "Update the status of a task.", task_id=param("string", "The ID of the task to update"),
            status=param("string", "The new status of the task", enum=list(STATUSES)))
def update_task_status(db: dict[str, Any], task_id: str, status: str) -> dict[str, Any]:
    if task_id not in db["tasks"]:
        raise ToolError(f"Task {task_id} not found")
    # τ²-bench assigns the value unchecked (its pydantic Task does not validate assignment), so an
    # unknown status is stored and returned, not an error
    db["tasks"][task_id]["status"] = status
    task: dict[str, Any] = db["tasks"][task_id]
    return task


@agent.tool(GENERIC, "Transfer the user to a human agent, with a summary of the user's issue.",
            summary=param("string", "A summary of the user's issue."))
def transfer_to_human_agents(db: dict[str, Any], summary: str) -> str:
    return "Transfer successful"


@agent.function
def assert_number_of_tasks(db: dict[str, Any], user_id: str, expected_number: int) -> bool:
    if user_id not in db["users"]:
        raise ToolError(f"User {user_id} not found")
    return len(db["users"][user_id]["tasks"]) == expected_number


@agent.function
def assert_task_status(db: dict[str, Any], task_id: str, expected_status: str) -> bool:
    if task_id not in db["tasks"]:
        raise ToolError(f"Task {task_id} not found")
    return bool(db["tasks"][task_id]["status"] == expected_status)


@user.tool(READ, "Check all notifications in the user's inbox.")
def check_notifications(db: dict[str, Any]) -> list[dict[str, Any]]:
    return list(db["notifications"].values())


@user.tool(WRITE, "Dismiss (mark as read) a notification.",
           notification_id=param("string", "The ID of the notification to dismiss."))
def dismiss_notification(db: dict[str, Any], notification_id: str) -> str:
    if notification_id not in db["notifications"]:
        raise ToolError(f"Notification {notification_id} not found")
    db["notifications"][notification_id]["status"] = "read"
    return f"Notification {notification_id} dismissed"


@user.function
def add_notification(db: dict[str, Any], notification_id: str, message: str,
                     task_id: str | None = None) -> dict[str, Any]:
    db["notifications"][notification_id] = _notification(notification_id, message, task_id)
    note: dict[str, Any] = db["notifications"][notification_id]
    return note


@user.function
def assert_notification_status(db: dict[str, Any], notification_id: str, expected_status: str) -> bool:
    if notification_id not in db["notifications"]:
        raise ToolError(f"Notification {notification_id} not found")
    return bool(db["notifications"][notification_id]["status"] == expected_status)


MOCK = Domain("mock", agent, user, normalize_db=_normalize, normalize_user_db=_normalize_user,
              default_user_db={"notifications": {}})
