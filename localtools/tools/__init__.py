"""Tools: functions, pydantic models and JSON schemas made tools, the registry with permissions, MCP servers."""
