"""The airline domain on τ²-bench's data shape (a small db.json written here): the data model's dump,
each write tool's exact changes (computed by hand from τ²-bench's rules), refused calls that change
nothing, and the DB-hash replay of a trajectory against gold actions."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from orchestra_ops.evals.tau2.environment import base_env, fresh_env, get_domain
from orchestra_ops.evals.tau2.reward import evaluate
from orchestra_ops.evals.tau2.tasks import load_domain_data


def _status(seats: int, price: int) -> dict[str, Any]:
    return {"status": "available", "available_seats": {"business": seats, "economy": seats, "basic_economy": seats},
            "prices": {"business": price * 3, "economy": price, "basic_economy": price // 2}}


RAW = {
    "flights": {
        "HAT001": {"flight_number": "HAT001", "origin": "JFK", "destination": "SFO", "extra": "dropped",
                   "scheduled_departure_time_est": "20:00:00", "scheduled_arrival_time_est": "01:30:00+1",
                   "dates": {"2024-05-20": _status(5, 100), "2024-05-21": _status(0, 100),
                             "2024-05-10": {"status": "landed", "actual_departure_time_est": "2024-05-10T08:01:00",
                                            "actual_arrival_time_est": "2024-05-10T11:00:00"}}},
        "HAT002": {"flight_number": "HAT002", "origin": "SFO", "destination": "SEA",
                   "scheduled_departure_time_est": "06:00:00+1", "scheduled_arrival_time_est": "08:00:00+1",
                   "dates": {"2024-05-21": _status(9, 80), "2024-05-20": {"status": "cancelled"}}},
    },
    "users": {"ann_lee_1": {
        "user_id": "ann_lee_1", "name": {"first_name": "Ann", "last_name": "Lee"},
        "address": {"address1": "1 Main St", "city": "Austin", "country": "USA", "state": "TX", "zip": "78701"},
        "email": "ann@example.com", "dob": "1990-01-02", "membership": "gold", "reservations": ["ABC123"],
        "payment_methods": {"credit_card_1": {"source": "credit_card", "id": "credit_card_1", "brand": "visa",
                                              "last_four": "1234"},
                            "gift_card_1": {"source": "gift_card", "id": "gift_card_1", "amount": 150},
                            "certificate_1": {"source": "certificate", "id": "certificate_1", "amount": 100}},
        "saved_passengers": [{"first_name": "Bo", "last_name": "Lee", "dob": "2001-03-04"}]}},
    "reservations": {"ABC123": {
        "reservation_id": "ABC123", "user_id": "ann_lee_1", "origin": "JFK", "destination": "SFO",
        "flight_type": "one_way", "cabin": "economy",
        "flights": [{"flight_number": "HAT001", "origin": "JFK", "destination": "SFO", "date": "2024-05-20",
                     "price": 90}],
        "passengers": [{"first_name": "Ann", "last_name": "Lee", "dob": "1990-01-02"}],
        "payment_history": [{"payment_id": "credit_card_1", "amount": 90}], "created_at": "2024-05-01T10:00:00",
        "total_baggages": 1, "nonfree_baggages": 0, "insurance": "no"}},
}


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _data(tmp_path: Path, tasks: list[dict[str, Any]] | None = None) -> Any:
    directory = tmp_path / "domains" / "airline"
    directory.mkdir(parents=True)
    (directory / "db.json").write_text(json.dumps(RAW))
    (directory / "policy.md").write_text("Airline policy.")
    (directory / "tasks.json").write_text(json.dumps(tasks or []))
    return load_domain_data(directory, "airline")


def _dumped() -> dict[str, Any]:
    """RAW as τ²-bench's FlightDB dumps it: extra keys gone, address2 and status null, card amounts floats."""
    db = copy.deepcopy(RAW)
    del db["flights"]["HAT001"]["extra"]
    user = db["users"]["ann_lee_1"]
    user["address"]["address2"] = None
    user["payment_methods"]["gift_card_1"]["amount"] = 150.0
    user["payment_methods"]["certificate_1"]["amount"] = 100.0
    db["reservations"]["ABC123"]["status"] = None
    return db


def test_the_dump_matches_the_data_model(tmp_path: Path) -> None:
    env = base_env(get_domain("airline"), _data(tmp_path))
    assert env.db == _dumped() and env.hashes() == (_sha(_dumped()), None)


BOOK = {"user_id": "ann_lee_1", "origin": "JFK", "destination": "SEA", "flight_type": "one_way", "cabin": "economy",
        "flights": [{"flight_number": "HAT001", "date": "2024-05-20"},
                    {"flight_number": "HAT002", "date": "2024-05-21"}],
        "passengers": [{"first_name": "Ann", "last_name": "Lee", "dob": "1990-01-02", "seat": "ignored"}],
        "payment_methods": [{"payment_id": "certificate_1", "amount": 100},
                            {"payment_id": "gift_card_1", "amount": 160}],
        "total_baggages": 2, "nonfree_baggages": 1, "insurance": "yes"}


def test_book_reservation_changes_exactly_what_tau2_changes(tmp_path: Path) -> None:
    env = base_env(get_domain("airline"), _data(tmp_path))
    before = env.hashes()
    # 100 + 80 flights, 30 insurance, 50 for the paid bag: 260; the gift card holds 150 < 160: refused
    content, error = env.call("book_reservation", BOOK)
    assert (content, error) == ("Error: Not enough balance in payment method gift_card_1", True)
    assert env.hashes() == before
    short = {**BOOK, "payment_methods": [{"payment_id": "certificate_1", "amount": 100},
                                         {"payment_id": "gift_card_1", "amount": 150}]}
    assert env.call("book_reservation", short) == (
        "Error: Payment amount does not add up, total price is 260, but paid 250", True)
    assert env.hashes() == before
    paid = {**BOOK, "payment_methods": [{"payment_id": "certificate_1", "amount": 100},
                                        {"payment_id": "gift_card_1", "amount": 120},
                                        {"payment_id": "credit_card_1", "amount": 40}]}
    content, error = env.call("book_reservation", paid)
    assert not error
    want = _dumped()
    user = want["users"]["ann_lee_1"]
    del user["payment_methods"]["certificate_1"]
    user["payment_methods"]["gift_card_1"]["amount"] = 30.0
    user["reservations"].append("HATHAT")
    want["flights"]["HAT001"]["dates"]["2024-05-20"]["available_seats"]["economy"] = 4
    want["flights"]["HAT002"]["dates"]["2024-05-21"]["available_seats"]["economy"] = 8
    want["reservations"]["HATHAT"] = {
        "reservation_id": "HATHAT", "user_id": "ann_lee_1", "origin": "JFK", "destination": "SEA",
        "flight_type": "one_way", "cabin": "economy",
        "flights": [{"flight_number": "HAT001", "origin": "JFK", "destination": "SFO", "date": "2024-05-20",
                     "price": 100},
                    {"flight_number": "HAT002", "origin": "SFO", "destination": "SEA", "date": "2024-05-21",
                     "price": 80}],
        "passengers": [{"first_name": "Ann", "last_name": "Lee", "dob": "1990-01-02"}],
        "payment_history": [{"payment_id": "certificate_1", "amount": 100},
                            {"payment_id": "gift_card_1", "amount": 120},
                            {"payment_id": "credit_card_1", "amount": 40}],
        "created_at": "2024-05-15T15:00:00", "total_baggages": 2, "nonfree_baggages": 1, "insurance": "yes",
        "status": None}
    assert env.db == want and env.hashes()[0] == _sha(want)
    # τ²-bench returns the Reservation model: its dump keeps numbers native (found by tau2_crosscheck's strict replay)
    assert json.loads(content) == want["reservations"][json.loads(content)["reservation_id"]]
    assert json.loads(content)["payment_history"][2] == {"payment_id": "credit_card_1", "amount": 40}
    full = {**BOOK, "flights": [{"flight_number": "HAT001", "date": "2024-05-21"}]}
    assert env.call("book_reservation", full) == ("Error: Not enough seats on flight HAT001", True)


def test_updates_cancel_and_searches(tmp_path: Path) -> None:
    env = base_env(get_domain("airline"), _data(tmp_path))
    # economy -> business on the same flight: 300 - 90 = 210 from the gift card? 150 < 210: refused
    change = {"reservation_id": "ABC123", "cabin": "business", "flights": [{"flight_number": "HAT001",
                                                                          "date": "2024-05-20"}],
              "payment_id": "gift_card_1"}
    assert env.call("update_reservation_flights", change) == ("Error: Gift card balance is not enough", True)
    assert env.call("update_reservation_flights", {**change, "payment_id": "certificate_1"})[0] == \
        "Error: Certificate cannot be used to update reservation"
    assert not env.call("update_reservation_flights", {**change, "payment_id": "credit_card_1"})[1]
    reservation = env.db["reservations"]["ABC123"]
    assert reservation["cabin"] == "business" and reservation["flights"][0]["price"] == 300
    assert reservation["payment_history"][-1] == {"payment_id": "credit_card_1", "amount": 210}
    assert not env.call("update_reservation_baggages", {"reservation_id": "ABC123", "total_baggages": 3,
                                                        "nonfree_baggages": 2, "payment_id": "gift_card_1"})[1]
    assert env.db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["amount"] == 50.0
    assert reservation["payment_history"][-1] == {"payment_id": "gift_card_1", "amount": 100}
    assert not env.call("cancel_reservation", {"reservation_id": "ABC123"})[1]
    assert reservation["status"] == "cancelled"
    assert [p["amount"] for p in reservation["payment_history"]] == [90, 210, 100, -90, -210, -100]
    assert env.db["flights"]["HAT001"]["dates"]["2024-05-20"]["available_seats"]["business"] == 5  # never released
    assert env.call("send_certificate", {"user_id": "ann_lee_1", "amount": 50}) == (
        "Certificate certificate_3221322 added to user ann_lee_1 with amount 50.", False)
    assert env.db["users"]["ann_lee_1"]["payment_methods"]["certificate_3221322"] == {
        "source": "certificate", "id": "certificate_3221322", "amount": 50.0}
    onestop = json.loads(env.call("search_onestop_flight", {"origin": "JFK", "destination": "SEA",
                                                            "date": "2024-05-20"})[0])
    assert [[leg["flight_number"], leg["date"]] for pair in onestop for leg in pair] == [
        ["HAT001", "2024-05-20"], ["HAT002", "2024-05-21"]]
    assert env.call("get_flight_status", {"flight_number": "HAT002", "date": "2024-05-20"}) == ("cancelled", False)
    assert env.call("calculate", {"expression": "2 * (3 + 4) / 3"}) == ("4.67", False)
    assert env.call("calculate", {"expression": "import os"})[0] == "Error: Invalid characters in expression"


def test_passengers_not_all_objects_are_stored_as_given_like_tau2(tmp_path: Path) -> None:
    """τ²-bench makes Passenger models only when every item is an object; a list holding a string is
    stored as it is (found by tau2_crosscheck's strict replay, airline 40~arg)."""
    env = base_env(get_domain("airline"), _data(tmp_path))
    people = env.db["reservations"]["ABC123"]["passengers"]
    given = [*people[:-1], "Mei Garcia"]
    content, error = env.call("update_reservation_passengers", {"reservation_id": "ABC123", "passengers": given})
    assert not error and json.loads(content)["passengers"] == given
    assert env.db["reservations"]["ABC123"]["passengers"] == given


def test_db_hash_replay_against_gold_actions(tmp_path: Path) -> None:
    gold = [{"action_id": "0", "name": "update_reservation_baggages",
             "arguments": {"reservation_id": "ABC123", "total_baggages": 2, "nonfree_baggages": 1,
                           "payment_id": "credit_card_1"}},
            {"action_id": "1", "name": "send_certificate", "arguments": {"user_id": "ann_lee_1", "amount": 50}},
            {"action_id": "2", "name": "cancel_reservation", "arguments": {"reservation_id": "NOPE"}}]  # swallowed
    task = {"id": "0", "user_scenario": {"instructions": "Add a bag."},
            "evaluation_criteria": {"actions": gold, "communicate_info": ["50"]}}
    data = _data(tmp_path, [task])
    domain = get_domain("airline")

    def trajectory(*calls: tuple[str, dict[str, Any]], text: str = "You get a $50 certificate.") -> list[Any]:
        messages: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": [
            {"id": str(i), "name": name, "arguments": args, "requestor": "assistant"}]}
            for i, (name, args) in enumerate(calls)]
        return [*messages, {"role": "assistant", "content": text, "tool_calls": None}]

    right = trajectory(("get_user_details", {"user_id": "ann_lee_1"}), (gold[0]["name"], gold[0]["arguments"]),
                       (gold[1]["name"], gold[1]["arguments"]))
    info = evaluate(task, right, "user_stop", lambda: fresh_env(domain, data, task), None)
    assert info["reward"] == 1.0 and info["db_check"]["db_match"] is True
    wrong_amount = trajectory((gold[0]["name"], gold[0]["arguments"]),
                              (gold[1]["name"], {"user_id": "ann_lee_1", "amount": 100}))
    info = evaluate(task, wrong_amount, "user_stop", lambda: fresh_env(domain, data, task), None)
    assert info["reward"] == 0.0 and info["reward_breakdown"] == {"DB": 0.0, "COMMUNICATE": 1.0}
    untold = trajectory((gold[0]["name"], gold[0]["arguments"]), (gold[1]["name"], gold[1]["arguments"]),
                        text="Done.")
    assert evaluate(task, untold, "user_stop", lambda: fresh_env(domain, data, task), None)["reward_breakdown"] == {
        "DB": 1.0, "COMMUNICATE": 0.0}
