"""τ²-bench's `retail` domain: our own implementation of its data model and tools (reference §1.4),
changing the DB as its toolkit does, so DB hashes agree on the user's `domains/retail/db.json`.

`normalize` is the data model's dump (extra keys dropped, optional order fields null, prices,
amounts and gift-card balances floats). τ²-bench's quirks are kept on purpose, for parity:
`modify_pending_order_items` gives every changed item the price and options of the *last* new item
checked; cancelling refunds gift cards at once, one payment at a time.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from orchestra_ops.evals.tau2.airline import _pick
from orchestra_ops.evals.tau2.domain import (
    GENERIC,
    READ,
    WRITE,
    Domain,
    ToolError,
    Toolkit,
    calculate_checked,
    dumped,
    param,
    record,
)

agent = Toolkit()
_ORDER_OPTIONAL = ("cancel_reason", "exchange_items", "exchange_new_items", "exchange_payment_method_id",
                   "exchange_price_difference", "return_items", "return_payment_method_id")
_ADDRESS = ("address1", "address2", "city", "country", "state", "zip")


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _method(m: Mapping[str, Any]) -> dict[str, Any]:
    source = m.get("source")
    if source == "credit_card":
        return _pick(m, "source", "id", "brand", "last_four")
    if source == "paypal":
        return _pick(m, "source", "id")
    if source == "gift_card":
        out = _pick(m, "source", "id", "balance")
        out["balance"] = float(out["balance"])
        return out
    raise ToolError(f"unknown payment method source {source!r}")


def _item(i: Mapping[str, Any]) -> dict[str, Any]:
    out = _pick(i, "name", "product_id", "item_id", "price", "options")
    out["price"] = float(out["price"])
    return out


def _order(o: Mapping[str, Any]) -> dict[str, Any]:
    out = _pick(o, "order_id", "user_id")
    out["address"] = _pick(o["address"], *_ADDRESS)
    out["items"] = [_item(i) for i in o.get("items") or ()]
    out["status"] = o["status"]
    out["fulfillments"] = [_pick(f, "tracking_id", "item_ids") for f in o.get("fulfillments") or ()]
    out["payment_history"] = [{"transaction_type": p["transaction_type"], "amount": float(p["amount"]),
                               "payment_method_id": p["payment_method_id"]} for p in o.get("payment_history") or ()]
    out.update(_pick(o, *_ORDER_OPTIONAL, optional=_ORDER_OPTIONAL))
    out["exchange_price_difference"] = _float(out["exchange_price_difference"])
    return out


def normalize(db: dict[str, Any]) -> dict[str, Any]:
    products = {k: {"name": p["name"], "product_id": p["product_id"],
                    "variants": {v: {"item_id": x["item_id"], "options": copy.deepcopy(x["options"]),
                                     "available": x["available"], "price": float(x["price"])}
                                 for v, x in (p.get("variants") or {}).items()}}
                for k, p in (db.get("products") or {}).items()}
    users = {k: {"user_id": u["user_id"], "name": _pick(u["name"], "first_name", "last_name"),
                 "address": _pick(u["address"], *_ADDRESS), "email": u["email"],
                 "payment_methods": {i: _method(m) for i, m in (u.get("payment_methods") or {}).items()},
                 "orders": list(u.get("orders") or ())}
             for k, u in (db.get("users") or {}).items()}
    orders = {k: _order(o) for k, o in (db.get("orders") or {}).items()}
    return {"products": products, "users": users, "orders": orders}


def _order_of(db: dict[str, Any], order_id: str) -> dict[str, Any]:
    return record(db, "orders", order_id, "Order not found")


def _user(db: dict[str, Any], user_id: str) -> dict[str, Any]:
    return record(db, "users", user_id, "User not found")


def _product(db: dict[str, Any], product_id: str) -> dict[str, Any]:
    return record(db, "products", product_id, "Product not found")


def _variant(db: dict[str, Any], product_id: str, variant_id: str) -> dict[str, Any]:
    product = _product(db, product_id)
    if variant_id not in product["variants"]:
        raise ToolError("Variant not found")
    found: dict[str, Any] = product["variants"][variant_id]
    return found


def _payment_method(db: dict[str, Any], user_id: str, payment_method_id: str) -> dict[str, Any]:
    user = _user(db, user_id)
    if payment_method_id not in user["payment_methods"]:
        raise ToolError("Payment method not found")
    found: dict[str, Any] = user["payment_methods"][payment_method_id]
    return found


def _is_gift(method: Mapping[str, Any]) -> bool:
    return method.get("source") == "gift_card"


def _first_item(order: Mapping[str, Any], item_id: str) -> dict[str, Any]:
    item = next((i for i in order["items"] if i["item_id"] == item_id), None)
    if item is None:
        raise ToolError(f"Item {item_id} not found")
    found: dict[str, Any] = item
    return found


_S = "string"
_ORDER = param(_S, "The order id, such as '#W0000000' (with the '#').")
_ITEMS = param("array", "Item ids.", items={"type": "string"})
_PM = param(_S, "A payment method id, such as 'gift_card_0000000' or 'credit_card_0000000'.")


@agent.tool(GENERIC, "Calculate an arithmetic expression (numbers, + - * / and parentheses).",
            expression=param(_S, "Such as '2 * (3 + 4)'."))
def calculate(db: dict[str, Any], expression: str) -> str:
    return calculate_checked(expression)


@agent.tool(WRITE, "Cancel a pending order; payments are refunded (gift cards at once).", order_id=_ORDER,
            reason=param(_S, "Why.", enum=["no longer needed", "ordered by mistake"]))
def cancel_pending_order(db: dict[str, Any], order_id: str, reason: str) -> dict[str, Any]:
    order = _order_of(db, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be cancelled")
    if reason not in ("no longer needed", "ordered by mistake"):
        raise ToolError("Invalid reason")
    refunds = []
    for payment in order["payment_history"]:
        refunds.append({"transaction_type": "refund", "amount": payment["amount"],
                        "payment_method_id": payment["payment_method_id"]})
        method = _payment_method(db, _user(db, order["user_id"])["user_id"], payment["payment_method_id"])
        if _is_gift(method):
            method["balance"] = round(method["balance"] + payment["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return dumped(order)


@agent.tool(WRITE, "Ask to exchange items of a delivered order for other variants of the same products.",
            order_id=_ORDER, item_ids=_ITEMS, new_item_ids=_ITEMS, payment_method_id=_PM)
def exchange_delivered_order_items(db: dict[str, Any], order_id: str, item_ids: list[str], new_item_ids: list[str],
                                   payment_method_id: str) -> dict[str, Any]:
    order = _order_of(db, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be exchanged")
    present = [i["item_id"] for i in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > present.count(item_id):
            raise ToolError(f"Number of {item_id} not found.")
    if len(item_ids) != len(new_item_ids):
        raise ToolError("The number of items to be exchanged should match.")
    diff = 0.0
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        item = _first_item(order, item_id)
        variant = _variant(db, item["product_id"], new_item_id)
        if not variant["available"]:
            raise ToolError(f"New item {new_item_id} not found or available")
        diff += variant["price"] - item["price"]
    diff = round(diff, 2)
    method = _payment_method(db, order["user_id"], payment_method_id)
    if _is_gift(method) and method["balance"] < diff:
        raise ToolError("Insufficient gift card balance to pay for the price difference")
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = float(diff)
    return dumped(order)


@agent.tool(READ, "Find a user's id from their name and zip code.", first_name=param(_S, "First name."),
            last_name=param(_S, "Last name."), zip=param(_S, "Zip code."))
def find_user_id_by_name_zip(db: dict[str, Any], first_name: str, last_name: str, zip: str) -> str:
    for user_id, user in db["users"].items():
        if user["name"]["first_name"].lower() == first_name.lower() and \
                user["name"]["last_name"].lower() == last_name.lower() and user["address"]["zip"] == zip:
            return str(user_id)
    raise ToolError("User not found")


@agent.tool(READ, "Find a user's id from their email.", email=param(_S, "The email address."))
def find_user_id_by_email(db: dict[str, Any], email: str) -> str:
    for user_id, user in db["users"].items():
        if user["email"].lower() == email.lower():
            return str(user_id)
    raise ToolError("User not found")


@agent.tool(READ, "Get an order's details.", order_id=_ORDER)
def get_order_details(db: dict[str, Any], order_id: str) -> dict[str, Any]:
    return dumped(_order_of(db, order_id))


@agent.tool(READ, "Get a product's details and its variants.", product_id=param(_S, "The product id."))
def get_product_details(db: dict[str, Any], product_id: str) -> dict[str, Any]:
    return dumped(_product(db, product_id))


@agent.tool(READ, "Get an item's (a variant's) details.", item_id=param(_S, "The item id."))
def get_item_details(db: dict[str, Any], item_id: str) -> dict[str, Any]:
    for product in db["products"].values():
        if item_id in product["variants"]:
            found: dict[str, Any] = product["variants"][item_id]
            return dumped(found)
    raise ToolError("Item not found")


@agent.tool(READ, "Get a user's details.", user_id=param(_S, "The user id."))
def get_user_details(db: dict[str, Any], user_id: str) -> dict[str, Any]:
    return dumped(_user(db, user_id))


@agent.tool(READ, "List every product type with its product id.")
def list_all_product_types(db: dict[str, Any]) -> str:
    return json.dumps({p["name"]: p["product_id"] for p in db["products"].values()}, sort_keys=True)


_ADDRESS_PARAMS = {name: param(_S, name.replace("1", " line 1").replace("2", " line 2")) for name in
                   ("address1", "address2", "city", "state", "country", "zip")}


def _address(address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict[str, Any]:
    return {"address1": address1, "address2": address2, "city": city, "country": country, "state": state,
            "zip": zip}


@agent.tool(WRITE, "Change a pending order's shipping address.", order_id=_ORDER, **_ADDRESS_PARAMS)
def modify_pending_order_address(db: dict[str, Any], order_id: str, address1: str, address2: str, city: str,
                                 state: str, country: str, zip: str) -> dict[str, Any]:
    order = _order_of(db, order_id)
    if "pending" not in order["status"]:
        raise ToolError("Non-pending order cannot be modified")
    order["address"] = _address(address1, address2, city, state, country, zip)
    return dumped(order)


@agent.tool(WRITE, "Change items of a pending order to other variants of the same products (once per order).",
            order_id=_ORDER, item_ids=_ITEMS, new_item_ids=_ITEMS, payment_method_id=_PM)
def modify_pending_order_items(db: dict[str, Any], order_id: str, item_ids: list[str], new_item_ids: list[str],
                               payment_method_id: str) -> dict[str, Any]:
    order = _order_of(db, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be modified")
    present = [i["item_id"] for i in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > present.count(item_id):
            raise ToolError(f"{item_id} not found")
    if len(item_ids) != len(new_item_ids):
        raise ToolError("The number of items to be exchanged should match")
    diff: float = 0
    variant: dict[str, Any] | None = None
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        if item_id == new_item_id:
            raise ToolError("The new item id should be different from the old item id")
        item = _first_item(order, item_id)
        variant = _variant(db, item["product_id"], new_item_id)
        if not variant["available"]:
            raise ToolError(f"New item {new_item_id} not found or available")
        diff += variant["price"] - item["price"]
    method = _payment_method(db, order["user_id"], payment_method_id)
    if _is_gift(method) and method["balance"] < diff:
        raise ToolError("Insufficient gift card balance to pay for the new item")
    order["payment_history"].append({"transaction_type": "payment" if diff > 0 else "refund",
                                     "amount": float(abs(diff)), "payment_method_id": payment_method_id})
    if _is_gift(method):
        method["balance"] = round(method["balance"] - diff, 2)
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        item = _first_item(order, item_id)
        item["item_id"] = new_item_id
        assert variant is not None
        item["price"] = variant["price"]  # τ²-bench: the last variant checked, for every item
        item["options"] = copy.deepcopy(variant["options"])
    order["status"] = "pending (item modified)"
    return dumped(order)


@agent.tool(WRITE, "Change the payment method of a pending order.", order_id=_ORDER, payment_method_id=_PM)
def modify_pending_order_payment(db: dict[str, Any], order_id: str, payment_method_id: str) -> dict[str, Any]:
    order = _order_of(db, order_id)
    if "pending" not in order["status"]:
        raise ToolError("Non-pending order cannot be modified")
    method = _payment_method(db, order["user_id"], payment_method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ToolError("There should be exactly one payment for a pending order")
    if history[0]["payment_method_id"] == payment_method_id:
        raise ToolError("The new payment method should be different from the current one")
    amount = history[0]["amount"]
    if _is_gift(method) and method["balance"] < amount:
        raise ToolError("Insufficient gift card balance to pay for the order")
    history.extend([{"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
                    {"transaction_type": "refund", "amount": amount,
                     "payment_method_id": history[0]["payment_method_id"]}])
    if _is_gift(method):
        method["balance"] = round(method["balance"] - amount, 2)
    old = _payment_method(db, order["user_id"], history[0]["payment_method_id"])
    if _is_gift(old):
        old["balance"] = round(old["balance"] + amount, 2)
    return dumped(order)


@agent.tool(WRITE, "Change a user's default address.", user_id=param(_S, "The user id."), **_ADDRESS_PARAMS)
def modify_user_address(db: dict[str, Any], user_id: str, address1: str, address2: str, city: str, state: str,
                        country: str, zip: str) -> dict[str, Any]:
    user = _user(db, user_id)
    user["address"] = _address(address1, address2, city, state, country, zip)
    return dumped(user)


@agent.tool(WRITE, "Ask to return items of a delivered order.", order_id=_ORDER, item_ids=_ITEMS,
            payment_method_id=_PM)
def return_delivered_order_items(db: dict[str, Any], order_id: str, item_ids: list[str], payment_method_id: str
                                 ) -> dict[str, Any]:
    order = _order_of(db, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be returned")
    user = _user(db, order["user_id"])
    method = _payment_method(db, user["user_id"], payment_method_id)
    if not order["payment_history"]:
        raise ToolError("list index out of range")
    if not _is_gift(method) and payment_method_id != order["payment_history"][0]["payment_method_id"]:
        raise ToolError("Payment method should be the original payment method")
    present = [i["item_id"] for i in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > present.count(item_id):
            raise ToolError("Some item not found")
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return dumped(order)


@agent.tool(GENERIC, "Transfer the user to a human agent, with a summary of the issue.",
            summary=param(_S, "A summary of the issue."))
def transfer_to_human_agents(db: dict[str, Any], summary: str) -> str:
    return "Transfer successful"


RETAIL = Domain("retail", agent, None, normalize_db=normalize)
