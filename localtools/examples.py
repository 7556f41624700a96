"""Example tools for the demo: a calculator, unit conversion, the current time, a confined file reader.

Use them from the CLI with ``--tools localtools.examples:ALL``.
"""

from __future__ import annotations

import ast
import operator
import os
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .tools._tools import tool

__all__ = ["ALL", "calculator", "convert_units", "current_time", "get_customer", "read_file"]

_OPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.USub: operator.neg, ast.UAdd: operator.pos,
}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")
        return _OPS[type(node.op)](left, right)  # type: ignore[operator]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))  # type: ignore[operator]
    raise ValueError(f"unsupported expression element: {ast.dump(node)[:60]}")


@tool(tags={"read"})
def calculator(expression: str) -> float:
    """Evaluate an arithmetic expression.

    Args:
        expression: Numbers with + - * / // % ** and parentheses, e.g. "17 * 23 + 4".
    """
    result = _eval(ast.parse(expression, mode="eval"))
    return int(result) if float(result).is_integer() else result


class Unit(StrEnum):
    km = "km"
    mi = "mi"
    m = "m"
    ft = "ft"
    kg = "kg"
    lb = "lb"
    c = "c"
    f = "f"


_LINEAR = {("km", "mi"): 0.621371, ("m", "ft"): 3.28084, ("kg", "lb"): 2.20462}


@tool(tags={"read"})
def convert_units(value: float, from_unit: Unit, to_unit: Unit) -> float:
    """Convert a value between units of length, mass or temperature.

    Args:
        value: The number to convert.
        from_unit: The unit of value.
        to_unit: The unit to convert to.
    """
    a, b = Unit(from_unit).value, Unit(to_unit).value
    if a == b:
        return value
    if (a, b) == ("c", "f"):
        return round(value * 9 / 5 + 32, 4)
    if (a, b) == ("f", "c"):
        return round((value - 32) * 5 / 9, 4)
    if (a, b) in _LINEAR:
        return round(value * _LINEAR[(a, b)], 4)
    if (b, a) in _LINEAR:
        return round(value / _LINEAR[(b, a)], 4)
    raise ValueError(f"cannot convert {a} to {b}")


@tool(tags={"read"})
def current_time(timezone: str = "UTC") -> str:
    """Get the current date and time.

    Args:
        timezone: An IANA time zone such as "Europe/Paris".
    """
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {timezone!r}") from None
    return datetime.now(zone).isoformat(timespec="seconds")


def _files_root() -> Path:
    return Path(os.environ.get("LOCALTOOLS_FILES_DIR", ".")).resolve()


@tool(tags={"read"})
def read_file(path: str, max_chars: int = 4000) -> str:
    """Read a text file from the allowed directory ($LOCALTOOLS_FILES_DIR, default: the working directory).

    Args:
        path: A path relative to the allowed directory.
        max_chars: Return at most this many characters.
    """
    root = _files_root()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise PermissionError(f"{path!r} is outside the allowed directory")
    if not target.is_file():
        raise FileNotFoundError(f"no file {path!r} in the allowed directory")
    return target.read_text(encoding="utf-8", errors="replace")[:max_chars]


CUSTOMERS = {
    "cust-1001": {"name": "Ada Lovelace", "plan": "pro", "status": "active"},
    "cust-1002": {"name": "Alan Turing", "plan": "free", "status": "active"},
    "cust-1003": {"name": "Grace Hopper", "plan": "team", "status": "suspended"},
}


@tool(tags={"read"})
def get_customer(customer_id: str) -> dict[str, str]:
    """Look up a customer record (name, subscription plan, status) by customer id.

    Args:
        customer_id: The customer id, e.g. "cust-1001".
    """
    if customer_id not in CUSTOMERS:
        raise KeyError(f"no customer {customer_id!r}; known ids look like 'cust-1001'")
    return CUSTOMERS[customer_id]


ALL = [calculator, convert_units, current_time, read_file, get_customer]
