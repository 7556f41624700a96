from __future__ import annotations

import pytest

from localtools import Tool, ToolArgumentsError, ToolDefinitionError, ToolNotAllowed, ToolRegistry, UnknownToolError


def read_a(x: int) -> int:
    """A."""
    return x


def write_b(y: str) -> str:
    """B."""
    return y


def test_unknown_tool_lists_available() -> None:
    reg = ToolRegistry([read_a, write_b])
    with pytest.raises(UnknownToolError) as info:
        reg.get("nope")
    assert str(info.value) == "unknown tool 'nope'; available tools: read_a, write_b"


def test_duplicates_and_bad_definitions_reported_together() -> None:
    def no_hint(v):
        """V."""

    with pytest.raises(ToolDefinitionError) as info:
        ToolRegistry([read_a, read_a, no_hint])
    assert len(info.value.problems) == 2
    assert any("already registered" in p for p in info.value.problems)
    assert any("no type hint" in p for p in info.value.problems)


def test_allow_list_filters_by_tag() -> None:
    reg = ToolRegistry([Tool.from_function(read_a, tags={"read"}), Tool.from_function(write_b, tags={"write"})])
    assert [t.name for t in reg.list(["read"])] == ["read_a"]
    assert [t.name for t in reg.list()] == ["read_a", "write_b"]
    with pytest.raises(ToolNotAllowed):
        reg.get("write_b", allow=["read"])


def test_validation_names_the_problem() -> None:
    t = Tool.from_function(read_a)
    assert t.validate({"x": "3"}) == {"x": 3}
    with pytest.raises(ToolArgumentsError, match="x: Input should be a valid integer"):
        t.validate({"x": "three"})
    with pytest.raises(ToolArgumentsError, match="extra: Extra inputs are not permitted"):
        t.validate({"x": 1, "extra": 2})
    with pytest.raises(ToolArgumentsError, match="x: Field required"):
        t.validate({})
