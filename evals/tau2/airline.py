"""τ²-bench's `airline` domain: our own implementation of its data model and tools (reference §1.4),
changing the DB as its toolkit does, so DB hashes agree on the user's `domains/airline/db.json`.

`normalize` is the data model's dump: every object keeps exactly its model's fields (extra keys are
dropped, optional ones default to null), gift-card and certificate amounts are floats. The tools
check what τ²-bench's check, in the same order, and change the DB only where it does (booking takes
seats; cancelling or changing flights does not give them back; a certificate used to book is spent).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

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
CABINS = ("business", "economy", "basic_economy")
RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
NOW = "2024-05-15T15:00:00"
AIRPORTS = [("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"),
            ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"),
            ("BOS", "Boston"), ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"),
            ("EWR", "Newark"), ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
            ("PHL", "Philadelphia"), ("LGA", "LaGuardia")]
_STATUS_FIELDS = {
    "available": ("available_seats", "prices"), "landed": ("actual_departure_time_est", "actual_arrival_time_est"),
    "cancelled": (), "delayed": ("estimated_departure_time_est", "estimated_arrival_time_est"),
    "flying": ("actual_departure_time_est", "estimated_arrival_time_est"),
    "on time": ("estimated_departure_time_est", "estimated_arrival_time_est"),
}


def _pick(obj: Mapping[str, Any], *fields: str, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    missing = [f for f in fields if f not in obj and f not in optional]
    if missing:
        raise ToolError(f"missing field(s) {', '.join(missing)}")
    return {f: copy.deepcopy(obj.get(f)) for f in fields}


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise ToolError(f"{name}: expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise ToolError(f"{name}: expected an integer, got {value!r}")


def _payment_method(method: Mapping[str, Any]) -> dict[str, Any]:
    source = method.get("source")
    if source == "credit_card":
        return _pick(method, "source", "id", "brand", "last_four")
    if source in ("gift_card", "certificate"):
        out = _pick(method, "source", "id", "amount")
        out["amount"] = float(out["amount"])
        return out
    raise ToolError(f"unknown payment method source {source!r}")


def _passenger(p: Mapping[str, Any]) -> dict[str, Any]:
    return _pick(p, "first_name", "last_name", "dob")


def _payment(p: Mapping[str, Any]) -> dict[str, Any]:
    out = _pick(p, "payment_id", "amount")
    out["amount"] = _int(out["amount"], "amount")
    return out


def _flight_date(status: Mapping[str, Any]) -> dict[str, Any]:
    kind = status.get("status")
    if kind not in _STATUS_FIELDS:
        raise ToolError(f"unknown flight status {kind!r}")
    return _pick(status, "status", *_STATUS_FIELDS[str(kind)])


def _reservation_flight(f: Mapping[str, Any]) -> dict[str, Any]:
    out = _pick(f, "flight_number", "origin", "destination", "date", "price")
    out["price"] = _int(out["price"], "price")
    return out


def normalize(db: dict[str, Any]) -> dict[str, Any]:
    flights = {k: {**_pick(f, "flight_number", "origin", "destination", "scheduled_departure_time_est",
                           "scheduled_arrival_time_est"),
                   "dates": {d: _flight_date(s) for d, s in (f.get("dates") or {}).items()}}
               for k, f in (db.get("flights") or {}).items()}
    users = {}
    for k, u in (db.get("users") or {}).items():
        users[k] = {"user_id": u["user_id"], "name": _pick(u["name"], "first_name", "last_name"),
                    "address": _pick(u["address"], "address1", "address2", "city", "country", "state", "zip",
                                     optional=("address2",)),
                    "email": u["email"], "dob": u["dob"],
                    "payment_methods": {i: _payment_method(m) for i, m in (u.get("payment_methods") or {}).items()},
                    "saved_passengers": [_passenger(p) for p in u.get("saved_passengers") or ()],
                    "membership": u["membership"], "reservations": list(u.get("reservations") or ())}
    reservations = {}
    for k, r in (db.get("reservations") or {}).items():
        reservations[k] = {**_pick(r, "reservation_id", "user_id", "origin", "destination", "flight_type", "cabin"),
                           "flights": [_reservation_flight(f) for f in r.get("flights") or ()],
                           "passengers": [_passenger(p) for p in r.get("passengers") or ()],
                           "payment_history": [_payment(p) for p in r.get("payment_history") or ()],
                           **_pick(r, "created_at", "total_baggages", "nonfree_baggages", "insurance", "status",
                                   optional=("status",))}
    return {"flights": flights, "users": users, "reservations": reservations}


def _user(db: dict[str, Any], user_id: str) -> dict[str, Any]:
    return record(db, "users", user_id, f"User {user_id} not found")


def _reservation(db: dict[str, Any], reservation_id: str) -> dict[str, Any]:
    return record(db, "reservations", reservation_id, f"Reservation {reservation_id} not found")


def _flight(db: dict[str, Any], flight_number: str) -> dict[str, Any]:
    return record(db, "flights", flight_number, f"Flight {flight_number} not found")


def _instance(db: dict[str, Any], flight_number: str, date: str) -> dict[str, Any]:
    flight = _flight(db, flight_number)
    if date not in flight["dates"]:
        raise ToolError(f"Flight {flight_number} not found on date {date}")
    found: dict[str, Any] = flight["dates"][date]
    return found


def _choice(value: Any, allowed: tuple[str, ...], name: str) -> str:
    if value not in allowed:
        raise ToolError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _direct(db: dict[str, Any], date: str, origin: str | None = None, destination: str | None = None,
            leave_after: str | None = None) -> list[dict[str, Any]]:
    results = []
    for flight in db["flights"].values():
        status = flight["dates"].get(date)
        if (origin is None or flight["origin"] == origin) and (destination is None or flight["destination"]
                                                                == destination) \
                and status is not None and status["status"] == "available" \
                and (leave_after is None or flight["scheduled_departure_time_est"] >= leave_after):
            results.append({"flight_number": flight["flight_number"], "origin": flight["origin"],
                            "destination": flight["destination"], "status": "available",
                            "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
                            "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"], "date": None,
                            "available_seats": copy.deepcopy(status["available_seats"]),
                            "prices": copy.deepcopy(status["prices"])})
    return results


def _payment_for_update(user: dict[str, Any], payment_id: str, total_price: int) -> dict[str, Any] | None:
    if payment_id not in user["payment_methods"]:
        raise ToolError("Payment method not found")
    method = user["payment_methods"][payment_id]
    if method["source"] == "certificate":
        raise ToolError("Certificate cannot be used to update reservation")
    if method["source"] == "gift_card" and method["amount"] < total_price:
        raise ToolError("Gift card balance is not enough")
    if method["source"] == "gift_card":
        method["amount"] -= total_price
    return {"payment_id": payment_id, "amount": total_price} if total_price != 0 else None


_S = "string"
_FLIGHTS = param("array", "Flights: objects with flight_number and date (YYYY-MM-DD).",
                 items={"type": "object", "properties": {"flight_number": {"type": "string"},
                                                         "date": {"type": "string"}}})
_PASSENGERS = param("array", "Passengers: objects with first_name, last_name and dob (YYYY-MM-DD).",
                    items={"type": "object", "properties": {"first_name": {"type": "string"},
                                                            "last_name": {"type": "string"},
                                                            "dob": {"type": "string"}}})
_CABIN = param(_S, "The cabin class.", enum=list(CABINS))


@agent.tool(WRITE, "Book a reservation.", user_id=param(_S, "The user's id, such as 'sara_doe_496'."),
            origin=param(_S, "IATA code of the origin city."), destination=param(_S, "IATA code of the destination."),
            flight_type=param(_S, "The type of trip.", enum=["one_way", "round_trip"]), cabin=_CABIN,
            flights=_FLIGHTS, passengers=_PASSENGERS,
            payment_methods=param("array", "Payments: objects with payment_id and amount.",
                                  items={"type": "object", "properties": {"payment_id": {"type": "string"},
                                                                          "amount": {"type": "number"}}}),
            total_baggages=param("integer", "Total bags."), nonfree_baggages=param("integer", "Paid bags."),
            insurance=param(_S, "Travel insurance.", enum=["yes", "no"]))
def book_reservation(db: dict[str, Any], user_id: str, origin: str, destination: str, flight_type: str, cabin: str,
                     flights: list[dict[str, Any]], passengers: list[dict[str, Any]],
                     payment_methods: list[dict[str, Any]], total_baggages: int, nonfree_baggages: int,
                     insurance: str) -> dict[str, Any]:
    infos = [_pick(f, "flight_number", "date") for f in flights]
    people = [_passenger(p) for p in passengers]
    payments = [_payment(p) for p in payment_methods]
    user = _user(db, user_id)
    reservation_id = next((r for r in RESERVATION_IDS if r not in db["reservations"]), None)
    if reservation_id is None:
        raise ToolError("Too many reservations")
    reservation: dict[str, Any] = {"reservation_id": reservation_id, "user_id": user_id, "origin": origin,
                   "destination": destination, "flight_type": _choice(flight_type, ("round_trip", "one_way"),
                                                                       "flight_type"),
                   "cabin": _choice(cabin, CABINS, "cabin"), "flights": [], "passengers": copy.deepcopy(people),
                   "payment_history": copy.deepcopy(payments), "created_at": NOW,
                   "total_baggages": _int(total_baggages, "total_baggages"),
                   "nonfree_baggages": _int(nonfree_baggages, "nonfree_baggages"),
                   "insurance": _choice(insurance, ("yes", "no"), "insurance"), "status": None}
    total_price = 0
    instances = []
    for info in infos:
        flight = _flight(db, info["flight_number"])
        instance = _instance(db, info["flight_number"], info["date"])
        if instance["status"] != "available":
            raise ToolError(f"Flight {info['flight_number']} not available on date {info['date']}")
        if instance["available_seats"][cabin] < len(people):
            raise ToolError(f"Not enough seats on flight {info['flight_number']}")
        price = instance["prices"][cabin]
        reservation["flights"].append({"flight_number": info["flight_number"], "origin": flight["origin"],
                                       "destination": flight["destination"], "date": info["date"], "price": price})
        instances.append(instance)
        total_price += price * len(people)
    if insurance == "yes":
        total_price += 30 * len(people)
    total_price += 50 * reservation["nonfree_baggages"]
    for payment in payments:
        if payment["payment_id"] not in user["payment_methods"]:
            raise ToolError(f"Payment method {payment['payment_id']} not found")
        method = user["payment_methods"][payment["payment_id"]]
        if method["source"] in ("gift_card", "certificate") and method["amount"] < payment["amount"]:
            raise ToolError(f"Not enough balance in payment method {payment['payment_id']}")
    paid = sum(p["amount"] for p in payments)
    if paid != total_price:
        raise ToolError(f"Payment amount does not add up, total price is {total_price}, but paid {paid}")
    for payment in payments:
        method = user["payment_methods"][payment["payment_id"]]
        if method["source"] == "gift_card":
            method["amount"] -= payment["amount"]
        elif method["source"] == "certificate":
            user["payment_methods"].pop(payment["payment_id"])
    for instance in instances:
        instance["available_seats"][cabin] -= len(people)
    db["reservations"][reservation_id] = reservation
    user["reservations"].append(reservation_id)
    return dumped(reservation)


@agent.tool(GENERIC, "Calculate an arithmetic expression (numbers, + - * / and parentheses).",
            expression=param(_S, "Such as '2 * (3 + 4)'."))
def calculate(db: dict[str, Any], expression: str) -> str:
    return calculate_checked(expression)


@agent.tool(WRITE, "Cancel a whole reservation; every payment is refunded.",
            reservation_id=param(_S, "The reservation id, such as 'ZFA04Y'."))
def cancel_reservation(db: dict[str, Any], reservation_id: str) -> dict[str, Any]:
    reservation = _reservation(db, reservation_id)
    refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in reservation["payment_history"]]
    reservation["payment_history"].extend(refunds)
    reservation["status"] = "cancelled"
    return dumped(reservation)


@agent.tool(READ, "Get a reservation's details.", reservation_id=param(_S, "The reservation id."))
def get_reservation_details(db: dict[str, Any], reservation_id: str) -> dict[str, Any]:
    return dumped(_reservation(db, reservation_id))


@agent.tool(READ, "Get a user's details, including their reservations.", user_id=param(_S, "The user id."))
def get_user_details(db: dict[str, Any], user_id: str) -> dict[str, Any]:
    return dumped(_user(db, user_id))


@agent.tool(READ, "List every airport with its city.")
def list_all_airports(db: dict[str, Any]) -> list[dict[str, str]]:
    return dumped([{"iata": code, "city": city} for code, city in AIRPORTS])


@agent.tool(READ, "Search direct flights between two cities on a date.", origin=param(_S, "Origin IATA code."),
            destination=param(_S, "Destination IATA code."), date=param(_S, "YYYY-MM-DD."))
def search_direct_flight(db: dict[str, Any], origin: str, destination: str, date: str) -> list[dict[str, Any]]:
    return dumped(_direct(db, date, origin, destination))


@agent.tool(READ, "Search one-stop flights between two cities on a date.", origin=param(_S, "Origin IATA code."),
            destination=param(_S, "Destination IATA code."), date=param(_S, "YYYY-MM-DD."))
def search_onestop_flight(db: dict[str, Any], origin: str, destination: str, date: str) -> list[list[dict[str, Any]]]:
    results = []
    for first in _direct(db, date, origin, None):
        first["date"] = date
        date2 = f"2024-05-{int(date[-2:]) + 1}" if "+1" in first["scheduled_arrival_time_est"] else date
        for second in _direct(db, date2, first["destination"], destination, first["scheduled_arrival_time_est"]):
            second["date"] = date2
            results.append([first, second])
    return dumped(results)


@agent.tool(WRITE, "Send a certificate (a voucher) to a user.", user_id=param(_S, "The user id."),
            amount=param("integer", "The certificate's amount."))
def send_certificate(db: dict[str, Any], user_id: str, amount: int) -> str:
    user = _user(db, user_id)
    for payment_id in CERTIFICATE_IDS:
        if payment_id not in user["payment_methods"]:
            user["payment_methods"][payment_id] = {"source": "certificate", "id": payment_id,
                                                   "amount": float(amount)}
            return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
    raise ToolError("Too many certificates")


@agent.tool(GENERIC, "Transfer the user to a human agent, with a summary of the issue.",
            summary=param(_S, "A summary of the issue."))
def transfer_to_human_agents(db: dict[str, Any], summary: str) -> str:
    return "Transfer successful"


@agent.tool(WRITE, "Update a reservation's baggage.", reservation_id=param(_S, "The reservation id."),
            total_baggages=param("integer", "Total bags."), nonfree_baggages=param("integer", "Paid bags."),
            payment_id=param(_S, "The payment method id, such as 'credit_card_7815826'."))
def update_reservation_baggages(db: dict[str, Any], reservation_id: str, total_baggages: int, nonfree_baggages: int,
                                payment_id: str) -> dict[str, Any]:
    reservation = _reservation(db, reservation_id)
    user = _user(db, reservation["user_id"])
    total_price = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
    payment = _payment_for_update(user, payment_id, total_price)
    if payment is not None:
        reservation["payment_history"].append(payment)
    reservation["total_baggages"] = total_baggages
    reservation["nonfree_baggages"] = nonfree_baggages
    return dumped(reservation)


@agent.tool(WRITE, "Change a reservation's flights (all of them, kept ones included) and cabin.",
            reservation_id=param(_S, "The reservation id."), cabin=_CABIN, flights=_FLIGHTS,
            payment_id=param(_S, "The payment method id."))
def update_reservation_flights(db: dict[str, Any], reservation_id: str, cabin: str, flights: list[dict[str, Any]],
                               payment_id: str) -> dict[str, Any]:
    infos = [_pick(f, "flight_number", "date") for f in flights]
    reservation = _reservation(db, reservation_id)
    user = _user(db, reservation["user_id"])
    count = len(reservation["passengers"])
    total_price = 0
    new_flights = []
    for info in infos:
        kept = next((f for f in reservation["flights"] if f["flight_number"] == info["flight_number"]
                     and f["date"] == info["date"] and cabin == reservation["cabin"]), None)
        if kept is not None:
            total_price += kept["price"] * count
            new_flights.append(kept)
            continue
        flight = _flight(db, info["flight_number"])
        instance = _instance(db, info["flight_number"], info["date"])
        if instance["status"] != "available":
            raise ToolError(f"Flight {info['flight_number']} not available on date {info['date']}")
        if instance["available_seats"][cabin] < count:
            raise ToolError(f"Not enough seats on flight {info['flight_number']}")
        entry: dict[str, Any] = {"flight_number": info["flight_number"], "origin": flight["origin"],
                 "destination": flight["destination"], "date": info["date"], "price": instance["prices"][cabin]}
        total_price += entry["price"] * count
        new_flights.append(entry)
    total_price -= sum(f["price"] for f in reservation["flights"]) * count
    payment = _payment_for_update(user, payment_id, total_price)
    if payment is not None:
        reservation["payment_history"].append(payment)
    reservation["flights"] = new_flights
    reservation["cabin"] = _choice(cabin, CABINS, "cabin")
    return dumped(reservation)


@agent.tool(WRITE, "Replace a reservation's passengers (the count must stay the same).",
            reservation_id=param(_S, "The reservation id."), passengers=_PASSENGERS)
def update_reservation_passengers(db: dict[str, Any], reservation_id: str, passengers: list[dict[str, Any]]
                                  ) -> dict[str, Any]:
    # τ²-bench builds Passenger models only when every item is an object; otherwise it stores the list as given
    people = [_passenger(p) for p in passengers] if all(isinstance(p, dict) for p in passengers) else passengers
    reservation = _reservation(db, reservation_id)
    if len(people) != len(reservation["passengers"]):
        raise ToolError("Number of passengers does not match")
    reservation["passengers"] = copy.deepcopy(people)
    return dumped(reservation)


@agent.tool(READ, "Get a flight's status on a date.", flight_number=param(_S, "Such as 'HAT001'."),
            date=param(_S, "YYYY-MM-DD."))
def get_flight_status(db: dict[str, Any], flight_number: str, date: str) -> str:
    return str(_instance(db, flight_number, date)["status"])


AIRLINE = Domain("airline", agent, None, normalize_db=normalize)
