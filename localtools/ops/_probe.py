"""Does a backend generate on this machine? Asked in a child process, so a native crash is an answer, not our death.

``probe(backend, model)`` starts ``python -m localtools.ops._probe`` with the request as JSON. The child
loads the model, renders a multi-token prompt (one token is not enough: llama.cpp's AMX crash needs
more), generates free and under a tool grammar, and prints one JSON line. The parent turns the
child's exit into ``ok``, ``crashed`` (with the signal), ``error`` (a typed error's text) or
``timeout``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["ProbeResult", "ProbeStatus", "build_info", "probe"]

QUESTION = "What is the weather like in Paris today? Please answer in one short sentence."
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
#: Enough tokens to run several decode steps after a multi-token prompt, few enough to be quick.
MAX_TOKENS = 12


class ProbeStatus(StrEnum):
    """How a probe's child process ended."""

    OK = "ok"
    #: Killed by a signal (a native crash: SIGILL, SIGSEGV).
    CRASHED = "crashed"
    #: It exited with an error it could report.
    ERROR = "error"
    TIMEOUT = "timeout"


@dataclass
class ProbeResult:
    backend: str
    model: str
    options: dict[str, Any]
    status: ProbeStatus
    detail: str = ""
    #: The signal's name when the child crashed, e.g. "SIGSEGV".
    signal: str | None = None
    #: What the child measured when it worked: prompt and generated tokens, seconds, the text.
    measured: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is ProbeStatus.OK

    def describe(self) -> str:
        if self.status is ProbeStatus.OK:
            m = self.measured
            return (f"ok: {m.get('prompt_tokens')}-token prompt, {m.get('tokens')} tokens free and under a grammar "
                    f"in {m.get('seconds', 0):.1f} s")
        if self.status is ProbeStatus.CRASHED:
            return f"crashed: the child process died of {self.signal}" + (
                f" (its last line on stderr: {self.detail})" if self.detail else "")
        return f"{self.status}: {self.detail}"


def probe(backend: str, model: str, options: dict[str, Any] | None = None, *, timeout: float = 600) -> ProbeResult:
    """Run one short generation of ``model`` on ``backend`` in a child process and say how it went."""
    options = dict(options or {})
    result = ProbeResult(backend, model, options, ProbeStatus.ERROR)
    code, answer, stderr = _run_child({"backend": backend, "model": model, "options": options}, timeout)
    if code is None:
        result.status, result.detail = ProbeStatus.TIMEOUT, f"no answer within {timeout:.0f} s"
    elif code < 0:
        result.status, result.signal, result.detail = ProbeStatus.CRASHED, _signal_name(-code), _last_line(stderr)
    elif code == 0 and answer.get("ok"):
        result.status, result.measured = ProbeStatus.OK, answer
    else:
        result.detail = answer.get("error") or _last_line(stderr) or f"exit code {code}"
    return result


def build_info(backend: str, *, timeout: float = 120) -> dict[str, str]:
    """The backend's own account of its build (``build_info()``), read in a child process.

    Importing a native library built for another CPU can itself crash; then the answer says so.
    """
    code, answer, stderr = _run_child({"backend": backend, "info": True}, timeout)
    if code is None:
        return {"error": f"no answer within {timeout:.0f} s"}
    if code < 0:
        return {"error": f"reading the build info crashed the child process ({_signal_name(-code)})"}
    if "info" in answer:
        return dict(answer["info"])
    return {"error": answer.get("error") or _last_line(stderr) or "no answer"}


def _run_child(request: dict[str, Any], timeout: float) -> tuple[int | None, dict[str, Any], str]:
    """(exit code or None on timeout, the child's JSON answer or {}, its stderr)."""
    try:
        # -P: the child imports localtools as the parent does, not from whatever the working directory holds.
        child = subprocess.run([sys.executable, "-P", "-m", "localtools.ops._probe", json.dumps(request)], capture_output=True,
                               text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, {}, ""
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    try:
        answer = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        answer = {}
    return child.returncode, answer, child.stderr


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


def _child(request: dict[str, Any]) -> dict[str, Any]:
    from ..backends import backend_class
    from ..model._load import load

    if request.get("info"):
        read = getattr(backend_class(request["backend"]), "build_info", dict)
        return {"ok": True, "info": read()}

    started = time.perf_counter()
    model = load(request["model"], backend=request["backend"], download=False, **request["options"])
    messages = [{"role": "user", "content": QUESTION}]
    prompt = model.render(messages, [TOOL])
    free = model.backend.generate(prompt, max_tokens=MAX_TOKENS)
    constrained = model.backend.generate(prompt, grammar=model.grammar([TOOL], "required"), max_tokens=MAX_TOKENS)
    return {"ok": True, "prompt_tokens": free.prompt_tokens, "tokens": len(free.tokens) + len(constrained.tokens),
            "seconds": time.perf_counter() - started, "text": constrained.text}


def main(argv: list[str] | None = None) -> int:
    from .._errors import LocalToolsError

    args = sys.argv[1:] if argv is None else argv
    try:
        answer = _child(json.loads(args[0]))
    except LocalToolsError as exc:
        answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # a probe reports whatever stopped the backend, whatever its type
        answer = {"ok": False, "error": f"{type(exc).__module__}.{type(exc).__name__}: {exc}"}
    print(json.dumps(answer), flush=True)
    return 0 if answer["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
