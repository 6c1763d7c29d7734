"""A small telecom data dir of our own in τ²-bench's shape (db.toml, user_db.toml, the two policy
files, tasks.json), shared by the telecom unit and integration tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DB_TOML = """
[[plans]]
plan_id = "P1"
name = "Basic"
data_limit_gb = 5
price_per_month = 40
data_refueling_price_per_gb = 5.0

[[plans]]
plan_id = "P2"
name = "Premium"
data_limit_gb = 15.0
price_per_month = 65.0
data_refueling_price_per_gb = 2.0

[[devices]]
device_id = "D1"
device_type = "phone"
model = "Phone X"
is_esim_capable = true
activation_date = "2025-01-20T14:30:00"

[[lines]]
line_id = "L1"
phone_number = "555-0001"
status = "Active"
plan_id = "P1"
device_id = "D1"
data_used_gb = 3.5
contract_end_date = "2026-12-31"

[[lines]]
line_id = "L2"
phone_number = "555-0002"
status = "Suspended"
plan_id = "P2"
roaming_enabled = true
suspension_start_date = "2025-02-01"

[[lines]]
line_id = "L3"
phone_number = "555-0003"
status = "Active"
plan_id = "P2"
data_used_gb = 1

[[customers]]
customer_id = "C1"
full_name = "Ann Lee"
date_of_birth = "1990-01-02"
email = "ann@example.com"
phone_number = "555-9999"
account_status = "Active"
created_at = "2025-01-15T10:30:00"
line_ids = ["L1", "L2"]
bill_ids = ["B1", "B2"]

[customers.address]
street = "1 Main St"
city = "Austin"
state = "TX"
zip_code = "78701"

[[customers.payment_methods]]
method_type = "Credit Card"
account_number_last_4 = "1234"
expiration_date = "12/2027"

[[customers]]
customer_id = "C2"
full_name = "Bo Park"
date_of_birth = "1985-05-06"
email = "bo@example.com"
phone_number = "555-0003"
line_ids = ["L3"]
bill_ids = ["B3"]

[customers.address]
street = "2 Oak Ave"
city = "Denver"
state = "CO"
zip_code = "80203"

[[bills]]
bill_id = "B1"
customer_id = "C1"
period_start = "2025-01-01"
period_end = "2025-01-31"
issue_date = "2025-02-01"
total_due = 40
due_date = "2025-02-15"
status = "Issued"

[[bills.line_items]]
description = "Basic plan"
amount = 40
date = "2025-02-01"
item_type = "Plan Charge"

[[bills]]
bill_id = "B2"
customer_id = "C1"
period_start = "2025-03-01"
period_end = "2025-03-31"
issue_date = "2025-03-01"
total_due = 0.0
due_date = "2025-03-15"
status = "Draft"

[[bills]]
bill_id = "B3"
customer_id = "C2"
period_start = "2025-01-01"
period_end = "2025-01-31"
issue_date = "2025-02-01"
total_due = 65.0
due_date = "2025-02-15"
status = "Issued"
"""

USER_DB_TOML = """
[device]
battery_level = 60

[device.app_statuses.messaging]
app_name = "messaging"

[device.app_statuses.messaging.permissions]
sms = true
storage = true
"""


def write_telecom_data(root: Path, tasks: list[dict[str, Any]]) -> Path:
    """`root/domains/telecom/` with the DBs above, short policies and `tasks`; returns the domain folder."""
    directory = root / "domains" / "telecom"
    directory.mkdir(parents=True)
    (directory / "db.toml").write_text(DB_TOML)
    (directory / "user_db.toml").write_text(USER_DB_TOML)
    (directory / "main_policy.md").write_text("Main.")
    (directory / "tech_support_manual.md").write_text("Manual.")
    (directory / "tasks.json").write_text(json.dumps(tasks))
    return directory
