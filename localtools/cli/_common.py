"""What the commands share: loading tools and the model from their options, the model and tool options, progress."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._errors import UsageError
from ..backends import BACKENDS, ENGINES


def backend_name(value: str) -> str:
    """A backend or engine name, or ``MODULE:CLASS`` for a backend of your own (as ``load()`` takes)."""
    if value in BACKENDS or value in ENGINES or ":" in value:
        return value
    raise argparse.ArgumentTypeError(f"unknown backend {value!r}; one of {', '.join([*BACKENDS, *ENGINES])}, "
                                     "or MODULE:CLASS for a backend of your own")


def load_tools(specs: list[str]) -> list[Any]:
    """``module:attr`` or ``path/to/file.py:attr``; attr is a tool, a callable or a list of them."""
    from ..tools._tools import as_tool

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


def model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", "-m", help="catalog name (see 'localtools models list') or a .gguf path; "
                   "default: the first catalog model")
    p.add_argument("--backend", default="llama-cpp", type=backend_name, metavar="BACKEND",
                   help=f"inference backend: {', '.join([*BACKENDS, *ENGINES])} or MODULE:CLASS (default: llama-cpp); "
                   "'localtools models list' says which a model runs on. "
                   "llama-server, vllm, sglang: a running engine at --engine-url runs the tokens (it holds the weights; "
                   "--model then only names the family, and for vllm/sglang the tokenizer)")
    p.add_argument("--family", help="model family, overriding detection (see 'localtools templates')")
    p.add_argument("--template", help="'model' to use the GGUF's own chat template, or a Jinja file")
    p.add_argument("--n-gpu-layers", type=int, help="llama-cpp: layers to offload to the GPU (-1: all; needs a CUDA build)")
    p.add_argument("--n-ctx", type=int, help="llama-cpp: context size in tokens, kept as given (default: 4096, grown as a prompt needs, "
                   "up to the length the model was trained for and within free memory)")
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
    decide = p.add_mutually_exclusive_group()
    decide.add_argument("--calibrated", action="store_true",
                        help="decide call or text, list or single calls and another call on the thresholds "
                        "`localtools calibrate` wrote for this model (default: the catalog's thresholds for a catalog "
                        "model, greedy for others; docs/decisions.md)")
    decide.add_argument("--greedy", action="store_true",
                        help="settle every choice the grammar leaves (call or text, list or single calls, another "
                        "call) by the greedy token, instead of the catalog's thresholds for the model")
    engine_args(p)


def engine_args(p: argparse.ArgumentParser) -> None:
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


def tool_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tools", "-t", action="append", default=[], metavar="MODULE:ATTR",
                   help="tools to offer: a tool, callable or list of them; repeatable; a .py path works as module")
    p.add_argument("--tool-choice", default="auto", metavar="auto|required|none|NAME",
                   help="auto: answer or call; required: must call; none: must not; NAME: must call that tool")
    p.add_argument("--no-parallel", action="store_true", help="at most one call per turn")


def engine_options(args: argparse.Namespace, backend: str) -> dict[str, Any]:
    """The engine options given on the command line, for an engine backend (``{}`` for others)."""

    if backend not in ENGINES:
        given = [f"--{k.replace('_', '-')}" for k in ("engine_url", "engine_api_key", "engine_timeout", "tokenizer",
                                                     "served_model") if getattr(args, k, None) is not None]
        if given and not any(b in ENGINES for b in backends(args)):
            raise UsageError(f"{', '.join(given)} only apply to an engine backend (--backend {' | '.join(ENGINES)})")
        return {}
    if not args.engine_url:
        raise UsageError(f"--backend {backend} needs --engine-url URL (where the engine listens, e.g. http://127.0.0.1:8080)")
    options = {"url": args.engine_url, "api_key": args.engine_api_key, "timeout": args.engine_timeout,
               "tokenizer": args.tokenizer, "served_model": args.served_model}
    # Each engine rejects what it does not take (llama-server tokenizes itself and serves one model).
    return {k: v for k, v in options.items() if v is not None}


def backends(args: argparse.Namespace) -> list[str]:
    backend = getattr(args, "backend", None) or ["llama-cpp"]
    return backend if isinstance(backend, list) else [backend]


def load_model(args: argparse.Namespace) -> Any:
    from ..model._load import load

    # Only the options given on the command line; each backend rejects those it does not take.
    given = {"n_gpu_layers": args.n_gpu_layers, "n_ctx": args.n_ctx, "extra_buffers": args.extra_buffers,
             "device": args.device, "dtype": args.dtype, "engine": args.engine, "mask": args.mask,
             "fast_forward": args.fast_forward}
    options = {k: v for k, v in given.items() if v is not None} | engine_options(args, args.backend)
    if getattr(args, "calibrated", False):
        options["decisions"] = "calibrated"
    elif getattr(args, "greedy", False):
        options["decisions"] = "greedy"
    elif getattr(args, "decisions", None) is not None:
        options["decisions"] = args.decisions  # serve --decisions: a profile name load() reads
    model = load(args.model, backend=args.backend, family=args.family, template=args.template, **options)
    model.strict_schema = bool(getattr(args, "strict_schema", False))
    set_disguise_retry(model, args)
    return model


def set_disguise_retry(model: Any, args: argparse.Namespace) -> None:
    from ..families._reply import DisguiseRetry

    if getattr(args, "disguise_retry", None):
        model.disguise_retry = DisguiseRetry(args.disguise_retry)


def fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


@contextmanager
def steps(label: str, total: int) -> Iterator[Callable[[str], None]]:
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


def print_table(table: Any) -> None:
    from rich.console import Console

    console = Console()
    # Piped output would be squeezed to 80 columns; a log file has room for the whole table.
    (console if console.is_terminal else Console(width=200)).print(table)
