"""``localtools serve``: the server on one model."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from .._errors import UsageError
from . import _common


def add_parser(sub: Any) -> None:
    serve = sub.add_parser(
        "serve", help="OpenAI chat completions and Responses, and the Anthropic Messages API (with tools), on one model",
        description="Serve POST /v1/chat/completions, POST /v1/responses, POST /v1/messages (and "
        "/v1/messages/count_tokens), GET "
        "/v1/models and GET /health. Point the openai SDK, PydanticAI or LangChain at http://HOST:PORT/v1, the "
        "anthropic SDK at http://HOST:PORT (any api_key, or the one given to --api-key). Tool calls are "
        "grammar-constrained: "
        "tool_choice required/named is enforced and every call matches its schema. In process one request runs at a "
        "time; with --backend llama-server/vllm/sglang the engine at --engine-url runs the tokens and batches as many "
        "requests as it has slots (--concurrency). The rest wait in order, and a full queue answers 503 with "
        "Retry-After.")
    _common.model_args(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    serve.add_argument("--queue", type=int, default=16, metavar="N",
                       help="requests that may wait behind the running ones; more get a 503 (default 16)")
    serve.add_argument("--concurrency", type=int, metavar="N",
                       help="requests answered at once (default: 1 in process; with an engine backend, as many as the "
                       "engine batches: llama-server's --parallel slots)")
    serve.add_argument("--max-tokens", type=int, default=1024, help="for requests that set no max_tokens (default 1024)")
    serve.add_argument("--temperature", type=float, default=0.0,
                       help="for requests that set none (default 0: greedy; OpenAI's own default is 1.0)")
    serve.add_argument("--name", help="the model id clients see (default: the --model name)")
    serve.add_argument("--api-key", metavar="KEY", default=os.environ.get("LOCALTOOLS_API_KEY"),
                       help="require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on every route but /health (default: "
                       "$LOCALTOOLS_API_KEY; without one, binding beyond this machine prints a warning)")
    serve.add_argument("--max-body-bytes", type=int, default=4 * 1024 * 1024, metavar="N",
                       help="larger request bodies get a 413 (default 4 MiB)")
    serve.add_argument("--decisions", metavar="PROFILE",
                       help="the decision levers every request runs under unless it sets its own 'decisions' field: "
                       "a profile name as load(decisions=...) takes it, e.g. greedy (no lever: the greedy token "
                       "settles every choice the grammar leaves) or calibrated (the thresholds `localtools calibrate` "
                       "wrote for this model). Default: the catalog's levers for the model (docs/serve.md)")
    serve.add_argument("--max-build-seconds", type=float, default=5.0, metavar="S",
                       help="a request whose tool schemas take longer to check and build into a grammar gets a 400 "
                       "naming the schema path (default 5)")


def main(args: argparse.Namespace) -> int:
    from ..host._catalog import default_model
    from ..serve import ServerConfig, create_app, serve

    if args.decisions is not None and (args.calibrated or args.greedy):
        raise UsageError("give --decisions PROFILE or --calibrated / --greedy, not both (--calibrated is "
                         "--decisions calibrated, --greedy is --decisions greedy)")
    model = _common.load_model(args)
    # Behind an engine with no --model, the model is the one the engine serves.
    served = model.name if model.backend.capabilities.remote else default_model()
    name = args.name or Path(args.model or served).name.removesuffix(".gguf")
    config = ServerConfig(model_name=name, max_queue=args.queue, concurrency=args.concurrency,
                          default_max_tokens=args.max_tokens,
                          default_temperature=args.temperature, max_body_bytes=args.max_body_bytes,
                          api_key=args.api_key or None, max_build_seconds=args.max_build_seconds,
                          model_source=args.model or served, family=args.family, template=args.template)
    create_app(model, config)  # a missing starlette fails here, before the socket opens

    def ready(url: str) -> None:
        print(f"serving {name} ({model.family.name} family, {model.backend.name}) at {url}", flush=True)

    serve(model, config, host=args.host, port=args.port, on_ready=ready)
    return 0
