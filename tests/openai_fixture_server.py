"""A scripted OpenAI-compatible server for the bench's ``openai:URL`` peer, run as its own process.

It answers the cases of ``tests/test_bench.py``'s folder the ways real servers do: a proper
``tool_calls`` field, a call written as fenced JSON into ``content`` (no ``tool_calls``), arguments
that are not JSON, and an HTTP 500. Every reply echoes the tool name it was sent, so a request
without ``tools`` cannot score. Prints its port, then serves until killed.
"""

from __future__ import annotations

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _completion(message: dict[str, Any], finish: str, timings: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-fixture", "object": "chat.completion", "created": 0, "model": "fixture-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 10, "total_tokens": 50},
    }
    if timings:  # llama-server's extra field
        body["timings"] = {"prompt_ms": 200.0, "predicted_ms": 900.0}
    return body


def _call(name: str, arguments: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}]}


def answer(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    tools = request.get("tools")
    if not isinstance(tools, list) or not tools or request.get("tool_choice") not in ("auto", "required"):
        return 400, {"error": {"message": "tools and tool_choice are required here", "type": "invalid_request_error"}}
    name = tools[0]["function"]["name"]
    text = request["messages"][-1]["content"]
    if m := re.search(r"Area of side (\d)\?", text):
        side = int(m.group(1))
        if side == 1:
            fenced = "```json\n" + json.dumps({"name": name, "arguments": {"side": 1}}) + "\n```"
            return 200, _completion({"role": "assistant", "content": fenced}, "stop")
        if side == 2:
            return 200, _completion(_call(name, "{oops"), "tool_calls")
        return 200, _completion(_call(name, json.dumps({"side": side})), "tool_calls", timings=side == 3)
    if "Poem number 1?" in text:
        return 500, {"error": {"message": "the fixture failed on purpose", "type": "server_error"}}
    return 200, _completion({"role": "assistant", "content": "Roses are red."}, "stop")


class Handler(BaseHTTPRequestHandler):
    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "fixture-model", "object": "model", "owned_by": "tests"}]})
        else:
            self._send(404, {"error": {"message": f"no {self.path}"}})

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no {self.path}"}})
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._send(*answer(request))

    def log_message(self, format: str, *args: Any) -> None:
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()
