"""``localtools render``: print the exact prompt and grammar a model would get."""

from __future__ import annotations

import argparse
from typing import Any

from . import _common


def add_parser(sub: Any) -> None:
    render = sub.add_parser("render", help="print the exact prompt and grammar a model would get",
                            description="Render QUESTION with the tools as the model would see it, then the grammar.")
    render.add_argument("question")
    _common.model_args(render)
    _common.tool_args(render)
    render.add_argument("--system", help="system prompt")
    render.add_argument("--what", choices=["both", "prompt", "grammar"], default="both")


def main(args: argparse.Namespace) -> int:
    from ..backends.scripted import ScriptedBackend
    from ..model._model import Model

    tools = _common.load_tools(args.tools)
    # With only --family, no weights are needed: a backend-less model renders the family's template.
    static = args.family and not args.model
    model = Model(ScriptedBackend([]), family=args.family, template=args.template) if static else _common.load_model(args)
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
