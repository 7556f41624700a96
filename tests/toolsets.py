"""Twenty varied tool sets with a question each, for the real-model matrix."""

from __future__ import annotations

from typing import Any


def fn(name: str, description: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        params["required"] = required
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741
N = {"type": "number"}
B = {"type": "boolean"}

TOOLSETS: list[tuple[str, list[dict[str, Any]], str]] = [
    ("string", [fn("get_weather", "Current weather for a city.", {"city": S}, ["city"])], "Weather in Paris?"),
    ("enum", [fn("set_temperature_unit", "Set the unit.", {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                 ["unit"])], "Use fahrenheit please."),
    ("integer", [fn("roll_dice", "Roll dice.", {"sides": I, "count": I}, ["sides", "count"])], "Roll two six-sided dice."),
    ("number", [fn("convert_currency", "Convert money.", {"amount": N, "from_currency": S, "to_currency": S},
                   ["amount", "from_currency", "to_currency"])], "How much is 12.5 USD in EUR?"),
    ("boolean", [fn("set_lights", "Switch the lights.", {"room": S, "on": B}, ["room", "on"])], "Turn off the kitchen lights."),
    ("optional", [fn("search_books", "Search books.", {"query": S, "author": S, "year": I}, ["query"])],
     "Find books about whales."),
    ("array of strings", [fn("send_email", "Send an email.", {"to": {"type": "array", "items": S}, "subject": S, "body": S},
                             ["to", "subject", "body"])], "Email bob@example.com and amy@example.com saying hi."),
    ("array of numbers", [fn("average", "Average of numbers.", {"values": {"type": "array", "items": N}}, ["values"])],
     "What is the average of 3, 5 and 10?"),
    ("nested object", [fn("create_user", "Create a user.", {"name": S, "address": {
        "type": "object", "properties": {"city": S, "zip": S}, "required": ["city", "zip"]}}, ["name", "address"])],
     "Create user Ann living in Oslo, zip 0150."),
    ("array of objects", [fn("add_items", "Add items to the cart.", {"items": {"type": "array", "items": {
        "type": "object", "properties": {"sku": S, "qty": I}, "required": ["sku", "qty"]}}}, ["items"])],
     "Add 2 of SKU A1 and 1 of SKU B7 to my cart."),
    ("nullable", [fn("set_reminder", "Set a reminder.", {"text": S, "minutes": {"anyOf": [I, {"type": "null"}]}},
                     ["text", "minutes"])], "Remind me to stretch in 30 minutes."),
    ("free-form dict", [fn("log_event", "Log an event with attributes.", {"event": S, "attributes": {
        "type": "object", "additionalProperties": S}}, ["event", "attributes"])], "Log a login event for user ann."),
    ("no arguments", [fn("get_time", "The current time.", {})], "What time is it?"),
    ("several tools", [fn("get_weather", "Weather for a city.", {"city": S}, ["city"]),
                       fn("get_news", "Top news on a topic.", {"topic": S}, ["topic"]),
                       fn("get_stock", "Stock price.", {"ticker": S}, ["ticker"])], "What is AAPL trading at?"),
    ("enum + integer", [fn("book_table", "Book a restaurant table.", {
        "restaurant": S, "people": I, "time": {"type": "string", "enum": ["18:00", "19:00", "20:00"]}},
        ["restaurant", "people", "time"])], "Table for 4 at Luigi's at 7pm."),
    ("integer enum", [fn("set_volume", "Set the volume level.", {"level": {"type": "integer", "enum": [0, 25, 50, 75, 100]}},
                         ["level"])], "Volume to half."),
    ("string bounds", [fn("set_nickname", "Set a nickname.", {"nickname": {"type": "string", "minLength": 2, "maxLength": 12}},
                          ["nickname"])], "Call me Zed."),
    ("array bounds", [fn("pick_numbers", "Pick lottery numbers.", {"numbers": {"type": "array", "items": I, "minItems": 3,
                                                                                 "maxItems": 3}}, ["numbers"])],
     "Pick 7, 13 and 42."),
    ("many params", [fn("plan_trip", "Plan a trip.", {"origin": S, "destination": S, "days": I, "budget": N, "hotel": B,
                                                       "mode": {"type": "string", "enum": ["car", "train", "plane"]}},
                        ["origin", "destination", "days"])], "Plan 5 days from Rome to Paris by train."),
    ("several tools, mixed", [fn("calculator", "Evaluate arithmetic.", {"expression": S}, ["expression"]),
                              fn("convert_units", "Convert units.", {"value": N, "unit_from": {"enum": ["km", "mi"]},
                                                                    "unit_to": {"enum": ["km", "mi"]}},
                                 ["value", "unit_from", "unit_to"]),
                              fn("get_time", "The current time.", {})], "Convert 10 km to miles."),
]
