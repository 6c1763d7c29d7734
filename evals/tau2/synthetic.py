"""The bundled synthetic domain (`--domain synthetic`): a fitness club of our own, so tests and the
demo run with no τ²-bench data. Its data dir is evals/tau2/data/domains/synthetic/.

Agent DB: `members` {id: {member_id, name, email, plan, status, balance, bookings}}, `classes`
{id: {class_id, title, day, capacity, attendees, price}}, `plans` {name: {monthly_fee,
class_discount_pct}}. User DB (the member's phone app): `app` {logged_in, notifications {id:
{message, status}}}. Read tools never change a DB; write tools check everything before they change it.
"""

from __future__ import annotations

import ast
from typing import Any

from orchestra_ops.evals.tau2.domain import (
    GENERIC,
    READ,
    THINK,
    WRITE,
    Domain,
    ToolError,
    Toolkit,
    arithmetic,
    param,
    record,
)

agent = Toolkit()
user = Toolkit()

_MEMBER = param("string", "The member's id, such as 'm100'.")
_CLASS = param("string", "The class's id, such as 'c1'.")


def _member(db: dict[str, Any], member_id: str) -> dict[str, Any]:
    return record(db, "members", member_id, f"member {member_id} not found")


def _class(db: dict[str, Any], class_id: str) -> dict[str, Any]:
    return record(db, "classes", class_id, f"class {class_id} not found")


def _class_price(db: dict[str, Any], member: dict[str, Any], klass: dict[str, Any]) -> int:
    discount = int(db["plans"][member["plan"]]["class_discount_pct"])
    return int(klass["price"]) * (100 - discount) // 100


@agent.tool(READ, "Find a member's id from their email address.", email=param("string", "The email address."))
def find_member_by_email(db: dict[str, Any], email: str) -> str:
    for member_id, member in db["members"].items():
        if member["email"].lower() == str(email).lower():
            return str(member_id)
    raise ToolError(f"no member with email {email}")


@agent.tool(READ, "Get a member's details: plan, status, balance and booked classes.", member_id=_MEMBER)
def get_member_details(db: dict[str, Any], member_id: str) -> dict[str, Any]:
    return _member(db, member_id)


@agent.tool(READ, "Get a class's details: title, day, capacity, attendees and price.", class_id=_CLASS)
def get_class_details(db: dict[str, Any], class_id: str) -> dict[str, Any]:
    return _class(db, class_id)


@agent.tool(READ, "List every class with its title, day and free spots.")
def list_classes(db: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"class_id": c["class_id"], "title": c["title"], "day": c["day"],
             "spots_left": c["capacity"] - len(c["attendees"])} for c in db["classes"].values()]


@agent.tool(WRITE, "Book a class for an active member; the class price (less the plan's discount) is added "
            "to the member's balance.", member_id=_MEMBER, class_id=_CLASS)
def book_class(db: dict[str, Any], member_id: str, class_id: str) -> dict[str, Any]:
    member, klass = _member(db, member_id), _class(db, class_id)
    if member["status"] != "active":
        raise ToolError(f"member {member_id} is {member['status']}")
    if class_id in member["bookings"]:
        raise ToolError(f"member {member_id} already booked class {class_id}")
    if len(klass["attendees"]) >= klass["capacity"]:
        raise ToolError(f"class {class_id} is full")
    member["balance"] += _class_price(db, member, klass)
    member["bookings"].append(class_id)
    klass["attendees"].append(member_id)
    return member


@agent.tool(WRITE, "Cancel a member's booking; the price charged is taken off the balance.",
            member_id=_MEMBER, class_id=_CLASS)
def cancel_booking(db: dict[str, Any], member_id: str, class_id: str) -> dict[str, Any]:
    member, klass = _member(db, member_id), _class(db, class_id)
    if class_id not in member["bookings"]:
        raise ToolError(f"member {member_id} has no booking for class {class_id}")
    member["balance"] = max(0, member["balance"] - _class_price(db, member, klass))
    member["bookings"].remove(class_id)
    klass["attendees"].remove(member_id)
    return member


@agent.tool(WRITE, "Change a member's plan.", member_id=_MEMBER,
            plan=param("string", "The new plan.", enum=["basic", "premium"]))
def change_plan(db: dict[str, Any], member_id: str, plan: str) -> dict[str, Any]:
    member = _member(db, member_id)
    if plan not in db["plans"]:
        raise ToolError(f"no plan {plan}")
    if member["plan"] == plan:
        raise ToolError(f"member {member_id} is already on the {plan} plan")
    member["plan"] = plan
    return member


@agent.tool(WRITE, "Take a payment towards a member's balance; a suspended member whose balance reaches 0 is "
            "active again.", member_id=_MEMBER, amount=param("integer", "The amount paid."))
def pay_balance(db: dict[str, Any], member_id: str, amount: int) -> dict[str, Any]:
    member = _member(db, member_id)
    if not isinstance(amount, int) or amount <= 0 or amount > member["balance"]:
        raise ToolError(f"amount must be a whole number between 1 and the balance ({member['balance']})")
    member["balance"] -= amount
    if member["balance"] == 0 and member["status"] == "suspended":
        member["status"] = "active"
    return member


@agent.tool(GENERIC, "Calculate an arithmetic expression.", expression=param("string", "Such as '2 * (3 + 4)'."))
def calculate(db: dict[str, Any], expression: str) -> str:
    try:
        value = arithmetic(ast.parse(str(expression), mode="eval").body)
    except (SyntaxError, ZeroDivisionError) as exc:
        raise ToolError(f"cannot calculate {expression!r}: {exc}") from None
    return str(round(value, 2))


@agent.tool(THINK, "Think about something; changes nothing.", thought=param("string", "The thought."))
def think(db: dict[str, Any], thought: str) -> str:
    return ""


@agent.tool(GENERIC, "Transfer the member to a human agent, with a summary of the issue.",
            summary=param("string", "A summary of the issue."))
def transfer_to_human_agents(db: dict[str, Any], summary: str) -> str:
    return "Transfer successful"


@agent.function
def set_member_status(db: dict[str, Any], member_id: str, status: str) -> None:
    _member(db, member_id)["status"] = status


@agent.function
def assert_member_plan(db: dict[str, Any], member_id: str, plan: str) -> bool:
    return bool(_member(db, member_id)["plan"] == plan)


@agent.function
def assert_booked(db: dict[str, Any], member_id: str, class_id: str) -> bool:
    return class_id in _member(db, member_id)["bookings"]


@user.tool(READ, "Look at the club's app on your phone: whether you are logged in, and your notifications.")
def check_app(db: dict[str, Any]) -> dict[str, Any]:
    app: dict[str, Any] = db["app"]
    return app


@user.tool(WRITE, "Log in to the club's app.")
def log_in(db: dict[str, Any]) -> str:
    if db["app"]["logged_in"]:
        raise ToolError("already logged in")
    db["app"]["logged_in"] = True
    return "Logged in"


@user.tool(WRITE, "Dismiss a notification in the app.",
           notification_id=param("string", "The notification's id, such as 'n1'."))
def dismiss_notification(db: dict[str, Any], notification_id: str) -> str:
    notifications = db["app"]["notifications"]
    if notification_id not in notifications:
        raise ToolError(f"notification {notification_id} not found")
    notifications[notification_id]["status"] = "read"
    return f"Notification {notification_id} dismissed"


@user.function
def assert_logged_in(db: dict[str, Any], expected: bool = True) -> bool:
    return bool(db["app"]["logged_in"]) == expected


SYNTHETIC = Domain("synthetic", agent, user, default_user_db={"app": {"logged_in": False, "notifications": {}}})
