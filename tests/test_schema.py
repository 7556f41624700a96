from enum import Enum
from typing import Literal

import pytest
from pydantic import BaseModel

from localtools import Tool, ToolDefinitionError, tool


def test_google_docstring_and_defaults() -> None:
    def get_weather(city: str, days: int = 1) -> str:
        """Get the forecast.

        Args:
            city: City name.
            days: How many days ahead.
        """
        return ""

    t = Tool.from_function(get_weather)
    assert t.name == "get_weather"
    assert t.description == "Get the forecast."
    assert t.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name."},
            "days": {"type": "integer", "description": "How many days ahead.", "default": 1},
        },
        "required": ["city"],
    }


def test_numpy_docstring() -> None:
    def scale(x: float) -> float:
        """Scale a number.

        Parameters
        ----------
        x : float
            The number.
        """
        return x

    assert Tool.from_function(scale).parameters["properties"]["x"] == {"type": "number", "description": "The number."}


class Color(Enum):
    red = "red"
    blue = "blue"


class Address(BaseModel):
    street: str
    zip: str | None = None


class Opaque:
    pass


def test_optional_literal_enum_list_dict() -> None:
    def f(a: int | None, b: Literal["x", "y"], c: Color, d: list[str], e: dict[str, int]) -> None:
        """F."""

    assert Tool.from_function(f).parameters == {
        "type": "object",
        "properties": {
            "a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "b": {"enum": ["x", "y"], "type": "string"},
            "c": {"enum": ["red", "blue"], "type": "string"},
            "d": {"items": {"type": "string"}, "type": "array"},
            "e": {"additionalProperties": {"type": "integer"}, "type": "object"},
        },
        "required": ["a", "b", "c", "d", "e"],
    }


def test_nested_pydantic_model_is_inlined() -> None:
    def ship(to: Address) -> None:
        """Ship.

        Args:
            to: Where to.
        """

    assert Tool.from_function(ship).parameters == {
        "type": "object",
        "properties": {
            "to": {
                "description": "Where to.",
                "properties": {
                    "street": {"type": "string"},
                    "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                },
                "required": ["street"],
                "type": "object",
            }
        },
        "required": ["to"],
    }


def test_every_problem_reported_at_once() -> None:
    def bad(a, b: Opaque, *rest: int) -> None:
        """Bad.

        Args:
            ghost: Not a parameter.
        """

    with pytest.raises(ToolDefinitionError) as info:
        Tool.from_function(bad)
    problems = "\n".join(info.value.problems)
    assert len(info.value.problems) == 4
    assert "'a' has no type hint" in problems
    assert "'b': type" in problems
    assert "*args/**kwargs" in problems
    assert "'ghost'" in problems


def test_from_model_passes_instance() -> None:
    class Args(BaseModel):
        q: str
        limit: int = 3

    def search(args: Args) -> str:
        """Search."""
        return f"{args.q}:{args.limit}"

    t = Tool.from_model(Args, search)
    assert t.parameters == {
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "default": 3}},
        "required": ["q"],
    }
    assert t.bind(t.validate({"q": "x"}))() == "x:3"


def test_from_schema_openai_style() -> None:
    spec = {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look up.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        },
    }
    t = Tool.from_schema(spec, lambda id: id.upper())
    assert t.spec() == spec
    assert t.bind(t.validate({"id": "a"}))() == "A"


def test_from_schema_rejects_invalid_schema() -> None:
    with pytest.raises(ToolDefinitionError, match="not a valid JSON Schema"):
        Tool.from_schema({"name": "x", "parameters": {"type": "object", "properties": {"a": {"type": "strng"}}}}, print)


def test_decorator_options_and_async() -> None:
    @tool(tags={"write"}, destructive=True, timeout=2)
    async def delete(path: str) -> None:
        """Delete a file."""

    assert delete.destructive and delete.is_async and delete.timeout == 2 and delete.tags == {"write", "destructive"}


def test_required_keys_without_a_schema_take_any_value() -> None:
    from localtools import get_family
    from localtools.grammar import build_grammar, matches

    params = {"type": "object", "properties": {"where": {"type": "string"}},
              "required": ["where", "population"]}
    tools = [{"type": "function", "function": {"name": "f", "description": "", "parameters": params}}]
    g = build_grammar(get_family("llama3"), tools, "required")
    assert matches(g, '{"name": "f", "parameters": {"where": "LA", "population": {"adults": 2}}}')
    assert not matches(g, '{"name": "f", "parameters": {"where": "LA"}}')
