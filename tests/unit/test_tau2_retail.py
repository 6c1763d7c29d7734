"""The retail domain on τ²-bench's data shape (a small db.json written here): the data model's dump,
each write tool's exact changes (by hand, from τ²-bench's rules, its quirks included), refused calls
that change nothing, and the DB-hash replay against gold actions."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from orchestra_ops.evals.tau2.environment import base_env, fresh_env, get_domain
from orchestra_ops.evals.tau2.reward import evaluate
from orchestra_ops.evals.tau2.tasks import load_domain_data

ADDRESS = {"address1": "1 Elm", "address2": "Apt 2", "city": "Denver", "country": "USA", "state": "CO",
           "zip": "80202"}
RAW = {
    "products": {"p1": {"name": "Lamp", "product_id": "p1", "variants": {
        "i1": {"item_id": "i1", "options": {"color": "red"}, "available": True, "price": 20},
        "i2": {"item_id": "i2", "options": {"color": "blue"}, "available": True, "price": 25.5},
        "i3": {"item_id": "i3", "options": {"color": "gold"}, "available": False, "price": 99}}},
        "p2": {"name": "Mug", "product_id": "p2", "variants": {
            "m1": {"item_id": "m1", "options": {"size": "s"}, "available": True, "price": 8},
            "m2": {"item_id": "m2", "options": {"size": "l"}, "available": True, "price": 12.25}}}},
    "users": {"kim_1": {"user_id": "kim_1", "name": {"first_name": "Kim", "last_name": "Ro"}, "address": ADDRESS,
                        "email": "kim@example.com", "orders": ["#W1", "#W2"], "payment_methods": {
                            "gift_card_1": {"source": "gift_card", "id": "gift_card_1", "balance": 30},
                            "paypal_1": {"source": "paypal", "id": "paypal_1"},
                            "credit_card_1": {"source": "credit_card", "id": "credit_card_1", "brand": "visa",
                                              "last_four": "4242", "extra": "dropped"}}}},
    "orders": {
        "#W1": {"order_id": "#W1", "user_id": "kim_1", "address": ADDRESS, "status": "pending",
                "items": [{"name": "Lamp", "product_id": "p1", "item_id": "i1", "price": 20,
                           "options": {"color": "red"}},
                          {"name": "Mug", "product_id": "p2", "item_id": "m1", "price": 8, "options": {"size": "s"}}],
                "fulfillments": [], "payment_history": [{"transaction_type": "payment", "amount": 28,
                                                         "payment_method_id": "gift_card_1"}]},
        "#W2": {"order_id": "#W2", "user_id": "kim_1", "address": ADDRESS, "status": "delivered",
                "items": [{"name": "Lamp", "product_id": "p1", "item_id": "i1", "price": 20,
                           "options": {"color": "red"}}],
                "fulfillments": [{"tracking_id": ["t1"], "item_ids": ["i1"]}],
                "payment_history": [{"transaction_type": "payment", "amount": 20, "payment_method_id": "paypal_1"}]}},
}
NULLS = {"cancel_reason": None, "exchange_items": None, "exchange_new_items": None, "exchange_payment_method_id": None,
         "exchange_price_difference": None, "return_items": None, "return_payment_method_id": None}


def _data(tmp_path: Path, tasks: list[dict[str, Any]] | None = None) -> Any:
    directory = tmp_path / "domains" / "retail"
    directory.mkdir(parents=True)
    (directory / "db.json").write_text(json.dumps(RAW))
    (directory / "policy.md").write_text("Retail policy.")
    (directory / "tasks.json").write_text(json.dumps(tasks or []))
    return load_domain_data(directory, "retail")


def _dumped() -> dict[str, Any]:
    db = copy.deepcopy(RAW)
    for product in db["products"].values():
        for variant in product["variants"].values():
            variant["price"] = float(variant["price"])
    methods = db["users"]["kim_1"]["payment_methods"]
    methods["gift_card_1"]["balance"] = 30.0
    del methods["credit_card_1"]["extra"]
    for order in db["orders"].values():
        order.update(NULLS)
        for item in order["items"]:
            item["price"] = float(item["price"])
        for payment in order["payment_history"]:
            payment["amount"] = float(payment["amount"])
    return db


def test_the_dump_matches_the_data_model(tmp_path: Path) -> None:
    env = base_env(get_domain("retail"), _data(tmp_path))
    assert env.db == _dumped()
    assert json.dumps(env.db["orders"]["#W1"]["payment_history"]) == \
        '[{"transaction_type": "payment", "amount": 28.0, "payment_method_id": "gift_card_1"}]'


def test_write_tools_change_exactly_what_tau2_changes(tmp_path: Path) -> None:
    env = base_env(get_domain("retail"), _data(tmp_path))
    before = env.hashes()
    assert env.call("modify_pending_order_items", {"order_id": "#W1", "item_ids": ["i1"], "new_item_ids": ["i3"],
                                                   "payment_method_id": "gift_card_1"}) == (
        "Error: New item i3 not found or available", True)
    assert env.call("cancel_pending_order", {"order_id": "#W2", "reason": "no longer needed"}) == (
        "Error: Non-pending order cannot be cancelled", True)
    assert env.hashes() == before
    # two items changed at once: both get the *last* variant's price and options (τ²-bench's quirk)
    assert not env.call("modify_pending_order_items", {"order_id": "#W1", "item_ids": ["i1", "m1"],
                                                       "new_item_ids": ["i2", "m2"],
                                                       "payment_method_id": "gift_card_1"})[1]
    order = env.db["orders"]["#W1"]
    assert order["items"] == [
        {"name": "Lamp", "product_id": "p1", "item_id": "i2", "price": 12.25, "options": {"size": "l"}},
        {"name": "Mug", "product_id": "p2", "item_id": "m2", "price": 12.25, "options": {"size": "l"}}]
    assert order["payment_history"][-1] == {"transaction_type": "payment", "amount": 9.75,
                                            "payment_method_id": "gift_card_1"}
    assert order["status"] == "pending (item modified)"
    gift = env.db["users"]["kim_1"]["payment_methods"]["gift_card_1"]
    assert gift["balance"] == 20.25
    assert env.call("cancel_pending_order", {"order_id": "#W1", "reason": "ordered by mistake"})[0] == \
        "Error: Non-pending order cannot be cancelled"
    assert not env.call("modify_pending_order_address", {"order_id": "#W1", "address1": "9 Oak", "address2": "",
                                                         "city": "Boulder", "state": "CO", "country": "USA",
                                                         "zip": "80301"})[1]
    assert order["address"]["city"] == "Boulder"
    assert not env.call("return_delivered_order_items", {"order_id": "#W2", "item_ids": ["i1"],
                                                         "payment_method_id": "gift_card_1"})[1]
    assert (env.db["orders"]["#W2"]["status"], env.db["orders"]["#W2"]["return_items"]) == (
        "return requested", ["i1"])
    assert env.call("get_item_details", {"item_id": "m2"})[0] == \
        '{"item_id": "m2", "options": {"size": "l"}, "available": true, "price": 12.25}'  # a Variant model's dump
    assert env.call("list_all_product_types", {}) == ('{"Lamp": "p1", "Mug": "p2"}', False)


def test_cancel_refunds_gift_cards_and_the_replay_matches_gold(tmp_path: Path) -> None:
    gold = [{"action_id": "0", "name": "modify_pending_order_payment",
             "arguments": {"order_id": "#W1", "payment_method_id": "credit_card_1"}},
            {"action_id": "1", "name": "exchange_delivered_order_items",
             "arguments": {"order_id": "#W2", "item_ids": ["i1"], "new_item_ids": ["i2"],
                           "payment_method_id": "gift_card_1"}}]
    task = {"id": "7", "user_scenario": {"instructions": "Pay by card; exchange the lamp."},
            "evaluation_criteria": {"actions": gold, "reward_basis": ["DB"]}}
    data = _data(tmp_path, [task])
    domain = get_domain("retail")
    env = fresh_env(domain, data, task)
    assert not env.call("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"})[1]
    assert env.db["users"]["kim_1"]["payment_methods"]["gift_card_1"]["balance"] == 58.0
    assert env.db["orders"]["#W1"]["payment_history"][-1] == {"transaction_type": "refund", "amount": 28.0,
                                                             "payment_method_id": "gift_card_1"}

    def calls(*pairs: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"role": "assistant", "content": None, "tool_calls": [
            {"id": str(i), "name": n, "arguments": a, "requestor": "assistant"}]} for i, (n, a) in enumerate(pairs)]

    right = calls(("get_order_details", {"order_id": "#W1"}), (gold[0]["name"], gold[0]["arguments"]),
                  (gold[1]["name"], gold[1]["arguments"]))
    info = evaluate(task, right, "user_stop", lambda: fresh_env(domain, data, task), None)
    assert info["reward"] == 1.0 and info["db_check"]["db_match"] is True
    replayed = fresh_env(domain, data, task)
    for message in right:
        call = message["tool_calls"][0]
        replayed.call(call["name"], call["arguments"])
    assert replayed.db["orders"]["#W2"]["exchange_price_difference"] == 5.5
    assert replayed.db["users"]["kim_1"]["payment_methods"]["gift_card_1"]["balance"] == 58.0  # refund of #W1's 28
    wrong = calls((gold[0]["name"], gold[0]["arguments"]),
                  (gold[1]["name"], {**gold[1]["arguments"], "payment_method_id": "paypal_1"}))
    assert evaluate(task, wrong, "user_stop", lambda: fresh_env(domain, data, task), None)["reward"] == 0.0
