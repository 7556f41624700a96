"""A stdio MCP server for the tests, written with the official SDK (mcp 2's MCPServer, mcp 1's FastMCP).

    python tests/mcp_server.py               # stdio
    python tests/mcp_server.py --http PORT   # streamable HTTP at http://127.0.0.1:PORT/mcp

Its tools: a customer lookup (read-only), a sum with structured output, one that raises, one that
sleeps for as long as it is asked, one marked destructive, and one that kills the server.
"""

from __future__ import annotations

import os
import time

try:
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # mcp 1
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef,attr-defined]
from mcp.types import ToolAnnotations

CUSTOMERS = {"cust-1001": {"name": "Ada Lovelace", "plan": "pro", "status": "active"},
             "cust-1002": {"name": "Alan Turing", "plan": "free", "status": "active"}}
server = Server("localtools-test")


@server.tool(annotations=ToolAnnotations(read_only_hint=True) if hasattr(ToolAnnotations, "read_only_hint")
             else ToolAnnotations(readOnlyHint=True))  # type: ignore[call-arg]
def get_customer(customer_id: str) -> str:
    """Look up a customer record (name, subscription plan, status) by customer id, e.g. cust-1001."""
    if customer_id not in CUSTOMERS:
        raise ValueError(f"no customer {customer_id!r}")
    c = CUSTOMERS[customer_id]
    return f"{c['name']} is on the {c['plan']} plan ({c['status']})."


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"sum": a + b}


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    raise RuntimeError(f"failed on purpose: {reason}")


@server.tool()
def sleep(seconds: float) -> str:
    """Sleep for the given number of seconds."""
    time.sleep(seconds)
    return f"slept {seconds} s"


@server.tool(annotations=ToolAnnotations(destructive_hint=True) if hasattr(ToolAnnotations, "destructive_hint")
             else ToolAnnotations(destructiveHint=True))  # type: ignore[call-arg]
def delete_customer(customer_id: str) -> str:
    """Delete a customer record."""
    CUSTOMERS.pop(customer_id, None)
    return f"deleted {customer_id}"


@server.tool()
def crash() -> str:
    """Ends the server process at once."""
    os._exit(3)


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--http":  # streamable HTTP on 127.0.0.1:PORT/mcp
        try:
            server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
        except TypeError:  # mcp 1 takes the address as settings
            server.settings.host, server.settings.port = "127.0.0.1", int(sys.argv[2])  # type: ignore[attr-defined]
            server.run("streamable-http")
    else:
        server.run()
