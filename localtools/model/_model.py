"""A model: a backend plus the family that says how to prompt it and read its replies."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache, wraps
from pathlib import Path
from typing import Any, TypeVar

from .._errors import (
    DisguisedCall,
    LocalToolsError,
    SchemaViolation,
    TemplateError,
    ToolCallParseError,
    UnsupportedSchema,
    UsageError,
)
from ..backends._base import Backend, Generation, Parting, first_stop, next_token_source
from ..families._choose import FamilyCheck, choose_family
from ..families._families import Family
from ..families._parse import ToolCall, call_key, first_disguise, not_json
from ..families._prompt import Prompt, render, with_system
from ..families._reply import DisguiseRetry, ReplyFormat, reasoning_mode, reply_format
from ..grammar import Grammar, KeywordEnforcement, build_grammar, unsupported
from ..grammar._check import Violation, violations
from ..tools._tools import Tool
from ._decide import (
    CopyBias,
    Decision,
    DecisionPoint,
    Decisions,
    biased,
    said,
    shaped,
)
from ._history import answered_calls, failed_calls
from ._stream import (
    ANSWER,
    DisguiseCaught,
    ReasoningDelta,
    ReplyStream,
    SchemaRepair,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    TurnCheck,
    TurnDone,
)
from ._turn import ChatResult
from .policies import Turn, redecode, settle

__all__ = ["ChatResult", "Model", "ToolChoice"]

ToolChoice = str  # "auto" | "required" | "none" | a tool name
#: Template variables render sets itself, and its own parameters.
_RESERVED_VARIABLES = frozenset({"messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "source",
                                 "object_arguments"})


def _specs(tools: Sequence[Tool | dict[str, Any]]) -> list[dict[str, Any]]:
    return [t.spec() if isinstance(t, Tool) else t for t in tools]


def _refuse_unenforced(spec: dict[str, Any]) -> None:
    fn = spec["function"]
    for entry in _unenforced(json.dumps(fn.get("parameters") or {}, sort_keys=True)):
        raise UnsupportedSchema(f"tool {fn['name']!r}: {entry.path or '/'} {entry.keyword!r} is enforced by neither the "
                                "grammar nor the check (strict_schema)", keyword=entry.keyword, path=entry.path)


@lru_cache(maxsize=256)
def _unenforced(parameters_json: str) -> tuple[KeywordEnforcement, ...]:
    return tuple(unsupported(json.loads(parameters_json)))


#: The violation keyword of a call that repeats one the conversation already answered.
REPEAT = "repeat"


def _violation_text(found: list[Violation]) -> str:
    """A rejected turn's result for one of its calls, as the model reads it: what was wrong, where."""
    if not found:
        return "not run: another call of this turn broke its tool's schema. Call again."
    if any(v.keyword == REPEAT for v in found):
        return ("not run: this exact call was already made, and its result is above. Use that result to answer, "
                "or make a different call.")
    wrong = "; ".join(f"{v.pointer or 'the arguments'}: {v.message}" for v in found)
    return f"error: these arguments break the tool's schema ({wrong}). Call it again with arguments that fit it."


def _answer_violation_text(found: list[Violation]) -> str:
    """What a structured answer that broke its schema is told, as the user's next message."""
    wrong = "; ".join(f"{v.pointer or 'the answer'}: {v.message}" for v in found)
    return f"That answer does not fit the required JSON schema ({wrong}). Answer again with JSON that fits it."


def _question(messages: list[dict[str, Any]]) -> str:
    """The text of the last user message (what a result hint's ``{question}`` stands for)."""
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def _decodes_again(decisions: Decisions | None, reads: bool) -> bool:
    """Whether ``decisions`` may decode a turn again after its first reply: ``samples`` on any
    backend; ``more``, ``form``, ``guess``, ``fit``, ``held``, ``option``, ``cover`` where the
    backend gives its distribution (``reads``). Such a turn is decided whole."""
    if decisions is None:
        return False
    return decisions.samples > 1 or (reads and (
        decisions.more is not None or decisions.form is not None or decisions.guess is not None or
        decisions.fit is not None or decisions.held or decisions.option or decisions.cover))


def _replay(result: ChatResult, on_event: Callable[[StreamEvent], None]) -> None:
    """A decided turn's events, as a stream of it sends them: its reasoning, its text, each call."""
    if result.reasoning:
        on_event(ReasoningDelta(result.reasoning))
    if result.content:
        on_event(TextDelta(result.content))
    for index, call in enumerate(result.tool_calls):
        on_event(ToolCallStarted(index, call.id, call.name))
        on_event(ToolCallDelta(index, json.dumps(call.arguments, ensure_ascii=False)))
        on_event(ToolCallDone(index, call))


def _answer_prompt_seconds(run: _Decoding, gen: Generation, first: Generation | None) -> float:
    """The turn's prompt time: the thought's, and its answer's first generation's."""
    times = run.prompt_seconds or [gen.prompt_seconds]
    if first is None:
        return times[0]
    return first.prompt_seconds + (times[1] if len(times) > 1 else gen.prompt_seconds)


class _Decoding:
    """One turn's generations on a backend: the options they share, what they add up to, and the
    stream their text goes out on."""

    def __init__(self, backend: Backend, live: ReplyStream | None, cancel: Callable[[], bool] | None, *,
                 temperature: float, top_p: float, seed: int | None) -> None:
        self.backend, self.live, self.started = backend, live, time.perf_counter()
        # Passed only when set, so a backend written before the option still serves everything else.
        self._extra: dict[str, Any] = {"cancel": cancel} if cancel is not None else {}
        if live is not None:
            self._extra["on_text"] = live.feed
        self._sampling: dict[str, Any] = {"temperature": temperature, "top_p": top_p, "seed": seed}
        self.attempts = self.completion_tokens = 0
        self.decode_seconds = 0.0
        #: Each generation's prompt time, in order: the first is the turn's time to its first token.
        self.prompt_seconds: list[float] = []
        #: A reasoning budget's generation of the thought, when there was one.
        self.first: Generation | None = None
        #: Bonuses for a greedy answer under a grammar (the copy decision), where the backend takes them.
        self.bias: CopyBias | None = None
        #: A generation the bonuses changed, by its text: what it was asked, to decode it again without them.
        self._biased: dict[str, tuple[Prompt, dict[str, Any]]] = {}

    @property
    def streamed(self) -> bool:
        """A client was sent part of this turn: it is not generated again."""
        return self.live is not None and self.live.sent

    def generate(self, prompt: Prompt, *, grammar: Grammar | None, max_tokens: int, stop: list[str],
                 repeat_penalty: float, sampling: Mapping[str, Any] | None = None,
                 reply: Sequence[int] = (), parting: Parting | None = None) -> Generation:
        """One generation; ``sampling`` (temperature, top_p, seed) replaces the request's; ``reply``:
        tokens of an earlier reply to go on from, where the backend can (else it starts again);
        ``parting``: where the backend can, it stops there (``Generation.parted``)."""
        can = self.backend.capabilities
        extra: dict[str, Any] = {"reply": list(reply)} if reply and can.continues else {}
        if parting is not None and can.parts and can.continues:
            extra["parting"] = parting
        if self.bias is not None and grammar is not None:
            extra["bias"] = self.bias
        asked: dict[str, Any] = dict(grammar=grammar, max_tokens=max_tokens, stop=stop, repeat_penalty=repeat_penalty,
                                     **(sampling or self._sampling), **extra)
        gen = self.backend.generate(prompt, **asked, **self._extra)
        if gen.biased:
            self._biased[gen.text] = (prompt, asked)
        self.attempts += 1
        self.completion_tokens += gen.generated
        self.decode_seconds += gen.decode_seconds
        self.prompt_seconds.append(gen.prompt_seconds)
        return gen

    def unbiased(self, gen: Generation) -> Generation | None:
        """``gen`` decoded again without the bonuses, where they changed a pick of it (the value
        before, for the record; never streamed); ``None`` where they changed none."""
        if not gen.biased or gen.text not in self._biased:
            return None
        prompt, asked = self._biased[gen.text]
        asked = {k: v for k, v in asked.items() if k != "bias"}
        cancel = {"cancel": self._extra["cancel"]} if "cancel" in self._extra else {}
        plain = self.backend.generate(prompt, **asked, **cancel)
        self.attempts += 1
        self.completion_tokens += plain.generated
        self.decode_seconds += plain.decode_seconds
        return plain


_Chat = TypeVar("_Chat", bound=Callable[..., Any])


def _nesting_typed(chat: _Chat) -> _Chat:
    """A reply nested past what Python's parsers read (only a recursive schema admits one: the
    grammar bounds a free value) is a ``ToolCallParseError``, never a ``RecursionError``."""
    @wraps(chat)
    def typed(*args: Any, **kwargs: Any) -> Any:
        try:
            return chat(*args, **kwargs)
        except RecursionError:
            raise ToolCallParseError("the reply nests arrays and objects deeper than the parser reads; no call was "
                                     "read from it", "") from None
    return typed  # type: ignore[return-value]


class Model:
    """Renders prompts, builds grammars and parses replies for one backend.

    ``family``: a family name (see ``localtools templates``) or ``None`` to pick it from the GGUF
    metadata. ``template``: ``None`` for the family's template, ``"model"`` for the GGUF's own chat
    template (it must accept ``tools``), or a Jinja source string / path.
    """

    def __init__(self, backend: Backend, *, family: str | Family | None = None, template: str | Path | None = None,
                 strict_schema: bool = False, disguise_retry: DisguiseRetry = DisguiseRetry.BAR,
                 decisions: Decisions | None = None):
        self.backend = backend
        #: How ``chat`` decides where the grammar allows a choice, unless it is told (``Decisions``;
        #: ``None``: the greedy token decides).
        self.decisions = decisions
        #: How ``chat`` decodes a turn again whose text answer reads as a call, unless it is told.
        self.disguise_retry = disguise_retry
        #: Refuse a tool (``UnsupportedSchema``) whose schema holds a keyword neither the grammar
        #: nor the check enforces (an unknown keyword or format), instead of ignoring it.
        self.strict_schema = strict_schema
        self.family, check = choose_family(backend.metadata, family or None)
        #: How the family was chosen, checked against the model's own chat template.
        self.family_check: FamilyCheck = check
        self.template_source = self._template(template)

    def _template(self, template: str | Path | None) -> str:
        if template is None:
            return self.family.template_source()
        if template == "model":
            source = self.backend.metadata.get("tokenizer.chat_template")
            if not source:
                raise TemplateError("this model file has no chat template; use its family's template (template=None)")
            if "tools" not in source:
                raise TemplateError(
                    f"this model's own chat template ignores tools; use the {self.family.name!r} family template"
                )
            return str(source)
        path = Path(template)
        if "{" not in str(template) and path.is_file():
            return path.read_text(encoding="utf-8")
        return str(template)

    @property
    def name(self) -> str:
        return str(self.backend.metadata.get("general.name") or self.backend.name)

    def render(
        self,
        messages: list[dict[str, Any]],
        tools: Sequence[Tool | dict[str, Any]] = (),
        *,
        add_generation_prompt: bool = True,
        parallel_tool_calls: bool = True,
        tool_choice: ToolChoice = "auto",
        thinking: bool | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> Prompt:
        """The prompt for ``messages``: with tools, the family's ``parallel_hint`` goes first in
        the system message unless at most one call may follow, and after tool results the prompt
        ends with its ``result_hint`` (its ``error_hint`` where it has one and every result of the
        last calls is an error: ``failed_calls``). Both stay out of ``messages``; the prefix stays the same
        from turn to turn, so a backend's prompt cache keeps working. ``thinking`` is passed to the
        template as ``enable_thinking`` (templates that do not read it ignore it), with any other
        ``template_kwargs``."""
        specs = _specs(tools)
        variables = dict(template_kwargs or {})
        if reserved := sorted(set(variables) & _RESERVED_VARIABLES):
            raise UsageError(f"template_kwargs may not set {', '.join(reserved)}: render sets them")
        if thinking is not None:
            variables["enable_thinking"] = thinking
        fam = self.family
        if specs and parallel_tool_calls and fam.parallel and fam.parallel_hint and tool_choice != "none":
            messages = with_system(messages, fam.parallel_hint)
        if specs and messages and messages[-1].get("role") == "tool":
            hint = fam.error_hint if fam.error_hint and failed_calls(messages) else fam.result_hint
            if hint:
                messages = [*messages, {"role": "user", "content": hint.replace("{question}", _question(messages))}]
        return render(
            self.template_source,
            messages,
            specs,
            add_generation_prompt=add_generation_prompt,
            **{"bos_token": self.backend.bos_token, "eos_token": self.backend.eos_token, **variables},
        )

    def grammar(
        self, tools: Sequence[Tool | dict[str, Any]], tool_choice: ToolChoice = "auto", parallel_tool_calls: bool = True
    ) -> Grammar:
        return build_grammar(self.family, _specs(tools), tool_choice, parallel_tool_calls)

    def reply_format(
        self,
        tools: Sequence[Tool | dict[str, Any]],
        tool_choice: ToolChoice = "auto",
        parallel_tool_calls: bool = True,
        *,
        constrained: bool = True,
        stop: Sequence[str] = (),
        reasoning: str = "",
        answer_schema: Mapping[str, Any] | None = None,
        calls: tuple[int, int] | None = None,
        forms: tuple[str, ...] | None = None,
    ) -> ReplyFormat:
        """What a reply may be for this request: the grammar, the stop strings, how calls open;
        ``calls``: (least, most) calls in a reply with calls; ``forms``: the call forms admitted
        (``None``: the family's ``call_forms``)."""
        specs = _specs(tools)
        if self.strict_schema:
            for spec in specs:
                _refuse_unenforced(spec)
            if answer_schema is not None:
                _refuse_unenforced({"function": {"name": ANSWER, "parameters": answer_schema}})
        family = self.family if forms is None else replace(self.family, call_forms=forms)
        return reply_format(family, specs, tool_choice, parallel_tool_calls, constrained=constrained, stop=stop,
                            reasoning=reasoning, answer_schema=answer_schema, calls=calls)

    @_nesting_typed
    def chat(
        self,
        messages: list[dict[str, Any]],
        tools: Sequence[Tool | dict[str, Any]] = (),
        *,
        tool_choice: ToolChoice = "auto",
        parallel_tool_calls: bool = True,
        constrained: bool = True,
        max_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        repeat_penalty: float = 1.0,
        retry_repeat_penalties: Sequence[float] = (1.1, 1.3),
        cancel: Callable[[], bool] | None = None,
        thinking: bool | None = None,
        reasoning_budget: int | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
        on_event: Callable[[StreamEvent], None] | None = None,
        schema_retries: int = 2,
        disguise_retries: int = 2,
        disguise_retry: DisguiseRetry | None = None,
        answer_schema: Mapping[str, Any] | None = None,
        repeat_calls: bool = False,
        decisions: Decisions | None = None,
    ) -> ChatResult:
        """One assistant turn: render, generate (under the grammar unless ``constrained=False``), parse.

        ``repeat_penalty`` penalises tokens this reply already produced (never the prompt, so copying
        argument values from the question is not penalised). When ``max_tokens`` cuts a call, the
        model was almost always looping or rambling (a repeated array item, sentence or call under
        greedy decoding), so the turn is generated again with each of ``retry_repeat_penalties``
        in turn until one ends (``()`` disables the retries). ``stop`` strings end a text answer
        (left out of it, as OpenAI does); they never cut a call. Raises ``GenerationTruncated`` when
        ``max_tokens`` still cuts a call, ``ToolCallParseError`` when free output holds a call that
        does not parse. ``cancel`` is asked between tokens; once it answers True generation stops
        with ``GenerationCancelled``. ``on_event``, when given, is called with the turn's events
        while it is generated (see ``stream``).

        Thinking families reason first, freely, then answer under the grammar. ``thinking``
        turns it on or off (``None``: the template's default); ``reasoning_budget`` caps it in
        tokens (within ``max_tokens``): the thought is generated first, closed with the end tag if
        still open, and the answer is generated after it (a second generation, counted in
        ``attempts``).

        Every constrained call is checked against its tool's schema before it leaves (``jsonschema``,
        draft 2020-12, formats asserted): the grammar enforces what it can express, the check the rest.
        A call that breaks its schema is sent back to the model with the violation as its result,
        up to ``schema_retries`` times (counted in ``schema_repairs``; a streamed turn announces each
        with a ``SchemaRepair`` event); then ``SchemaViolation`` names the tool, the JSON pointer and
        the keyword.

        Under ``tool_choice="auto"`` a text answer that reads as a call (a call object in any
        spelling, anywhere in it: ``disguised_calls``) is no answer: the turn is decoded again, up to
        ``disguise_retries`` times (counted in ``disguise_retries`` of the result; a stream announces
        each with ``DisguiseCaught``), as ``disguise_retry`` says (``DisguiseRetry``; ``None``: the
        model's ``disguise_retry``); then
        ``DisguisedCall`` is raised. Such text is never streamed.

        ``answer_schema`` (a JSON schema; OpenAI's ``response_format`` ``json_schema``) asks for a
        structured answer: the answer that is no call is one JSON value under it, decoded under
        the schema's grammar and checked as a call's arguments are (repaired up to
        ``schema_retries`` times, the violations told to the model; then ``SchemaViolation``). A
        stream sends its text once it passes.

        A call identical (name and arguments) to one the conversation already made and answered
        is not made again: it is checked like a schema (keyword ``repeat``), and the model is told
        to use the result it has, answer, or make another call (``repeat_calls=True`` allows it,
        for a tool one polls).

        ``decisions`` (``None``: the model's ``decisions``) makes the choices the grammar leaves
        open (call or text, another call or the end, a repeated call) on the model's probabilities
        against calibrated thresholds instead of its greedy token; ``ChatResult.decisions`` says
        what was decided and on what share.
        """
        if schema_retries < 0 or disguise_retries < 0:
            raise UsageError(f"schema_retries and disguise_retries must be 0 or more, got {schema_retries} and "
                             f"{disguise_retries}")
        disguise_retry = self.disguise_retry if disguise_retry is None else disguise_retry
        if not isinstance(disguise_retry, DisguiseRetry):
            raise UsageError(f"disguise_retry must be a DisguiseRetry, got {disguise_retry!r}")
        options: dict[str, Any] = dict(
            tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls, constrained=constrained,
            max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed, stop=stop,
            repeat_penalty=repeat_penalty, retry_repeat_penalties=retry_repeat_penalties, cancel=cancel,
            thinking=thinking, reasoning_budget=reasoning_budget, template_kwargs=template_kwargs, on_event=on_event,
            answer_schema=answer_schema, decisions=self.decisions if decisions is None else decisions)
        specs = _specs(tools)
        # Levers that decode a turn again (another call, its form, a refused guess, a vote) decide on
        # the whole reply: a stream sends such a turn once it is decided, so that a request decides
        # the same way streamed or not. Repairs are announced as they happen.
        whole_turn = on_event is not None and constrained and bool(specs) and tool_choice != "none" and \
            _decodes_again(options["decisions"], next_token_source(self.backend) is not None)
        if whole_turn:
            options["on_event"] = None

        def done(result: ChatResult) -> ChatResult:
            if whole_turn and on_event is not None:
                _replay(result, on_event)
            return result

        if not constrained:
            free = self._turn(messages, specs, **options)  # free output is the model's own, for comparing
            # Unchecked, yet only JSON leaves: a constrained call's check says the same and has it repaired.
            for call in free.tool_calls:
                if (what := not_json(call.arguments)) is not None:
                    # Neither the name nor the keys: free output's are the model's own words.
                    raise ToolCallParseError(f"a call's arguments are not JSON a client can read: they hold {what}",
                                             free.raw)
            return free
        schemas = {s["function"]["name"]: s["function"].get("parameters") or {} for s in specs}
        # A tool with a pydantic model is checked by the model too.
        own = {t.name: t for t in tools if isinstance(t, Tool)}

        answered = frozenset() if repeat_calls else answered_calls(messages, frozenset(schemas))

        def check(call: ToolCall) -> list[Violation]:
            found = own[call.name].violations(call.arguments) if call.name in own \
                else violations(call.name, schemas.get(call.name, {}), call.arguments)
            if answered and call_key(call.name, call.arguments) in answered:
                found = [*found, Violation(call.name, "", REPEAT, "this exact call was already made and its result "
                                                                  "is in the conversation")]
            return found

        # One verdict per call and per answer: a streamed turn's gate and this loop share them.
        checked = TurnCheck(check, answer_schema)
        history, choice = list(messages), tool_choice
        offered = frozenset(schemas)
        bars: tuple[str, ...] = ()
        repairs = disguises = 0
        while True:
            result = self._turn(history, specs, check=checked, bars=bars, **{**options, "tool_choice": choice})
            disguise = first_disguise(result.content, offered) if choice == "auto" and specs else None
            if answer_schema is not None and disguise is not None and disguise[1] not in offered:
                # A structured answer is JSON of the asked shape: only a call to an offered tool in
                # it is a call in disguise, not JSON that happens to have a "name" key.
                disguise = None
            if disguise is not None:
                # A text that reads as a call is no answer (nor a preamble to real calls): a call
                # nothing checked, decoded again.
                at, name = disguise
                if disguises == disguise_retries:
                    # The name only where it is a tool's: what else the model wrote is no client's business.
                    raise DisguisedCall(name if name in offered else "", result.raw, disguises)
                disguises += 1
                if on_event is not None:
                    on_event(DisguiseCaught(disguises, name if name in offered else ""))
                overruled = any(d.point is DecisionPoint.CALL and not d.taken for d in result.decisions)
                if disguise_retry is DisguiseRetry.REQUIRED or (overruled and name in offered) or \
                        answer_schema is not None:
                    # Decided against a call on its share, the model wrote one to an offered tool
                    # anyway; or the structured answer, which has no text to bar, was that call.
                    choice = "required"
                else:
                    bars = (*bars, result.content[: at + 1])
                continue
            found = [checked.call(call) for call in result.tool_calls]
            bad = [v for each in found for v in each]
            answer_bad = checked.answer(result)
            bad += answer_bad
            if not bad:
                return done(replace(result, schema_repairs=repairs, disguise_retries=disguises)
                            if repairs or disguises else result)
            if repairs == schema_retries:
                if all(v.keyword == REPEAT for v in bad):
                    # A repeat is refused by the conversation, not by the schema: the turn ends in
                    # what the model can still do, never in an error to the client.
                    ended = self._without_repeats(result, found, history, specs, checked, bars, options, choice)
                    if ended is not None:
                        return done(replace(ended, schema_repairs=repairs, disguise_retries=disguises))
                raise SchemaViolation(bad, result.raw, repairs)
            repairs += 1
            if on_event is not None:
                on_event(SchemaRepair(repairs, tuple(bad)))
            if answer_bad:
                # The model reads what was wrong with its answer as the user's reply to it.
                history += [result.message(), {"role": "user", "content": _answer_violation_text(answer_bad)}]
                continue
            # The model reads what was wrong as each call's own result, as it would a tool's error.
            history += [result.message(), *({"role": "tool", "tool_call_id": call.id, "content": _violation_text(each)}
                                            for call, each in zip(result.tool_calls, found, strict=True))]

    def _without_repeats(self, result: ChatResult, found: list[list[Violation]], history: list[dict[str, Any]],
                         specs: list[dict[str, Any]], checked: TurnCheck, bars: tuple[str, ...],
                         options: dict[str, Any], tool_choice: ToolChoice) -> ChatResult | None:
        """The turn without the calls that only repeat answered ones: the reply's other calls, or
        under "auto", the model's answer under the text branch (it has read why each repeat was
        refused); ``None`` where the turn must call and every call was a repeat."""
        kept = [call for call, each in zip(result.tool_calls, found, strict=True) if not each]
        left_out = Decision(DecisionPoint.REPEAT, None, None, True, calls=len(result.tool_calls) - len(kept))
        if kept:
            return replace(result, tool_calls=kept, decisions=(*result.decisions, left_out))
        told = [*history, result.message(), *({"role": "tool", "tool_call_id": call.id, "content": _violation_text(each)}
                                              for call, each in zip(result.tool_calls, found, strict=True))]
        if tool_choice == "auto":
            answer = self._turn(told, specs, check=checked, bars=bars, **{**options, "tool_choice": "none"})
            return replace(answer, decisions=(*result.decisions, left_out, *answer.decisions))
        # The turn must call: a call to another tool (an agent's final_answer, say) is what is left.
        repeated = {call.name for call in result.tool_calls}
        others = tuple(s["function"]["name"] for s in specs if s["function"]["name"] not in repeated)
        if tool_choice != "required" or not others:
            return None
        answer = self._turn(told, specs, check=checked, bars=bars, callable_tools=others,
                            **{**options, "tool_choice": "required"})
        bad = [v for call in answer.tool_calls for v in checked.call(call)]
        if bad:
            raise SchemaViolation(bad, answer.raw, 0)
        return replace(answer, decisions=(*result.decisions, left_out, *answer.decisions))

    def _turn(
        self,
        messages: list[dict[str, Any]],
        tools: Sequence[Tool | dict[str, Any]] = (),
        *,
        tool_choice: ToolChoice = "auto",
        parallel_tool_calls: bool = True,
        constrained: bool = True,
        max_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        repeat_penalty: float = 1.0,
        retry_repeat_penalties: Sequence[float] = (1.1, 1.3),
        cancel: Callable[[], bool] | None = None,
        thinking: bool | None = None,
        reasoning_budget: int | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
        on_event: Callable[[StreamEvent], None] | None = None,
        check: TurnCheck | None = None,
        bars: Sequence[str] = (),
        answer_schema: Mapping[str, Any] | None = None,
        decisions: Decisions | None = None,
        callable_tools: Sequence[str] | None = None,
    ) -> ChatResult:
        """One generation of the turn (``chat`` without the repairs), top to bottom: render, then
        the thought when a reasoning budget gives it its own generation, the answer under the
        grammar, parse. ``check``: what a streamed call passes before it is sent; ``bars``: openings
        the text answer may not have; ``callable_tools``: the tools the grammar may call (``None``:
        all; the prompt shows them all either way)."""
        specs = _specs(tools)
        prompt = self.render(messages, specs, parallel_tool_calls=parallel_tool_calls, tool_choice=tool_choice,
                             thinking=thinking, template_kwargs=template_kwargs)

        def reprompt(note: str) -> Prompt:
            # The same turn with a note to the model first in its system message.
            return self.render(with_system(messages, note), specs, parallel_tool_calls=parallel_tool_calls,
                               tool_choice=tool_choice, thinking=thinking, template_kwargs=template_kwargs)
        if callable_tools is not None:
            specs = [s for s in specs if s["function"]["name"] in callable_tools]
        if reasoning_budget is not None and reasoning_budget < 1:
            raise UsageError(f"reasoning_budget must be a positive number of tokens, got {reasoning_budget}")
        mode = reasoning_mode(self.family, prompt, thinking)
        if reasoning_budget is not None and mode == "may":
            mode = "must"  # a budget asks for thinking
        if not constrained and not mode and self.family.reasoning_start:
            # Free output may hold a thought anyway (a template that ignores enable_thinking):
            # read it as one, never for calls.
            mode = "may"
        if decisions is not None and decisions.shape and constrained:
            # The grammar writes a value in the form its description states (a date's format, a
            # city and its state); the prompt shows the tools as they were given.
            specs = shaped(specs)
        fam = self.family
        # With a form decision the reply may also be the family's parallel form (one list of calls).
        forms = (*fam.call_forms, *fam.parallel_forms) if decisions is not None and decisions.form is not None and \
            fam.parallel_forms and parallel_tool_calls and constrained else None
        fmt = self.reply_format(specs, tool_choice, parallel_tool_calls, constrained=constrained, stop=stop,
                                reasoning=mode, answer_schema=answer_schema, forms=forms).barring(bars)
        run = _Decoding(self.backend, None if on_event is None else ReplyStream(fmt, on_event, stop, check), cancel,
                        temperature=temperature, top_p=top_p, seed=seed)
        if decisions is not None and constrained and self.backend.capabilities.biases and \
                (decisions.copy is not None or decisions.word is not None or decisions.number is not None):
            run.bias = CopyBias(said(messages), decisions.copy, decisions.word, decisions.number,
                                json.dumps(specs, ensure_ascii=False))
        whole, thought = fmt, ""
        if reasoning_budget is not None and mode:
            first = run.generate(prompt, grammar=fmt.reasoning_grammar() if constrained else None,
                                 max_tokens=min(reasoning_budget, max_tokens), repeat_penalty=repeat_penalty,
                                 stop=list(self.family.stop) + ([] if constrained else [self.family.reasoning_end]))
            run.first = first
            opened = mode == "open" or first.text.lstrip().startswith(self.family.reasoning_start)
            if opened and first.generated >= max_tokens:
                # A thought that took every token leaves none for an answer.
                return self._result(first.text, whole, first, stop, constrained=constrained, run=run)
            if not opened and (first.finish_reason != "length" or run.streamed):
                # Free output that answered without thinking, whole (or already streamed): that is the answer.
                return self._result(first.text, whole, first, stop, constrained=constrained, run=run)
            if opened:
                prompt, thought = self._after_thought(prompt, first.text, fmt)
                max_tokens -= first.generated
                fmt = fmt.after_reasoning()
            # Otherwise an answer without thinking ran into the budget: it is generated again, whole.
        penalties = [repeat_penalty, *(p for p in retry_repeat_penalties if p != repeat_penalty)]
        source = next_token_source(self.backend) if decisions is not None and decisions.active and constrained else None

        def variant(choice: str, calls: tuple[int, int] | None = None,
                    only: tuple[str, ...] | None = forms, tools: Sequence[dict[str, Any]] = specs) -> ReplyFormat:
            # The same request's format on one branch: the same bars, after the same thought.
            f = self.reply_format(tools, choice, parallel_tool_calls, stop=stop, reasoning=mode,
                                  answer_schema=answer_schema, calls=calls, forms=only).barring(bars)
            return f.after_reasoning() if thought else f

        def settled(calls: list[ToolCall]) -> list[ToolCall]:
            return settle(calls, whole.schemas, decisions, messages)[0]

        # No distribution to read (a backend without one, or a thought inside this generation):
        # the greedy token decides, and only the vote acts. Free output decides nothing.
        turn = Turn(run=run, source=None if fmt.reasoning else source, family=self.family, prompt=prompt, whole=whole,
                    fmt=fmt, thought=thought, decisions=decisions if decisions is not None and constrained else Decisions(),
                    messages=messages, specs=specs, forms=forms, variant=variant, reprompt=reprompt, settle=settled,
                    max_tokens=max_tokens, penalties=penalties, parallel=parallel_tool_calls)
        gen = redecode(turn)
        return self._result(thought + gen.text, whole, gen, stop, constrained=constrained, run=run,
                            decisions=decisions if constrained else None, made=turn.made, messages=messages)

    def stream(self, messages: list[dict[str, Any]], tools: Sequence[Tool | dict[str, Any]] = (),
               **options: Any) -> Generator[StreamEvent, None, None]:
        """``chat`` as events while the turn is generated: ``ReasoningDelta`` and ``TextDelta``
        as the model writes them, each call (``ToolCallStarted``, ``ToolCallDelta``,
        ``ToolCallDone``) once it is whole and passes its check, ``SchemaRepair`` when the turn is
        generated again after a failed check (what it streamed is withdrawn), and last ``TurnDone``
        with the same ``ChatResult`` that ``chat`` returns. Takes ``chat``'s options. The turn is generated on a thread of its
        own; leaving the loop early stops it at the next token. ``chat``'s errors are raised here.
        """
        if "on_event" in options:
            raise UsageError("stream() makes the events itself; on_event is chat()'s option")
        events: queue.SimpleQueue[StreamEvent | BaseException] = queue.SimpleQueue()
        stopped = threading.Event()
        asked = options.pop("cancel", None)

        def cancel() -> bool:
            return stopped.is_set() or (asked is not None and bool(asked()))

        def work() -> None:
            try:
                events.put(TurnDone(self.chat(messages, tools, cancel=cancel, on_event=events.put, **options)))
            except BaseException as exc:  # handed to the reading side, which raises it
                events.put(exc)

        thread = threading.Thread(target=work, daemon=True, name="localtools-stream")
        thread.start()
        try:
            while True:
                event = events.get()
                if isinstance(event, BaseException):
                    raise event
                yield event
                if isinstance(event, TurnDone):
                    return
        finally:
            stopped.set()
            thread.join()

    def _result(self, raw: str, fmt: ReplyFormat, gen: Generation, stop: Sequence[str], *, constrained: bool,
                run: _Decoding, decisions: Decisions | None = None, made: Sequence[Decision] = (),
                messages: Sequence[Mapping[str, Any]] = ()) -> ChatResult:
        """The turn from its whole reply ``raw``, whose last generation is ``gen``; when a reasoning
        budget's thought came before it, the prompt was read there. ``decisions.distinct`` leaves
        out a call's repeats, ``decisions.ground`` the optional arguments ``messages`` never
        mention; ``made``: the turn's decisions so far."""
        first = run.first if run.first is not gen else None
        latency = time.perf_counter() - run.started
        # What the turn hands out: a reply cut inside a call is never read as text.
        parsed = fmt.parse(raw, strict=True)
        parsed_content = parsed.content
        made = [*made, *self._bias_records(raw, parsed.tool_calls, fmt, gen, run)]
        calls, settled = settle(parsed.tool_calls, fmt.schemas, decisions, messages)
        made = [*made, *settled]
        finish = "tool_calls" if calls else gen.finish_reason
        # A stop string of the request ended the answer: the backend cut it there, or it is in
        # the text the family's grammar wrote (a stop string never cuts a call).
        found = first_stop(parsed_content, stop) if stop and not calls else None
        stopped_by = found[1] if found is not None else gen.stop if not calls and gen.stop in stop else None
        if found is not None:
            parsed_content, finish = parsed_content[:found[0]].rstrip(), "stop"
        result = ChatResult(
            content=parsed_content,
            tool_calls=calls,
            raw=raw,
            finish_reason=finish,
            constrained=constrained,
            prompt_tokens=gen.prompt_tokens if first is None else first.prompt_tokens,
            completion_tokens=run.completion_tokens,
            # The answer's first generation read the prompt (after the thought, where there was one);
            # those after it went on from a cached prompt.
            prompt_seconds=_answer_prompt_seconds(run, gen, first),
            decode_seconds=run.decode_seconds,
            latency=latency,
            attempts=run.attempts,
            reasoning=parsed.reasoning,
            stop_sequence=stopped_by,
            decisions=tuple(made),
        )
        return result if run.live is None else run.live.finish(result)

    @staticmethod
    def _bias_records(raw: str, calls: Sequence[ToolCall], fmt: ReplyFormat, gen: Generation,
                      run: _Decoding) -> list[Decision]:
        """The word, number and copy bonuses' changes to the reply, each with its value before
        (the reply decoded again without them, only where they changed a pick) and after (``calls``:
        the reply ``raw``'s, parsed)."""
        bias = run.bias
        if bias is None or not gen.biased:
            return []
        plain = run.unbiased(gen)
        if plain is None:
            return []
        thought = raw[: len(raw) - len(gen.text)]
        after = [(c.name, c.arguments) for c in calls]
        try:
            before: list[tuple[str, Mapping[str, Any]]] | None = \
                [(c.name, c.arguments) for c in fmt.parse(thought + plain.text, strict=True).tool_calls]
        except LocalToolsError:  # cut short where the bonuses let it end: the text is the record
            before = None
        points = list(dict.fromkeys(bias.point(text) for text in gen.biased))
        return biased(points, before, after, plain.text, gen.text)

    def _after_thought(self, prompt: Prompt, text: str, fmt: ReplyFormat) -> tuple[Prompt, str]:
        """The prompt continued with the reasoning and its end tag (added when the budget ran out
        first; the tags go in as control text, the reasoning as data), and that continuation."""
        start, end = self.family.reasoning_start, self.family.reasoning_end
        opened = fmt.reasoning != "open"
        body = text.lstrip().removeprefix(start) if opened else text
        body = body.split(end, 1)[0]
        # A budget may stop in the middle of the end tag ("</thi"): it is written whole after.
        body = next((body[:-i] for i in range(len(end) - 1, 0, -1) if body.endswith(end[:i])), body)
        segments = [*([(start, False)] if opened else []), (body, True), (end, False)]
        written = tuple((t, d) for t, d in segments if t)
        return Prompt(prompt.segments + written), "".join(t for t, _ in written)
