"""The ``localtools`` command line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ._errors import LocalToolsError, UnsupportedSchema, UsageError
from .backends import BACKENDS, ENGINES


def _backend_name(value: str) -> str:
    """A backend or engine name, or ``MODULE:CLASS`` for a backend of your own (as ``load()`` takes)."""
    if value in BACKENDS or value in ENGINES or ":" in value:
        return value
    raise argparse.ArgumentTypeError(f"unknown backend {value!r}; one of {', '.join([*BACKENDS, *ENGINES])}, "
                                     "or MODULE:CLASS for a backend of your own")


EPILOG = """examples:
  localtools run "What is 17 * 23 + 4?" --tools localtools.examples:ALL
  localtools run "Plan of cust-1001?" --tools ./my_tools.py:get_customer --trace trace.jsonl
  localtools render "What time is it?" --tools localtools.examples:ALL --family qwen2.5
  localtools models pull qwen2.5-coder-0.5b
  localtools doctor                 # something fails? what the machine is and whether each backend generates
  localtools serve --model qwen2.5-coder-0.5b --port 8000   # then base_url="http://127.0.0.1:8000/v1"
  localtools bench --bfcl --category simple_python --category irrelevance --sample 20 --json bench.json
  localtools bench --sample 40 --peer llama-cpp-python --peer openai:http://127.0.0.1:8080/v1 --plot bench.png
  localtools bench --bfcl --pooled --route-k 5 --sample 20   # all BFCL 'multiple' tools in one pool vs routed to 5
  localtools engines start llama-server --model qwen2.5-coder-0.5b --parallel 4 --port 8080
  localtools serve --backend llama-server --engine-url http://127.0.0.1:8080 --model qwen2.5-coder-0.5b
"""


def _load_tools(specs: list[str]) -> list[Any]:
    """``module:attr`` or ``path/to/file.py:attr``; attr is a tool, a callable or a list of them."""
    from .tools._tools import as_tool

    out: list[Any] = []
    for spec in specs:
        module_name, sep, attr = spec.rpartition(":")
        if not sep or not module_name or not attr:
            raise UsageError(f"--tools {spec!r}: expected MODULE:ATTR or FILE.py:ATTR")
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise UsageError(f"--tools {spec!r}: no file {path}")
            mod_spec = importlib.util.spec_from_file_location(path.stem, path)
            assert mod_spec and mod_spec.loader
            module = importlib.util.module_from_spec(mod_spec)
            mod_spec.loader.exec_module(module)
        else:
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                raise UsageError(f"--tools {spec!r}: cannot import {module_name}: {exc}") from None
        if not hasattr(module, attr):
            raise UsageError(f"--tools {spec!r}: {module_name} has no attribute {attr!r}")
        value = getattr(module, attr)
        items = value if isinstance(value, list | tuple) else [value]
        out += [as_tool(v) for v in items]
    return out


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", "-m", help="catalog name (see 'localtools models list') or a .gguf path; "
                   "default: the first catalog model")
    p.add_argument("--backend", default="llama-cpp", type=_backend_name, metavar="BACKEND",
                   help=f"inference backend: {', '.join([*BACKENDS, *ENGINES])} or MODULE:CLASS (default: llama-cpp); "
                   "'localtools models list' says which a model runs on. "
                   "llama-server, vllm, sglang: a running engine at --engine-url runs the tokens (it holds the weights; "
                   "--model then only names the family, and for vllm/sglang the tokenizer)")
    p.add_argument("--family", help="model family, overriding detection (see 'localtools templates')")
    p.add_argument("--template", help="'model' to use the GGUF's own chat template, or a Jinja file")
    p.add_argument("--n-gpu-layers", type=int, help="llama-cpp: layers to offload to the GPU (-1: all; needs a CUDA build)")
    p.add_argument("--n-ctx", type=int, help="llama-cpp: context size in tokens (default 4096)")
    p.add_argument("--extra-buffers", choices=["auto", "on", "off"],
                   help="llama-cpp: load weights into llama.cpp's extra CPU buffer types (repacked for its CPU "
                   "kernels). auto (default): on, except where llama.cpp was built with AMX and the CPU has AMX or "
                   "does not say, since those AMX kernels crash")
    p.add_argument("--device", help="transformers: cpu, cuda or auto (default auto: CUDA when torch sees one)")
    p.add_argument("--dtype", help="transformers: auto, float32, bfloat16 or float16 (default auto)")
    p.add_argument("--engine", choices=["llguidance", "xgrammar", "outlines_core"],
                   help="transformers: the grammar mask engine (default xgrammar)")
    p.add_argument("--mask", choices=["lazy", "full"],
                   help="llama-cpp / transformers: 'lazy' (default) asks the grammar about the token the model "
                   "wants and masks the vocabulary only when it is refused (the same output); 'full' masks every step")
    p.add_argument("--no-fast-forward", dest="fast_forward", action="store_false", default=None,
                   help="llama-cpp / transformers: sample the text the grammar forces (a tool's name once unique, "
                   "keys, brackets) token by token instead of appending it in one batch")
    p.add_argument("--strict-schema", action="store_true",
                   help="refuse a tool whose schema holds a keyword neither the grammar nor the check after decoding "
                   "enforces (an unknown keyword or format; 'localtools schema check' lists them) instead of ignoring it")
    p.add_argument("--disguise-retry", choices=["bar", "required"],
                   help="when a text answer under auto reads as a call, decode again with that opening barred "
                   "(bar, default: the model may still answer in words) or as a call (required)")
    _engine_args(p)


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine-url", metavar="URL", help="llama-server / vllm / sglang: the engine's address, e.g. "
                   "http://127.0.0.1:8080")
    p.add_argument("--engine-api-key", metavar="KEY", help="llama-server / vllm / sglang: the engine's API key, if it has one")
    p.add_argument("--engine-timeout", type=float, metavar="S",
                   help="llama-server / vllm / sglang: seconds the engine may stay silent (default 300)")
    p.add_argument("--tokenizer", metavar="PATH", help="vllm / sglang: the model's tokenizer here (a .gguf or a Hugging "
                   "Face directory; default: --model's file). The prompt is tokenized here so message text never "
                   "becomes control tokens")
    p.add_argument("--served-model", metavar="ID", help="vllm / sglang: the model id to ask the engine for (default: "
                   "the first it serves)")


def _tool_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tools", "-t", action="append", default=[], metavar="MODULE:ATTR",
                   help="tools to offer: a tool, callable or list of them; repeatable; a .py path works as module")
    p.add_argument("--tool-choice", default="auto", metavar="auto|required|none|NAME",
                   help="auto: answer or call; required: must call; none: must not; NAME: must call that tool")
    p.add_argument("--no-parallel", action="store_true", help="at most one call per turn")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="localtools",
        description="Tool calling for local models: templates put your tools into the prompt, a grammar "
        "keeps every call valid, and the loop runs the tools and feeds results back.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="answer a question, calling tools as needed",
                         description="Run the tool-calling loop on QUESTION; the final answer is printed last.")
    run.add_argument("question")
    _model_args(run)
    _tool_args(run)
    run.add_argument("--free", action="store_true", help="free decoding (no grammar) with the tolerant parser")
    run.add_argument("--max-steps", type=int, default=8, help="most model turns before giving up (default 8)")
    run.add_argument("--max-tokens", type=int, default=512, help="most tokens per model turn (default 512)")
    run.add_argument("--system", help="system prompt")
    run.add_argument("--trace", metavar="FILE", help="write the per-step trace as JSON lines")
    run.add_argument("--yes", action="store_true", help="approve destructive tools without asking")
    run.add_argument("--run-file", metavar="FILE",
                     help="write the run's state to FILE (JSON lines) as it happens; if FILE exists, continue that run "
                          "instead (after a crash or a kill): calls that finished are not run again, and QUESTION is "
                          "read from the file")
    run.add_argument("--route", type=int, metavar="K",
                     help="offer each model turn only the K tools nearest the question (all-MiniLM-L6-v2 embeddings; "
                          "needs the routing extra), plus those called before: for large tool sets")
    run.add_argument("--audit-log", metavar="FILE",
                     help="append one JSON line per tool call to FILE: run id, tool, arguments (secrets masked), "
                          "outcome, seconds")
    run.add_argument("--mcp", action="append", default=[], metavar="COMMAND|URL",
                     help="also offer the tools of an MCP server: a command started and spoken to over stdio "
                          "(\"python my_server.py\") or an http(s) URL (streamable HTTP); repeatable. Tools the "
                          "server marks destructive need --yes or an answer at the prompt")
    run.add_argument("--quiet", "-q", action="store_true",
                     help="print only the final answer, once the run ends (by default the reasoning, text and calls "
                          "show as the model writes them)")
    think = run.add_mutually_exclusive_group()
    think.add_argument("--think", dest="thinking", action="store_true", default=None,
                       help="thinking families (qwen3, deepseek-r1, ...): reason before answering (shown dimmed)")
    think.add_argument("--no-think", dest="thinking", action="store_false",
                       help="thinking families: answer without reasoning")
    run.add_argument("--reasoning-budget", type=int, metavar="N",
                     help="thinking families: close the reasoning after N tokens and answer")

    render = sub.add_parser("render", help="print the exact prompt and grammar a model would get",
                            description="Render QUESTION with the tools as the model would see it, then the grammar.")
    render.add_argument("question")
    _model_args(render)
    _tool_args(render)
    render.add_argument("--system", help="system prompt")
    render.add_argument("--what", choices=["both", "prompt", "grammar"], default="both")

    templates = sub.add_parser(
        "templates", help="list model families and their files; check a family's template against another",
        description="With no command: every family (built-in and from $LOCALTOOLS_FAMILIES), its files and call "
        "syntax. 'check FAMILY --against FILE' renders a set of conversations (system prompt, calls, several calls "
        "in one turn, tool results, unicode; with and without tools) with the family's template and with FILE's "
        "(a .jinja file, or a .gguf's own chat template) and prints, per rendering, 'identical' or the first "
        "differing byte with context. Exit status 1 when any differs.")
    tsub = templates.add_subparsers(dest="templates_command")
    check = tsub.add_parser("check", help="a family's template against a .jinja file or a GGUF's own template")
    check.add_argument("family", help="family name or alias")
    check.add_argument("--against", required=True, metavar="FILE", help="a .jinja template or a .gguf model file")
    derive = tsub.add_parser(
        "derive", help="read the call syntax off a model's own template and print it as a families.toml entry",
        description="Renders assistant turns with text, one call, two and three calls, and reads off the call "
        "syntax (where the name and arguments go, the argument syntax, the text between calls, reasoning tags, "
        "stop strings). Prints the record with the family each candidate was checked as, and the round trip: calls "
        "the template renders must parse back to the same calls and be in the grammar. With --save DIR, writes "
        "families.toml, the template and the grammar there: put DIR in $LOCALTOOLS_FAMILIES and edit them (give the "
        "family a name and match rules). Exit status 1 when the syntax cannot be derived or does not round-trip.")
    derive.add_argument("source", metavar="FILE", help="a .gguf model file or a .jinja chat template")
    derive.add_argument("--name", default="auto", help="the family's name in the record (default: auto)")
    derive.add_argument("--save", metavar="DIR", help="write families.toml, the template and the grammar into DIR")

    schema = sub.add_parser(
        "schema", help="what enforces each keyword of your tools' schemas: the grammar, the check, or nothing",
        description="'check TOOLS...' prints, per tool and per keyword path, 'grammar' (no value that breaks it can "
        "be decoded), 'grammar, checked after decoding' (narrowed by the grammar, finished by jsonschema before the "
        "call leaves), 'checked after decoding', or 'unsupported' (an unknown keyword or format: nothing enforces "
        "it). Exit status 1 when a tool's schema is refused outright, and with --strict when anything is unsupported.")
    ssub = schema.add_subparsers(dest="schema_command", required=True, metavar="COMMAND")
    scheck = ssub.add_parser("check", help="the enforcement report of tools")
    scheck.add_argument("tools", nargs="+", metavar="TOOLS",
                        help="MODULE:ATTR or FILE.py:ATTR as for --tools, or a JSON file: a tool spec, a list of them, "
                        "or a parameters schema")
    scheck.add_argument("--strict", action="store_true", help="exit 1 when any keyword is unsupported")

    bench = sub.add_parser(
        "bench", help="constrained vs free decoding on BFCL-format cases",
        description="Score every mode (model x backend x free/constrained x tool_choice) on the same BFCL-format "
        "cases with our own checker: AST accuracy, valid-call rate, latency p50/p95, time to first token, tokens/s "
        "and the grammar's overhead per generated token against free decoding of the same model and backend.")
    source = bench.add_mutually_exclusive_group()
    source.add_argument("--bfcl", action="store_true", help="BFCL v4 data from the bfcl-eval wheel (default; fetched once, "
                        "without its dependencies)")
    source.add_argument("--data", metavar="DIR", help="a folder in BFCL format (BFCL_v4_<category>.json + possible_answer/)")
    bench.add_argument("--category", action="append", metavar="C",
                       help="simple_python, multiple, parallel, parallel_multiple, irrelevance (repeatable; default all five)")
    bench.add_argument("--sample", type=int, default=40, metavar="N", help="cases per category, evenly spread (default 40)")
    bench.add_argument("--seed", type=int, default=0, help="shifts which cases the even spread picks (default 0)")
    bench.add_argument("--model", "-m", action="append", help="catalog name or .gguf path (repeatable; default: the default model)")
    bench.add_argument("--backend", action="append", type=_backend_name, metavar="BACKEND",
                       help=f"{', '.join([*BACKENDS, *ENGINES])} or MODULE:CLASS; repeatable; default llama-cpp. "
                       "llama-server / vllm / sglang: the engine at --engine-url, "
                       "scored with the same prompts, grammars and parser as in process")
    _engine_args(bench)
    bench.add_argument("--mode", action="append", choices=["free", "constrained"], help="repeatable; default both")
    bench.add_argument("--tool-choice", action="append", choices=["auto", "required"], help="repeatable; default auto")
    bench.add_argument("--peer", action="append", default=[], metavar="native|llama-cpp-python|openai:URL[#MODEL]",
                       help="repeatable. native: each --model's own GGUF chat template, free decoding on llama.cpp, "
                       "calls read tolerantly from tags, fenced or bare JSON (the bar constrained decoding must clear). "
                       "llama-cpp-python: its own chatml-function-calling handler on each --model, in "
                       "process. openai:URL: any OpenAI-compatible server (llama-server --jinja, Ollama, vLLM, localtools "
                       "serve), scored strictly on the tool_calls it returns; #MODEL names the model to ask for "
                       "(default: the first in its /models)")
    bench.add_argument("--peers-only", action="store_true", help="run only the peers, not localtools' own modes")
    bench.add_argument("--system", metavar="TEXT", help="a system message for every case and every mode (BFCL's "
                       "questions have none; llama-cpp-python's handler lists the tools only inside one)")
    bench.add_argument("--scenarios", action="store_true", help="also run the multi-turn scenarios (a question, tools "
                       "incl. unrelated ones, the results): per auto mode, how often the answer holds the facts and "
                       "the needed tool was called once")
    bench.add_argument("--pooled", action="store_true", help="routing among many tools: pool the tools of every case "
                       "of the categories (default: multiple) into one set, deduplicated by name (the first definition "
                       "kept), and ask each sampled case with all of them and with the --route-k tools nearest its "
                       "question (EmbeddingRouter, the routing extra). Per mode: accuracy against the case's expected "
                       "call, mean/max prompt tokens, and the prompts that leave fewer than --max-tokens of the "
                       "model's context (not generated; scored wrong). localtools' own modes only")
    bench.add_argument("--route-k", type=int, action="append", metavar="K",
                       help="with --pooled: tools the router offers per case (repeatable; default 5)")
    bench.add_argument("--max-tokens", type=int, default=256, help="most tokens per reply (default 256)")
    bench.add_argument("--disguise-retry", choices=["bar", "required"],
                   help="when a text answer under auto reads as a call, decode again with that opening barred "
                   "(bar, default: the model may still answer in words) or as a call (required)")
    bench.add_argument("--json", metavar="FILE", help="write the summary and every case's result as JSON")
    bench.add_argument("--plot", metavar="FILE.png", help="chart accuracy and latency per mode, grouped by category "
                       "(needs matplotlib)")

    serve = sub.add_parser(
        "serve", help="an OpenAI-compatible endpoint (chat completions with tools) on one model",
        description="Serve POST /v1/chat/completions, GET /v1/models and GET /health. Point the openai SDK, "
        "PydanticAI or LangChain at http://HOST:PORT/v1 (any api_key, or the one given to --api-key). Tool calls are grammar-constrained: "
        "tool_choice required/named is enforced and every call matches its schema. In process one request runs at a "
        "time; with --backend llama-server/vllm/sglang the engine at --engine-url runs the tokens and batches as many "
        "requests as it has slots (--concurrency). The rest wait in order, and a full queue answers 503 with "
        "Retry-After.")
    _model_args(serve)
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
                       help="require 'Authorization: Bearer KEY' on every route but /health (default: "
                       "$LOCALTOOLS_API_KEY; without one, binding beyond this machine prints a warning)")
    serve.add_argument("--max-body-bytes", type=int, default=4 * 1024 * 1024, metavar="N",
                       help="larger request bodies get a 413 (default 4 MiB)")

    doctor = sub.add_parser(
        "doctor", help="if something fails: the machine, the installed backends and models, and a test generation",
        description="Print the machine (CPU model and features, cores, memory, GPUs), llama.cpp's and torch's own "
        "build info, each backend and grammar engine with its version, the cached models with size and sha256 "
        "status, then run a short generation per installed backend in a child process (so a crash is reported, "
        "not suffered) and say ok, crashed (with the signal) or error, each with its fix. Exit code 1 when an "
        "installed backend cannot generate.")
    doctor.add_argument("--backend", action="append", metavar="llama-cpp|transformers|MODULE:CLASS",
                        help="check only this backend, or a backend of your own (repeatable; default: every backend)")
    doctor.add_argument("--model", "-m", help="the model to generate with (default: the smallest cached catalog model "
                        "each backend runs on)")
    doctor.add_argument("--no-generate", action="store_true", help="skip the test generations")
    doctor.add_argument("--no-checksum", action="store_true", help="skip hashing the cached models (seconds per GB)")
    doctor.add_argument("--timeout", type=float, default=600, help="seconds a test generation may take (default 600)")

    engines = sub.add_parser(
        "engines", help="build and start llama-server, for --backend llama-server",
        description="'build llama-server' compiles llama.cpp's server (its target alone) from the llama.cpp sources "
        "in the llama-cpp-python sdist the llama-cpp backend uses, tuned for this CPU, and caches it (minutes the "
        "first time; then it prints the cached path). $LOCALTOOLS_LLAMA_SERVER names a binary of your own instead. "
        "'start llama-server' runs it on a catalog model or GGUF, on 127.0.0.1, until interrupted; then point "
        "--backend llama-server --engine-url at it.")
    esub = engines.add_subparsers(dest="engines_command", required=True, metavar="ACTION")
    ebuild = esub.add_parser("build", help="build llama-server and print its path")
    ebuild.add_argument("engine", choices=["llama-server"])
    ebuild.add_argument("--force", action="store_true", help="build again even if a build is cached")
    ebuild.add_argument("--jobs", "-j", type=int, help="parallel compile jobs (default: every core)")
    estart = esub.add_parser("start", help="run llama-server on a model until interrupted")
    estart.add_argument("engine", choices=["llama-server"])
    estart.add_argument("--model", "-m", help="catalog name or .gguf path (default: the first catalog model)")
    estart.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080)")
    estart.add_argument("--parallel", type=int, default=4, help="requests it batches at once (slots; default 4)")
    estart.add_argument("--n-ctx", type=int, default=4096, help="context per slot in tokens (default 4096)")
    estart.add_argument("--threads", type=int, help="CPU threads (default: llama-server's choice)")

    models = sub.add_parser("models", help="list or download catalog models")
    msub = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    msub.add_parser("list", help="one model a line: name, family, backends, size, where it is cached")
    pull = msub.add_parser("pull", help="download, assemble and verify a catalog model")
    pull.add_argument("name")
    pull.add_argument("--force", action="store_true", help="download again even if cached")
    return parser


def _engine_options(args: argparse.Namespace, backend: str) -> dict[str, Any]:
    """The engine options given on the command line, for an engine backend (``{}`` for others)."""

    if backend not in ENGINES:
        given = [f"--{k.replace('_', '-')}" for k in ("engine_url", "engine_api_key", "engine_timeout", "tokenizer",
                                                     "served_model") if getattr(args, k, None) is not None]
        if given and not any(b in ENGINES for b in _backends(args)):
            raise UsageError(f"{', '.join(given)} only apply to an engine backend (--backend {' | '.join(ENGINES)})")
        return {}
    if not args.engine_url:
        raise UsageError(f"--backend {backend} needs --engine-url URL (where the engine listens, e.g. http://127.0.0.1:8080)")
    options = {"url": args.engine_url, "api_key": args.engine_api_key, "timeout": args.engine_timeout,
               "tokenizer": args.tokenizer, "served_model": args.served_model}
    # Each engine rejects what it does not take (llama-server tokenizes itself and serves one model).
    return {k: v for k, v in options.items() if v is not None}


def _backends(args: argparse.Namespace) -> list[str]:
    backend = getattr(args, "backend", None) or ["llama-cpp"]
    return backend if isinstance(backend, list) else [backend]


def _load_model(args: argparse.Namespace) -> Any:
    from .model._load import load

    # Only the options given on the command line; each backend rejects those it does not take.
    given = {"n_gpu_layers": args.n_gpu_layers, "n_ctx": args.n_ctx, "extra_buffers": args.extra_buffers,
             "device": args.device, "dtype": args.dtype, "engine": args.engine, "mask": args.mask,
             "fast_forward": args.fast_forward}
    options = {k: v for k, v in given.items() if v is not None} | _engine_options(args, args.backend)
    model = load(args.model, backend=args.backend, family=args.family, template=args.template, **options)
    model.strict_schema = bool(getattr(args, "strict_schema", False))
    _set_disguise_retry(model, args)
    return model


def _set_disguise_retry(model: Any, args: argparse.Namespace) -> None:
    from .families._reply import DisguiseRetry

    if getattr(args, "disguise_retry", None):
        model.disguise_retry = DisguiseRetry(args.disguise_retry)


def _approver(assume_yes: bool) -> Any:
    def approve(call: Any, tool: Any) -> bool:
        if assume_yes:
            return True
        if not sys.stdin.isatty():
            print(f"! {tool.name} is destructive; not run (pass --yes to approve)", file=sys.stderr)
            return False
        answer = input(f"Run destructive tool {tool.name}({json.dumps(call.arguments)})? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    return approve


def _cmd_run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as servers:
        tools = _load_tools(args.tools) + _mcp_tools(args.mcp, servers)
        return _run(args, tools)


def _mcp_tools(specs: list[str], servers: contextlib.ExitStack) -> list[Any]:
    """The tools of each ``--mcp`` server; each session closes with ``servers``."""
    from .tools._mcp import mcp_tools

    out: list[Any] = []
    for spec in specs:
        is_url = spec.startswith(("http://", "https://"))
        out += servers.enter_context(mcp_tools(url=spec) if is_url else mcp_tools(spec))
    return out


def _run(args: argparse.Namespace, tools: list[Any]) -> int:
    from ._errors import AgentError
    from .agent._agent import Agent, RunResult, write_trace
    from .agent._middleware import AuditLog
    from .agent._routing import EmbeddingRouter

    model = _load_model(args)
    resume = args.run_file is not None and Path(args.run_file).exists()
    agent = Agent(
        model,
        tools,
        system=args.system,
        max_steps=args.max_steps,
        constrained=not args.free,
        tool_choice=args.tool_choice,
        parallel_tool_calls=not args.no_parallel,
        max_tokens=args.max_tokens,
        approve=_approver(args.yes),
        thinking=args.thinking,
        reasoning_budget=args.reasoning_budget,
        middleware=[AuditLog(args.audit_log)] if args.audit_log else [],
        router=EmbeddingRouter(args.route) if args.route else None,
    )
    try:
        if resume:
            print(f"continuing the run in {args.run_file}", file=sys.stderr)
            result: RunResult = agent.resume(args.run_file)
            if not args.quiet:
                print(result.answer)
        elif args.quiet:
            result = agent.run(args.question, run_file=args.run_file)
        else:
            result = asyncio.run(_show_run(agent, args.question, args.run_file))
    except AgentError as exc:
        if args.trace:
            write_trace(exc.trace, args.trace)
        raise
    if args.trace:
        result.write_trace(args.trace)
    if args.quiet:
        print(result.answer)
    return 0


async def _show_run(agent: Any, question: str, run_file: str | None = None) -> Any:
    """The run as it happens: reasoning (dimmed) and text as the model writes them, each call
    once whole (→), its result (←), and the answer last."""
    from rich.console import Console

    from .agent._agent import RunDone, StepDone, ToolResult
    from .model._stream import DisguiseCaught, ReasoningDelta, SchemaRepair, TextDelta, ToolCallDone

    console = Console(highlight=False, soft_wrap=True)
    writing = ""  # what the line being written holds: "", "reasoning" or "text"

    def write(text: str, style: str | None = None) -> None:
        console.print(text, style=style, end="", markup=False, emoji=False)
        console.file.flush()

    def end_line() -> None:
        nonlocal writing
        if writing:
            write("\n")
        writing = ""

    async for event in agent.astream(question, run_file=run_file):
        if isinstance(event, ReasoningDelta):
            if writing != "reasoning":
                end_line()
                write("… ", "dim")
                writing = "reasoning"
            write(event.text, "dim")  # the model's thinking, not its answer
        elif isinstance(event, TextDelta):
            if writing != "text":
                end_line()
                writing = "text"
            write(event.text)
        elif isinstance(event, ToolCallDone):
            end_line()
            write(f"→ {event.call.name}({json.dumps(event.call.arguments, ensure_ascii=False)})\n")
        elif isinstance(event, SchemaRepair):
            end_line()
            write(f"! call sent back (repair {event.attempt}): {event.violations[0]}\n")
        elif isinstance(event, DisguiseCaught):
            end_line()
            write(f"! the answer's text held a call to {event.name!r}; decoding again (retry {event.attempt})\n")
        elif isinstance(event, ToolResult):
            write(f"← {event.call.result}\n")
        elif isinstance(event, StepDone) and event.step.error:
            end_line()
            write(f"! step {event.step.step}: {event.step.error}\n")
        elif isinstance(event, RunDone):
            if writing != "text":
                # An answer that streamed nothing (empty) still ends with its line.
                end_line()
                write(event.result.answer)
            writing = "text"
            end_line()
            return event.result
    raise AssertionError("a run ends with RunDone or an error")  # pragma: no cover


def _cmd_render(args: argparse.Namespace) -> int:
    from .backends.scripted import ScriptedBackend
    from .model._model import Model

    tools = _load_tools(args.tools)
    # With only --family, no weights are needed: a backend-less model renders the family's template.
    static = args.family and not args.model
    model = Model(ScriptedBackend([]), family=args.family, template=args.template) if static else _load_model(args)
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": args.question}
    ]
    if args.what in ("both", "prompt"):
        if args.what == "both":
            print(f"### prompt ({model.family.name} family)")
        print(model.render(messages, tools).text, end="" if args.what == "prompt" else "\n")
    if args.what in ("both", "grammar"):
        if args.what == "both":
            print(f"### grammar (GBNF, tool_choice={args.tool_choice})")
        print(model.grammar(tools, args.tool_choice, not args.no_parallel).to_gbnf(), end="")
    return 0


def _cmd_templates(args: argparse.Namespace) -> int:
    from .families._families import families

    if getattr(args, "templates_command", None) == "check":
        return _check_template(args.family, args.against)
    if getattr(args, "templates_command", None) == "derive":
        return _derive_template(args.source, args.name, args.save)
    for fam in families().values():
        aliases = f" (aliases: {', '.join(fam.aliases)})" if fam.aliases else ""
        thinks = f"  reasoning: {fam.reasoning_start}…{fam.reasoning_end}" if fam.reasoning_start else ""
        print(f"{fam.name}{aliases}\n  template: {fam.template}  grammar: {fam.grammar}  "
              f"calls: {fam.call_start}…{fam.call_end or ''}  arguments: {fam.args_syntax}  "
              f"parallel: {'yes' if fam.parallel else 'no'}{thinks}")
    return 0


def _check_template(family_name: str, against: str) -> int:
    from .families._families import get_family
    from .families._template_check import compare_templates, load_template

    family = get_family(family_name)
    results = compare_templates(family.template_source(), load_template(against))
    for r in results:
        what = f"{r.label}, {'with' if r.tools else 'without'} tools"
        if r.error:
            print(f"error      {what}: {r.error}")
            continue
        if r.both_refuse:
            print(f"both refuse {what}: {r.their_error}")
            continue
        at = r.first_difference
        if at is None:
            print(f"identical  {what} ({len(r.ours)} chars)")
            continue
        line = r.ours.count("\n", 0, at) + 1
        print(f"differs    {what}: first at character {at} (line {line})")
        print(f"  {family.name}: {r.ours[max(0, at - 40):at + 40]!r}")
        print(f"  {Path(against).name}: {r.theirs[max(0, at - 40):at + 40]!r}")
    same = sum(r.first_difference is None and not r.error for r in results)
    print(f"{same} of {len(results)} renderings identical (a conversation both templates refuse counts as agreed)")
    return 0 if same == len(results) else 1


def _derive_template(source: str, name: str, save: str | None) -> int:
    import tempfile

    from ._errors import DeriveError, FamilyNotFound
    from .families._choose import choose_family
    from .families._derive import derive, round_trip
    from .families._template_check import load_template

    template = load_template(source)
    try:
        derived = derive(template)
    except DeriveError as exc:
        print(f"cannot derive the call syntax of {Path(source).name}: {exc}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        trip = round_trip(derived.family(Path(save) if save else Path(tmp), name))
    print(f"# {Path(source).name}: call syntax derived from its own renderings")
    for note in derived.notes:
        print(f"# note: {note}")
    print(derived.toml(name), end="")
    print(f"# grammar file {derived.record['grammar']}:")
    print("\n".join(f"#   {line}" for line in derived.grammar.splitlines()[1:]))
    if trip.ok:
        print(f"# round trip: the template's calls parse back and are in the grammar ({trip.turns} turns)")
    else:
        print("# round trip FAILED: " + "; ".join(trip.failures[:3]))
    try:
        _, check = choose_family({"tokenizer.chat_template": template})
        print(f"# as loaded, this model's family is {check}")
    except FamilyNotFound as exc:
        print(f"# as loaded: {exc}")
    if save:
        print(f"# written to {save}: families.toml, {derived.record['template']}, {derived.record['grammar']}")
    return 0 if trip.ok else 1


def _cmd_models(args: argparse.Namespace) -> int:
    from .host._catalog import catalog, pull

    if args.models_command == "list":
        for entry in catalog().values():
            state = str(entry.path) if entry.cached else "not downloaded"
            print(f"{entry.name}\t{entry.family}\t{','.join(entry.backends)}\t{entry.size / 1e6:.0f} MB\t{state}")
        return 0
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    known = catalog().get(args.name)
    if known is not None and known.cached and not args.force:
        print(known.path)
        return 0
    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  transient=True) as bar:
        task = bar.add_task(f"downloading {args.name}", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, description=f"assembling {args.name}", completed=done, total=total)

        path = pull(args.name, force=args.force, progress=progress)
    print(path)
    return 0


def _cmd_engines(args: argparse.Namespace) -> int:
    from .host._catalog import default_model, resolve_model
    from .host._engines import build_llama_server, running_llama_server

    def progress(line: str) -> None:
        print(f"… {line}", file=sys.stderr, flush=True)

    if args.engines_command == "build":
        print(build_llama_server(force=args.force, jobs=args.jobs, progress=progress))
        return 0
    path, _ = resolve_model(args.model or default_model())
    binary = build_llama_server(progress=progress)
    with running_llama_server(path, binary=binary, parallel=args.parallel, n_ctx=args.n_ctx, port=args.port,
                              threads=args.threads) as engine:
        print(f"llama-server on {path.name} at {engine.url} ({args.parallel} slots of {args.n_ctx} tokens); "
              f"use --backend llama-server --engine-url {engine.url}. Ctrl-C stops it.", flush=True)
        engine.process.wait()
        print(f"llama-server exited ({engine.process.returncode}):\n{engine.log_tail()}", file=sys.stderr)
    return 1


def _cmd_doctor(args: argparse.Namespace) -> int:
    from .ops._doctor import diagnose, render

    def progress(step: str) -> None:
        print(f"… {step}", file=sys.stderr, flush=True)

    report = diagnose(backends=args.backend, model=args.model, checksums=not args.no_checksum,
                      generate=not args.no_generate, timeout=args.timeout, progress=progress)
    print(render(report, generate=not args.no_generate))
    return 1 if report.failed else 0


def _bench_peers(args: argparse.Namespace, names: list[str], choices: list[str]) -> tuple[dict[tuple[str, str], Any], list[Any]]:
    from .bench import LlamaCppPythonPeer, Mode, NativePeer, OpenAIPeer, parse_peer
    from .host._catalog import resolve_model

    peers: list[Any] = []
    for spec in args.peer:
        kind, url, model = parse_peer(spec)
        if kind == "openai":
            peers.append(OpenAIPeer(url, model=model))
        else:
            local = NativePeer if kind == "native" else LlamaCppPythonPeer
            peers += [local(resolve_model(name)[0], model=name) for name in names]
    loaded, modes = {}, []
    for peer in peers:
        loaded[peer.model, peer.name] = peer
        for choice in choices:
            if choice in peer.tool_choices:
                modes.append(Mode(peer.model, peer.name, False, choice, peer=True))
            else:
                print(f"note: {peer.name} has no tool_choice {choice!r}; skipped for it", file=sys.stderr)
    return loaded, modes


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


@contextmanager
def _steps(label: str, total: int) -> Iterator[Callable[[str], None]]:
    """Progress for a long run: a bar on a terminal, a plain line a step to a log (a bar drawn
    into a file would show nothing until the end)."""
    if not sys.stderr.isatty():
        done = 0

        def line(description: str) -> None:
            nonlocal done
            done += 1
            print(f"{label} {done}/{total} {description}", file=sys.stderr, flush=True)

        yield line
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda description: bar.update(task, advance=1, description=description)


def _bench_scenarios(args: argparse.Namespace, models: dict[tuple[str, str], Any], modes: list[Any]) -> tuple[list[Any], list[Any]]:
    from .bench import SCENARIOS, run_scenario, summarize_scenarios

    auto = [m for m in modes if m.tool_choice == "auto"]
    results = []
    with _steps("scenarios", len(auto) * len(SCENARIOS)) as step:
        for scenario in SCENARIOS:
            for mode in auto:
                results.append(run_scenario(models[mode.model, mode.backend], mode.label, scenario,
                                            constrained=mode.constrained, max_tokens=args.max_tokens))
                step(f"{mode.label} {scenario.name}")
    return summarize_scenarios(results), results


def _bench_targets(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The --model names and --backend names a bench run covers."""
    from .host._catalog import default_model

    names, backends = args.model or [default_model()], args.backend or ["llama-cpp"]
    engines = [b for b in backends if b in ENGINES]
    if engines and (not args.model or len(args.model) > 1) and not args.peers_only:
        raise UsageError(f"--backend {engines[0]} needs one --model: the model the engine serves (it names the "
                         "family and labels the results; an engine serves one model)")
    return names, backends


def _bench_models(args: argparse.Namespace, names: list[str], backends: list[str]) -> dict[tuple[str, str], Any]:
    from .model._load import load

    models = {(name, backend): load(name, backend=backend, **_engine_options(args, backend)) for name in names
              for backend in backends}
    for model in models.values():
        _set_disguise_retry(model, args)
    return models


def _print_table(table: Any) -> None:
    from rich.console import Console

    console = Console()
    # Piped output would be squeezed to 80 columns; a log file has room for the whole table.
    (console if console.is_terminal else Console(width=200)).print(table)


def _bench_pooled(args: argparse.Namespace) -> int:
    """``bench --pooled``: every case against one pooled tool set, all of it vs routed to the top k."""
    from rich.table import Table

    from .agent._routing import EmbeddingRouter
    from .bench import bfcl_data_dir, load_cases, sample, write_json
    from .bench._pooled import PooledMode, pool_tools, run_pooled, summarize_pooled

    if args.peer or args.peers_only or args.plot or args.scenarios:
        raise UsageError("--pooled runs localtools' own modes only (it counts each prompt's tokens before generating): "
                         "drop --peer, --peers-only, --plot and --scenarios")
    ks = list(dict.fromkeys(args.route_k or [5]))
    for k in ks:
        EmbeddingRouter(k)  # a bad k or a missing routing extra fails now, not after loading the models
    folder = args.data or bfcl_data_dir()
    categories = args.category or ["multiple"]
    every = {category: load_cases(folder, category) for category in categories}
    pool = pool_tools(case for category in categories for case in every[category])
    cases = [c for category in categories for c in sample(every[category], args.sample, args.seed)]
    if args.system:
        cases = [c.with_system(args.system) for c in cases]
    names, backends = _bench_targets(args)
    modes = [PooledMode(name, backend, decoding == "constrained", choice, route_k=k)
             for name in names for backend in backends for choice in args.tool_choice or ["auto"]
             for decoding in args.mode or ["free", "constrained"] for k in [None, *ks]]
    models = _bench_models(args, names, backends)
    with _steps("bench", len(cases) * len(modes)) as step:
        results = run_pooled(models, modes, cases, pool, max_tokens=args.max_tokens,
                             on_result=lambda r: step(f"{r.mode} {r.case_id}"))
    rows = summarize_pooled(results, modes)
    contexts = sorted({str(m.backend.capabilities.n_ctx or "?") for m in models.values()})
    table = Table(title=f"{len(cases)} cases from {', '.join(categories)}, asked against {len(pool)} pooled tools "
                  f"(context {'/'.join(contexts)} tokens, max_tokens {args.max_tokens})")
    for column in ("mode", "offered", "cases", "accuracy", "valid", "expected offered", "prompt tok mean", "max",
                   "over context", "p50 s", "route ms"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for row in rows:
        table.add_row(row["mode"], f"{row['offered_mean']:.0f}", str(row["cases"]), f"{row['accuracy']:.1%}",
                      f"{row['valid_rate']:.1%}", f"{row['expected_offered_rate']:.1%}", f"{row['prompt_tokens_mean']:,.0f}",
                      f"{row['prompt_tokens_max']:,}", str(row["over_context"]), _fmt(row["latency_p50"], ".2f"),
                      _fmt(row["route_ms_mean"], ".0f"))
    _print_table(table)
    for row in rows:
        if "accuracy_vs_all" in row:
            print(f"{row['mode']} vs all tools: accuracy {row['accuracy_vs_all'] * 100:+.1f} points, mean prompt "
                  f"{row['prompt_tokens_ratio_vs_all']:.3f}x the tokens")
    if pool.redefined:
        affected = len({r.case_id for r in results if r.redefined})
        print(f"note: {len(pool.redefined)} tool names are defined differently by later cases; the first definition "
              f"is kept, and {affected} of the {len(cases)} cases expect such a tool")
    if args.json:
        meta = {"data": str(folder), "categories": categories, "sample": args.sample, "seed": args.seed,
                "system": args.system, "max_tokens": args.max_tokens, "modes": [m.label for m in modes],
                "pooled_tools": len(pool), "redefined_tools": pool.redefined, "route_k": ks, "n_ctx": contexts}
        write_json(args.json, rows, list(results), meta)
        print(f"wrote {args.json}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from rich.table import Table

    from .bench import CATEGORIES, Mode, bfcl_data_dir, load_cases, run_bench, sample, summarize, write_json

    if args.pooled:
        return _bench_pooled(args)
    if args.route_k:
        raise UsageError("--route-k applies to --pooled")
    if args.peers_only and not args.peer:
        raise UsageError("--peers-only needs at least one --peer")
    if args.plot:
        from .bench._plot import plot_summary, pyplot

        pyplot()  # a missing matplotlib fails now, not after the run
    folder = args.data or bfcl_data_dir()
    categories = args.category or list(CATEGORIES)
    cases = [c for cat in categories for c in sample(load_cases(folder, cat), args.sample, args.seed)]
    if args.system:
        cases = [c.with_system(args.system) for c in cases]
    names, backends = _bench_targets(args)
    choices = args.tool_choice or ["auto"]
    modes = [] if args.peers_only else [
        Mode(name, backend, decoding == "constrained", choice)
        for name in names for backend in backends
        for choice in choices for decoding in (args.mode or ["free", "constrained"])]
    models: dict[tuple[str, str], Any] = {} if args.peers_only else _bench_models(args, names, backends)
    peers, peer_modes = _bench_peers(args, names, choices)
    models.update(peers)
    modes += peer_modes
    with _steps("bench", len(cases) * len(modes)) as step:
        results = run_bench(models, modes, cases, max_tokens=args.max_tokens,
                            on_result=lambda r: step(f"{r.mode} {r.case_id}"))
    rows = summarize(results, modes)
    scenario_rows, scenario_results = _bench_scenarios(args, models, modes) if args.scenarios else ([], [])
    table = Table(title=f"{len(cases)} cases from {folder}")
    for column in ("mode", "category", "cases", "accuracy", "valid", "disguised", "caught", "repaired", "refused",
                   "p50 s", "p95 s", "ttft s", "tok/s", "grammar ratio"):
        table.add_column(column, justify="left" if column in ("mode", "category") else "right")
    for row in rows:
        table.add_row(row["mode"], row["category"], str(row["cases"]), f"{row['accuracy']:.1%}", f"{row['valid_rate']:.1%}",
                      str(row["disguised_calls"]), str(row["disguises_caught"]), str(row["calls_repaired"]),
                      str(row["calls_refused"]),
                      _fmt(row["latency_p50"], ".2f"), _fmt(row["latency_p95"], ".2f"), _fmt(row["ttft_p50"], ".2f"),
                      _fmt(row["generated_tokens_per_s"], ".1f"), _fmt(row.get("grammar_overhead_ratio"), ".2f"))
    _print_table(table)
    if scenario_rows:
        scenarios = Table(title="multi-turn scenarios (auto modes)")
        for column in ("mode", "scenarios", "answered", "called once", "mean steps"):
            scenarios.add_column(column, justify="left" if column == "mode" else "right")
        for srow in scenario_rows:
            scenarios.add_row(srow["mode"], str(srow["scenarios"]), f"{srow['answer_rate']:.0%}",
                              f"{srow['called_once_rate']:.0%}", f"{srow['mean_steps']:.1f}")
        _print_table(scenarios)
    if args.json:
        meta = {"data": str(folder), "categories": categories, "sample": args.sample, "seed": args.seed,
                "system": args.system, "max_tokens": args.max_tokens, "modes": [m.label for m in modes]}
        write_json(args.json, rows, results, meta, scenarios=(scenario_rows, scenario_results))
        print(f"wrote {args.json}")
    if args.plot:
        plot_summary(rows, args.plot, title=f"{len(cases)} BFCL-format cases, {args.sample} per category")
        print(f"wrote {args.plot}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from .host._catalog import default_model
    from .serve import ServerConfig, create_app, serve

    model = _load_model(args)
    # Behind an engine with no --model, the model is the one the engine serves.
    served = model.name if model.backend.capabilities.remote else default_model()
    name = args.name or Path(args.model or served).name.removesuffix(".gguf")
    config = ServerConfig(model_name=name, max_queue=args.queue, concurrency=args.concurrency,
                          default_max_tokens=args.max_tokens,
                          default_temperature=args.temperature, max_body_bytes=args.max_body_bytes,
                          api_key=args.api_key or None)
    create_app(model, config)  # a missing starlette fails here, before the socket opens

    def ready(url: str) -> None:
        print(f"serving {name} ({model.family.name} family, {model.backend.name}) at {url}", flush=True)

    serve(model, config, host=args.host, port=args.port, on_ready=ready)
    return 0


def _schema_specs(item: str) -> list[dict[str, Any]]:
    """Tool specs from ``item``: a JSON file (a spec, a list of specs, or a bare parameters schema)
    or ``MODULE:ATTR`` as ``--tools`` takes it."""
    if item.endswith(".json"):
        path = Path(item)
        if not path.is_file():
            raise UsageError(f"no file {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise UsageError(f"{path} is not JSON: {exc}") from None
        items = data if isinstance(data, list) else [data]
        out = []
        for i, spec in enumerate(items):
            if not isinstance(spec, dict):
                raise UsageError(f"{path}: item {i} is not an object")
            if "function" in spec or "parameters" in spec:
                fn = spec.get("function", spec)
                out.append({"type": "function", "function": {"name": fn.get("name", f"{path.stem}-{i}"),
                                                             "parameters": fn.get("parameters") or {}}})
            else:
                out.append({"type": "function", "function": {"name": path.stem, "parameters": spec}})
        return out
    return [t.spec() for t in _load_tools([item])]


def _cmd_schema(args: argparse.Namespace) -> int:
    from .grammar import Enforcement, schema_report

    status = 0
    for item in args.tools:
        for spec in _schema_specs(item):
            fn = spec["function"]
            print(f"tool {fn['name']}")
            try:
                report = schema_report(fn.get("parameters") or {})
            except UnsupportedSchema as exc:
                print(f"  refused: {exc}")
                status = 1
                continue
            labels = [f"{e.path or '/'} {e.keyword}" for e in report]
            width = max(map(len, labels), default=0)
            for label, entry in zip(labels, report, strict=True):
                print(f"  {label:<{width}}  {entry.enforcement.value}")
            if args.strict and any(e.enforcement is Enforcement.UNSUPPORTED for e in report):
                status = 1
    return status


def main(argv: list[str] | None = None) -> int:
    """The ``localtools`` command; returns its exit status."""
    args = _build_parser().parse_args(argv)
    handlers = {"run": _cmd_run, "render": _cmd_render, "templates": _cmd_templates, "models": _cmd_models,
                "bench": _cmd_bench, "serve": _cmd_serve, "doctor": _cmd_doctor, "engines": _cmd_engines,
                "schema": _cmd_schema}
    try:
        return handlers[args.command](args)
    except LocalToolsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
