"""τ²-bench's `telecom` domain, agent side: our own implementation of the carrier's DB and the 13
agent tools (reference §1.4), changing the DB as τ²-bench's toolkit does so that dumps, hashes and
env assertions agree. The phone (user side) and the sync between the two live in `telecom_device`.

The DB is the data model's dump: lists `plans`, `customers`, `lines`, `bills`, `devices`, each object
with every field of its model (defaults filled, floats as floats). Dates are "YYYY-MM-DD" and
date-times "YYYY-MM-DD HH:MM:SS", the text τ²-bench's dump becomes when it is hashed or sent to the
model. "Today" is fixed at 2025-02-25, as in τ²-bench. Lookups scan the lists in order (the first
match wins), and each refusal keeps τ²-bench's wording.

A draft bill that a data refuel has to create gets a random id `B<8 hex digits>` (τ²-bench draws a
uuid too), so two environments that both create one never have equal DB hashes: as in τ²-bench.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from orchestra_ops.evals.tau2.domain import GENERIC, READ, WRITE, Dumped, ToolError, Toolkit, param

agent = Toolkit()
TODAY = datetime.date(2025, 2, 25)
DEFAULT_CREATED_AT = "2025-01-01"  # τ²-bench's default is a date in a date-time field: dumped as-is
LINE_STATUSES = ("Active", "Suspended", "Pending Activation", "Closed")
BILL_STATUSES = ("Draft", "Issued", "Awaiting Payment", "Paid", "Overdue", "Disputed")


def new_bill_id() -> str:
    """The id of a draft bill a charge creates (random, as τ²-bench's)."""
    return f"B{uuid.uuid4().hex[:8]}"


# --- the data model -------------------------------------------------------------------------------

def _date(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value.date().isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    return datetime.date.fromisoformat(str(value)).isoformat()


def _datetime(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return str(value)
    if isinstance(value, datetime.date):
        return str(datetime.datetime(value.year, value.month, value.day))
    return str(datetime.datetime.fromisoformat(str(value)))


def _fields(obj: Mapping[str, Any], kind: str, spec: Mapping[str, tuple[Callable[[Any], Any], Any]]) -> dict[str, Any]:
    """`obj` reduced to the model's fields in order, each converted; a field with no default (...) is required."""
    unknown = [k for k in obj if k not in spec]
    if unknown:
        raise ToolError(f"{kind} {obj.get(next(iter(spec)), '?')}: unknown field(s) {', '.join(unknown)}")
    out: dict[str, Any] = {}
    for name, (convert, default) in spec.items():
        if name not in obj:
            if default is ...:
                raise ToolError(f"{kind} {obj.get(next(iter(spec)), '?')}: missing field {name}")
            out[name] = default() if callable(default) else default
        else:
            out[name] = None if obj[name] is None else convert(obj[name])
    return out


_R = ...  # a required field
Spec = dict[str, tuple[Callable[[Any], Any], Any]]
PLAN: Spec = {"plan_id": (str, _R), "name": (str, _R), "data_limit_gb": (float, _R), "price_per_month": (float, _R),
        "data_refueling_price_per_gb": (float, _R)}
DEVICE: Spec = {"device_id": (str, _R), "device_type": (str, _R), "model": (str, _R), "imei": (str, None),
          "is_esim_capable": (bool, _R), "activated": (bool, False), "activation_date": (_datetime, None),
          "last_esim_transfer_date": (_datetime, None)}
LINE: Spec = {
    "line_id": (str, _R), "phone_number": (str, _R), "status": (str, "Pending Activation"), "plan_id": (str, _R),
    "device_id": (str, None), "data_used_gb": (float, 0.0), "data_refueling_gb": (float, 0.0),
        "roaming_enabled": (bool, False), "contract_end_date": (_date, None), "last_plan_change_date": (_date, None),
        "last_sim_replacement_date": (_date, None), "suspension_start_date": (_date, None)}
LINE_ITEM: Spec = {"description": (str, _R), "amount": (float, _R), "date": (_date, _R), "item_type": (str, _R)}
ADDRESS: Spec = {"street": (str, _R), "city": (str, _R), "state": (str, _R), "zip_code": (str, _R)}
PAYMENT_METHOD: Spec = {"method_type": (str, _R), "account_number_last_4": (str, _R), "expiration_date": (str, _R)}


def _line_items(items: Any) -> list[dict[str, Any]]:
    return [_fields(item, "line item", LINE_ITEM) for item in items]


def _address(address: Any) -> dict[str, Any]:
    return _fields(address, "address", ADDRESS)


def _payment_methods(methods: Any) -> list[dict[str, Any]]:
    return [_fields(method, "payment method", PAYMENT_METHOD) for method in methods]


BILL: Spec = {"bill_id": (str, _R), "customer_id": (str, _R), "period_start": (_date, _R), "period_end": (_date, _R),
        "issue_date": (_date, _R), "total_due": (float, _R), "due_date": (_date, _R),
        "line_items": (_line_items, list), "status": (str, "Draft")}
CUSTOMER: Spec = {"customer_id": (str, _R), "full_name": (str, _R), "date_of_birth": (str, _R), "email": (str, _R),
            "phone_number": (str, _R), "address": (_address, _R), "account_status": (str, "Pending Verification"),
            "payment_methods": (_payment_methods, list), "line_ids": (list, list), "bill_ids": (list, list),
            "created_at": (_datetime, DEFAULT_CREATED_AT), "last_extension_date": (_date, None),
            "goodwill_credit_used_this_year": (float, 0.0)}
TABLES: dict[str, tuple[str, Spec]] = {
    "plans": ("plan", PLAN), "customers": ("customer", CUSTOMER), "lines": ("line", LINE),
    "bills": ("bill", BILL), "devices": ("device", DEVICE)}


def normalize(db: dict[str, Any]) -> dict[str, Any]:
    """TelecomDB's dump of `db` (as read from db.toml/json): every table a list of complete objects."""
    unknown = [k for k in db if k not in TABLES]
    if unknown:
        raise ToolError(f"telecom DB: unknown table(s) {', '.join(unknown)}")
    return {table: [_fields(obj, kind, spec) for obj in db.get(table) or ()] for table, (kind, spec) in TABLES.items()}


# --- lookups (τ²-bench's wording) ----------------------------------------------------------------

def _find(db: Mapping[str, Any], table: str, key: str, value: Any, missing: str) -> dict[str, Any]:
    for obj in db[table]:
        if obj[key] == value:
            found: dict[str, Any] = obj
            return found
    raise ToolError(missing)


def customer_by_id(db: Mapping[str, Any], customer_id: str) -> dict[str, Any]:
    return _find(db, "customers", "customer_id", customer_id, f"Customer with ID {customer_id} not found")


def line_by_id(db: Mapping[str, Any], line_id: str) -> dict[str, Any]:
    return _find(db, "lines", "line_id", line_id, f"Line with ID {line_id} not found")


def line_by_phone(db: Mapping[str, Any], phone_number: str) -> dict[str, Any]:
    return _find(db, "lines", "phone_number", phone_number, f"Line with phone number {phone_number} not found")


def plan_by_id(db: Mapping[str, Any], plan_id: str) -> dict[str, Any]:
    return _find(db, "plans", "plan_id", plan_id, f"Plan with ID {plan_id} not found")


def bill_by_id(db: Mapping[str, Any], bill_id: str) -> dict[str, Any]:
    return _find(db, "bills", "bill_id", bill_id, f"Bill with ID {bill_id} not found")


def device_by_id(db: Mapping[str, Any], device_id: str) -> dict[str, Any]:
    return _find(db, "devices", "device_id", device_id, f"Device with ID {device_id} not found")


def customer_line(db: Mapping[str, Any], customer_id: str, line_id: str) -> dict[str, Any]:
    """The line, checked to belong to the customer (τ²-bench's `_get_target_line`)."""
    customer = customer_by_id(db, customer_id)
    if line_id not in customer["line_ids"]:
        raise ToolError(f"Line {line_id} not found for customer {customer_id}")
    return line_by_id(db, line_id)


def bills_awaiting_payment(db: Mapping[str, Any], customer: Mapping[str, Any]) -> list[dict[str, Any]]:
    bills = [bill_by_id(db, bill_id) for bill_id in customer["bill_ids"]]
    return [bill for bill in bills if bill["status"] == "Awaiting Payment"]


def set_bill_paid(db: Mapping[str, Any], bill_id: str) -> None:
    bill_by_id(db, bill_id)["status"] = "Paid"


def _first_of_next_month(day: datetime.date) -> datetime.date:
    return (day.replace(day=1) + datetime.timedelta(days=32)).replace(day=1)


def _charge(db: dict[str, Any], customer_id: str, amount: float, description: str) -> None:
    """A line item on the customer's draft bill (created for next month when there is none)."""
    customer = customer_by_id(db, customer_id)
    draft = next((bill for bill in (bill_by_id(db, b) for b in customer["bill_ids"]) if bill["status"] == "Draft"),
                 None)
    if draft is None:
        start = _first_of_next_month(TODAY)
        end = _first_of_next_month(start) - datetime.timedelta(days=1)
        draft = {"bill_id": new_bill_id(), "customer_id": customer_id, "period_start": start.isoformat(),
                 "period_end": end.isoformat(), "issue_date": start.isoformat(), "total_due": 0.0,
                 "due_date": (start + datetime.timedelta(days=14)).isoformat(), "line_items": [], "status": "Draft"}
        db["bills"].append(draft)
        customer["bill_ids"].append(draft["bill_id"])
    draft["line_items"].append({"description": description, "amount": amount, "date": TODAY.isoformat(),
                                "item_type": "Credit" if amount < 0 else "Charge"})
    draft["total_due"] += amount


# --- the agent's tools ---------------------------------------------------------------------------

CUSTOMER_ID = param("string", "ID of the customer who owns the line.")
LINE_ID = param("string", "ID of the line.")


@agent.tool(READ, "Finds a customer by their primary contact or line phone number.",
            phone_number=param("string", "The phone number to search for."))
def get_customer_by_phone(db: dict[str, Any], phone_number: str) -> dict[str, Any]:
    return Dumped(customer_by_phone(db, phone_number))


def customer_by_phone(db: Mapping[str, Any], phone_number: str) -> dict[str, Any]:
    for customer in db["customers"]:
        if customer["phone_number"] == phone_number:
            found: dict[str, Any] = customer
            return found
        for line_id in customer["line_ids"]:
            if line_by_id(db, line_id)["phone_number"] == phone_number:
                return customer
    raise ToolError(f"Customer with phone number {phone_number} not found")


@agent.tool(READ, "Retrieves a customer directly by their unique ID.",
            customer_id=param("string", "The unique identifier of the customer."))
def get_customer_by_id(db: dict[str, Any], customer_id: str) -> dict[str, Any]:
    return Dumped(customer_by_id(db, customer_id))


@agent.tool(READ, "Searches for customers by name and DOB. May return multiple matches if names are similar, "
            "DOB helps disambiguate.", full_name=param("string", "The full name of the customer."),
            dob=param("string", "Date of birth for verification, in the format YYYY-MM-DD."))
def get_customer_by_name(db: dict[str, Any], full_name: str, dob: str) -> list[dict[str, Any]]:
    return [Dumped(c) for c in db["customers"]
            if c["full_name"].lower() == full_name.lower() and c["date_of_birth"] == dob]


_DETAILS: dict[str, Callable[[Mapping[str, Any], str], dict[str, Any]]] = {
    "L": line_by_id, "D": device_by_id, "B": bill_by_id, "C": customer_by_id, "P": plan_by_id}


@agent.tool(READ, "Retrieves the details for a given ID. The ID must be a valid ID for a Customer, Line, Device, "
            "Bill, or Plan.", id=param("string", "The ID of the object to retrieve."))
def get_details_by_id(db: dict[str, Any], id: str) -> dict[str, Any]:
    lookup = _DETAILS.get(id[:1])
    if lookup is None:
        raise ToolError(f"Unknown ID format or type: {id}")
    return Dumped(lookup(db, id))


@agent.tool(WRITE, "Suspends a specific line (max 6 months). Checks: Line status must be Active. Logic: Sets line "
            "status to Suspended, records suspension_start_date.", customer_id=CUSTOMER_ID,
            line_id=param("string", "ID of the line to suspend."), reason=param("string", "Reason for suspension."))
def suspend_line(db: dict[str, Any], customer_id: str, line_id: str, reason: str) -> dict[str, Any]:
    line = customer_line(db, customer_id, line_id)
    if line["status"] != "Active":
        raise ToolError("Line must be active to suspend")
    line["status"] = "Suspended"
    line["suspension_start_date"] = TODAY.isoformat()
    return {"message": "Line suspended successfully. $5/month holding fee will apply.", "line": Dumped(line)}


@agent.tool(WRITE, "Resumes a suspended line. Checks: Line status must be Suspended or Pending Activation. Logic: "
            "Sets line status to Active, clears suspension_start_date.", customer_id=CUSTOMER_ID,
            line_id=param("string", "ID of the line to resume."))
def resume_line(db: dict[str, Any], customer_id: str, line_id: str) -> dict[str, Any]:
    line = customer_line(db, customer_id, line_id)
    if line["status"] not in ("Suspended", "Pending Activation"):
        raise ToolError("Line must be suspended to resume")
    line["status"] = "Active"
    line["suspension_start_date"] = None
    return {"message": "Line resumed successfully", "line": Dumped(line)}


@agent.tool(READ, "Retrieves a list of the customer's bills, most recent first.", _required=("customer_id",),
            customer_id=param("string", "ID of the customer."),
            limit=param("integer", "Maximum number of bills to return.", default=12))
def get_bills_for_customer(db: dict[str, Any], customer_id: str, limit: int = 12) -> list[dict[str, Any]]:
    customer = customer_by_id(db, customer_id)
    bills = [bill_by_id(db, bill_id) for bill_id in customer["bill_ids"]]
    return [Dumped(bill) for bill in sorted(bills, key=lambda bill: bill["issue_date"], reverse=True)[:limit]]


@agent.tool(WRITE, "Sends a payment request to the customer for a specific bill. Checks: the customer exists, the "
            "bill exists and belongs to the customer, no other bill of the customer is already awaiting payment. "
            "Logic: sets the bill status to AWAITING_PAYMENT and notifies the customer. Warning: it does not check "
            "whether the bill is already PAID: always check the bill status first.", customer_id=CUSTOMER_ID,
            bill_id=param("string", "ID of the bill to send payment request for."))
def send_payment_request(db: dict[str, Any], customer_id: str, bill_id: str) -> str:
    customer = customer_by_id(db, customer_id)
    if bills_awaiting_payment(db, customer):
        raise ToolError("A bill is already awaiting payment for this customer")
    if bill_id not in customer["bill_ids"]:
        raise ToolError(f"Bill {bill_id} not found for customer {customer_id}")
    bill = bill_by_id(db, bill_id)
    bill["status"] = "Awaiting Payment"
    return f"Payment request sent to the customer for bill {bill['bill_id']}"


def _cycle_end(today: datetime.date) -> datetime.date:
    return _first_of_next_month(today) - datetime.timedelta(days=1)


@agent.tool(READ, "Retrieves current billing cycle data usage for a line, including data refueling amount, data "
            "limit, and cycle end date.", customer_id=CUSTOMER_ID,
            line_id=param("string", "ID of the line to check usage for."))
def get_data_usage(db: dict[str, Any], customer_id: str, line_id: str) -> dict[str, Any]:
    line = customer_line(db, customer_id, line_id)
    plan = plan_by_id(db, line["plan_id"])
    return {"line_id": line_id, "data_used_gb": line["data_used_gb"], "data_limit_gb": plan["data_limit_gb"],
            "data_refueling_gb": line["data_refueling_gb"], "cycle_end_date": _cycle_end(TODAY).isoformat()}


@agent.tool(WRITE, "Enables international roaming on a line.", customer_id=CUSTOMER_ID,
            line_id=param("string", "ID of the line to enable roaming for."))
def enable_roaming(db: dict[str, Any], customer_id: str, line_id: str) -> str:
    line = customer_line(db, customer_id, line_id)
    if line["roaming_enabled"]:
        return "Roaming was already enabled"
    line["roaming_enabled"] = True
    return "Roaming enabled successfully"


@agent.tool(WRITE, "Disables international roaming on a line.", customer_id=CUSTOMER_ID,
            line_id=param("string", "ID of the line to disable roaming for."))
def disable_roaming(db: dict[str, Any], customer_id: str, line_id: str) -> str:
    line = customer_line(db, customer_id, line_id)
    if not line["roaming_enabled"]:
        return "Roaming was already disabled"
    line["roaming_enabled"] = False
    return "Roaming disabled successfully"


@agent.tool(GENERIC, "Transfer the user to a human agent, with a summary of the user's issue. Only transfer if the "
            "user explicitly asks for a human agent, or if, given the policy and the available tools, you cannot "
            "solve the user's issue.", summary=param("string", "A summary of the user's issue."))
def transfer_to_human_agents(db: dict[str, Any], summary: str) -> str:
    return "Transfer successful"


@agent.tool(WRITE, "Refuels data for a specific line, adding to the customer's bill. Checks: Line status must be "
            "Active, Customer owns the line. Logic: Adds data to the line and charges customer based on the plan's "
            "refueling rate.", customer_id=CUSTOMER_ID, line_id=param("string", "ID of the line to refuel data for."),
            gb_amount=param("number", "Amount of data to add in gigabytes."))
def refuel_data(db: dict[str, Any], customer_id: str, line_id: str, gb_amount: float) -> dict[str, Any]:
    line = customer_line(db, customer_id, line_id)
    if gb_amount <= 0:
        raise ToolError("Refuel amount must be positive")
    plan = plan_by_id(db, line["plan_id"])
    price = plan["data_refueling_price_per_gb"]
    charge = gb_amount * price
    line["data_refueling_gb"] += gb_amount
    _charge(db, customer_id, charge, f"Data refueling: {gb_amount} GB at ${price}/GB")
    return {"message": f"Successfully added {gb_amount} GB of data for line {line_id} for ${charge:.2f}",
            "new_data_refueling_gb": line["data_refueling_gb"], "charge": charge}


# --- env functions: initialization actions and assertions (env_type "assistant") ------------------

@agent.function
def get_available_plan_ids(db: dict[str, Any]) -> list[str]:
    return [plan["plan_id"] for plan in db["plans"]]


@agent.function
def set_data_usage(db: dict[str, Any], customer_id: str, line_id: str, data_used_gb: float) -> str:
    customer_line(db, customer_id, line_id)["data_used_gb"] = data_used_gb
    return f"Data usage set to {data_used_gb} GB for line {line_id}"


@agent.function
def suspend_line_for_overdue_bill(db: dict[str, Any], customer_id: str, line_id: str, new_bill_id: str,
                                  contract_ended: bool) -> str:
    """An overdue bill of last month's plan price, and the line suspended for it."""
    line = line_by_id(db, line_id)
    if line["status"] != "Active":
        raise ToolError("Line must be active to suspend for unpaid bill")
    amount = plan_by_id(db, line["plan_id"])["price_per_month"]
    if amount <= 0:
        raise ToolError("Amount must be positive for overdue bill")
    customer = customer_by_id(db, customer_id)
    if any(bill_by_id(db, b)["status"] == "Overdue" for b in customer["bill_ids"]):
        raise ToolError("Customer already has an overdue bill")
    last_month_end = TODAY.replace(day=1) - datetime.timedelta(days=1)
    last_month_start = last_month_end.replace(day=1)
    db["bills"].append({
        "bill_id": new_bill_id, "customer_id": customer_id, "period_start": last_month_start.isoformat(),
        "period_end": last_month_end.isoformat(), "issue_date": last_month_start.isoformat(), "total_due": 0.0 + amount,
        "due_date": (last_month_start + datetime.timedelta(days=14)).isoformat(),
        "line_items": [{"description": f"Charge for line {line['line_id']}", "amount": amount,
                        "date": TODAY.isoformat(), "item_type": "Charge"}],
        "status": "Overdue"})
    customer["bill_ids"].append(new_bill_id)
    line["status"] = "Suspended"
    line["suspension_start_date"] = TODAY.isoformat()
    if contract_ended:
        line["contract_end_date"] = last_month_end.isoformat()
    return f"Line {line_id} suspended for unpaid bill {new_bill_id}. Contract ended: {contract_ended}"


@agent.function
def assert_data_refueling_amount(db: dict[str, Any], customer_id: str, line_id: str, expected_amount: float) -> bool:
    return bool(abs(customer_line(db, customer_id, line_id)["data_refueling_gb"] - expected_amount) < 1e-6)


@agent.function
def assert_line_status(db: dict[str, Any], customer_id: str, line_id: str, expected_status: str) -> bool:
    return bool(customer_line(db, customer_id, line_id)["status"] == expected_status)


@agent.function
def assert_overdue_bill_exists(db: dict[str, Any], customer_id: str, overdue_bill_id: str) -> bool:
    customer = customer_by_id(db, customer_id)
    if overdue_bill_id not in customer["bill_ids"]:
        raise ToolError(f"Overdue bill {overdue_bill_id} not found")
    if bill_by_id(db, overdue_bill_id)["status"] != "Overdue":
        raise ToolError(f"Overdue bill {overdue_bill_id} is not overdue")
    return True


@agent.function
def assert_no_overdue_bill(db: dict[str, Any], overdue_bill_id: str) -> bool:
    """True when the bill is gone or paid."""
    for bill in db["bills"]:
        if bill["bill_id"] == overdue_bill_id:
            return bool(bill["status"] == "Paid")
    return True
