from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, SecretStr

from localtools import tool
from localtools.agent._redact import DEFAULT_SENSITIVE_KEYS, MASK, is_sensitive_key, redact, redact_json, sensitive_keys


def test_keys_match_case_and_separators_insensitively() -> None:
    for key in ("password", "User_Password", "X-API-Key", "apiKey", "access token", "Set-Cookie", "client_secret", "SSN",
                "credit-card-number", "private_key_pem", "Authorization"):
        assert is_sensitive_key(key), key
    for key in ("user", "city", "api", "key", "pass", "card"):
        assert not is_sensitive_key(key), key
    assert is_sensitive_key("pin", ["PIN"]) and is_sensitive_key("my-pin", "pin")  # one string is one pattern
    assert not is_sensitive_key("opinion_id", ["x"])


def test_keys_anywhere_in_the_value_are_masked_and_the_input_is_untouched() -> None:
    value = {"user": "ann", "password": "hunter2", "items": [{"token": "t", "n": 1}, 2], "nested": {"apiKey": {"a": 1}}}
    before = json.loads(json.dumps(value))
    out = redact(value)
    assert out == {"user": "ann", "password": MASK, "items": [{"token": MASK, "n": 1}, 2], "nested": {"apiKey": MASK}}
    assert value == before
    assert out["items"] is not value["items"]


def test_schema_marks_follow_properties_items_refs_and_unions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "login": {"$ref": "#/$defs/Login"},
            "backup": {"anyOf": [{"$ref": "#/$defs/Login"}, {"type": "null"}]},
            "pins": {"type": "array", "items": {"type": "string", "x-sensitive": True}},
            "note": {"type": "string"},
            "extra": {"type": "object", "additionalProperties": {"type": "string", "writeOnly": True}},
            "visible": {"type": "string", "writeOnly": False},
        },
        "$defs": {"Login": {"type": "object", "properties": {"user": {"type": "string"},
                                                             "word": {"type": "string", "format": "password"},
                                                             "next": {"$ref": "#/$defs/Login"}}}},
    }
    value = {"login": {"user": "ann", "word": "w1", "next": {"user": "bob", "word": "w2"}}, "backup": {"user": "c", "word": "w3"},
             "pins": ["1", "2"], "note": "hi", "extra": {"a": "x"}, "visible": "v"}
    assert redact(value, schema=schema) == {
        "login": {"user": "ann", "word": MASK, "next": {"user": "bob", "word": MASK}},
        "backup": {"user": "c", "word": MASK},
        "pins": [MASK, MASK],
        "note": "hi",
        "extra": {"a": MASK},
        "visible": "v",
    }
    assert sensitive_keys(schema) == {"word"}  # the marks on items and additionalProperties name no property
    assert redact(value, schema={"type": "object", "x-sensitive": True}) == MASK


def test_cyclic_refs_and_remote_refs_do_not_hang() -> None:
    schema = {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"allOf": [{"$ref": "#/$defs/A"}]}}}
    assert redact({"a": 1}, schema=schema) == {"a": 1}
    assert redact({"a": 1}, schema={"$ref": "https://example.com/s.json"}) == {"a": 1}
    assert sensitive_keys(schema) == set()


class Creds(BaseModel):
    user: str
    word: SecretStr


def test_pydantic_secret_fields_are_found_from_the_tool_schema() -> None:
    @tool
    def login(creds: Creds, pin: SecretStr | None = None, note: str = "") -> str:
        """Log in."""
        return "ok"

    arguments = {"creds": {"user": "ann", "word": "w"}, "pin": "1234", "note": "n"}
    assert redact(arguments, schema=login.parameters) == {"creds": {"user": "ann", "word": MASK}, "pin": MASK, "note": "n"}
    assert sensitive_keys(login.parameters) == {"word", "pin"}


def test_json_strings() -> None:
    assert redact_json('{"token": "abc", "city": "Paris"}') == '{"token": "[redacted]", "city": "Paris"}'
    assert redact_json('{"é": {"password": 1}}') == '{"é": {"password": "[redacted]"}}'  # no \\u escapes
    assert redact_json("Sunny, 21 °C") == "Sunny, 21 °C"
    assert redact_json('{ "city" : "Paris" }') == '{ "city" : "Paris" }'  # nothing masked: the text as it was
    assert redact_json('["secret"]') == '["secret"]'  # values are not keys
    assert redact_json('{"pin": 1}', schema={"properties": {"pin": {"x-sensitive": True}}}, mask="***") == '{"pin": "***"}'


def test_too_deep_to_walk_is_masked_whole() -> None:
    deep: Any = "leaf"
    for _ in range(5000):
        deep = [deep]
    assert redact(deep) == MASK


json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
plain_keys = st.sampled_from(["city", "user", "n", "items", "note", "x"])
secret_keys = st.sampled_from(["password", "API_KEY", "Access-Token", "session cookie", "ssn", "privateKey"])
values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(plain_keys | secret_keys, inner, max_size=4), max_leaves=20)
SECRET = "s3cr3t-value"


def _secret_tree(value: Any) -> Any:
    """``value`` with SECRET stored under every sensitive key."""
    if isinstance(value, dict):
        return {k: SECRET if is_sensitive_key(k) else _secret_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_secret_tree(v) for v in value]
    return value


def _same_shape(original: Any, redacted: Any) -> bool:
    if isinstance(original, dict):
        return (isinstance(redacted, dict) and list(original) == list(redacted)
                and all(redacted[k] == MASK if is_sensitive_key(k) else _same_shape(v, redacted[k]) for k, v in original.items()))
    if isinstance(original, list):
        return isinstance(redacted, list) and len(original) == len(redacted) and all(map(_same_shape, original, redacted))
    return original == redacted


@given(values)
def test_no_secret_survives_and_everything_else_is_kept(value: Any) -> None:
    tree = _secret_tree(value)
    out = redact(tree)
    assert SECRET not in json.dumps(out)
    assert _same_shape(tree, out)
    assert SECRET not in redact_json(json.dumps(tree))


@given(st.dictionaries(plain_keys, json_scalars, max_size=5))
def test_values_without_secrets_come_back_equal(value: dict[str, Any]) -> None:
    assert redact(value) == value
    assert redact_json(json.dumps(value)) == json.dumps(value)


def test_default_patterns_are_normalised() -> None:
    assert all(p == p.lower() and "_" not in p and "-" not in p for p in DEFAULT_SENSITIVE_KEYS)
