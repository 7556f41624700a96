"""``localtools serve``: an OpenAI-compatible chat-completions endpoint (the ``serve`` extra).

``create_app`` builds the ASGI app for one ``Model``; ``serve`` runs it with uvicorn.
"""

from ._app import ServerConfig, create_app, error_status, serve
from ._openai import BadRequest, ChatRequest, parse_request

__all__ = ["BadRequest", "ChatRequest", "ServerConfig", "create_app", "error_status", "parse_request", "serve"]
