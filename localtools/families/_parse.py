"""Model output -> text content + tool calls, per family; unparseable calls raise, never vanish."""

from __future__ import annotations

import ast
import json
import re
import secrets
import string
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import ToolCallParseError
from ..grammar._check import unsendable
from ._families import CallStyle, Family

__all__ = ["ARGUMENT_KEYS", "BARE_CALL_OPENING", "NAME_KEYS", "ParsedReply", "ToolCall", "call_key", "decode_arguments",
           "disguised_calls", "first_disguise", "new_call_id", "not_json", "parse_reply"]

_ALNUM = string.ascii_letters + string.digits


def call_key(name: str, arguments: Any) -> str:
    """A call's identity: its tool and its arguments, whatever their key order."""
    return name + json.dumps(arguments, sort_keys=True, default=str)
_FENCE = re.compile(r"```[a-zA-Z_]*[ \t]*\n?(.*?)\n?```", re.DOTALL)
_DECODER = json.JSONDecoder()
#: How a bare JSON call opens, in any family: free output is read for these by the tolerant
#: parser, and a free reply cut after one was cut inside a call.
BARE_CALL_OPENING = '{"name"'

_CALL_LIKE = re.compile(r'\{\s*"name"\s*:\s*"[^"]*"\s*,\s*"(?:arguments|parameters)"\s*:')


def new_call_id(style: str = "call") -> str:
    """A fresh call id in the family's style ("call": call_<24 hex>; "alnum9": 9 letters/digits)."""
    if style == "alnum9":
        return "".join(secrets.choice(_ALNUM) for _ in range(9))
    return "call_" + secrets.token_hex(12)


def decode_arguments(raw: Any) -> dict[str, Any]:
    """An OpenAI-shaped call's ``arguments`` as an object.

    The API sends a JSON string, and clients read a blank one as no arguments; a dict (our own
    history) passes as is. Raises ``ValueError`` saying what is wrong, for the caller to place.
    """
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object (got {type(value).__name__})")
    return value


@dataclass(frozen=True)
class ToolCall:
    """One requested call; ``arguments`` is the decoded JSON object."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)},
        }


@dataclass(frozen=True)
class ParsedReply:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: The model's reasoning, without its tags ("" when it gave none).
    reasoning: str = ""


def not_json(value: Any) -> str | None:
    """What ``value`` first holds that JSON cannot carry (a number that overflowed a double, a
    lone surrogate that is no UTF-8), or ``None``: such arguments would leave as ``Infinity`` (no
    JSON) or break the encoder. Says what, never where (a key the model wrote) nor the value."""
    for _, kind, _ in unsendable(value):
        return "a number out of a double's range" if kind == "number" else "a lone surrogate (not Unicode text)"
    return None


def _call_from(obj: Any, family: Family, raw: str) -> ToolCall | None:
    """A ToolCall if ``obj`` has the shape of one (name + arguments/parameters), else None."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict) and "name" not in obj:
        obj = obj["function"]
    name = obj.get("name")
    keys = [k for k in (family.args_key, "arguments", "parameters") if k in obj]
    if not isinstance(name, str) or (not keys and set(obj) - {"name", "id"}):
        return None
    args: Any = obj[keys[0]] if keys else {}
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            raise ToolCallParseError("a call's arguments are a string that is not JSON", raw) from None
    if not isinstance(args, dict):
        raise ToolCallParseError(f"a call's arguments must be a JSON object, got {type(args).__name__}", raw)
    call_id = obj.get("id") if isinstance(obj.get("id"), str) and obj.get("id") else new_call_id(family.id)
    return ToolCall(id=str(call_id), name=name, arguments=args)


def _calls_from(value: Any, family: Family, raw: str) -> list[ToolCall] | None:
    items = value if isinstance(value, list) else [value]
    calls = [_call_from(v, family, raw) for v in items]
    if not items or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _scan_json(text: str, family: Family, raw: str) -> tuple[list[ToolCall], str]:
    """Find call-shaped JSON values in free text (fenced or bare); return them and the rest."""
    located, rest = _read_calls(text, family, raw, tagged=False, bare=True)
    return [call for _, call in located], rest


_FENCE_OPEN = re.compile(r"```[a-zA-Z_]*[ \t]*\n?\s*")


def _fenced_value(text: str, at: int) -> tuple[Any, int] | None:
    """The JSON value fenced at ``at`` (```json ... ```) and where the fence closes, or ``None``.
    The value is read before the closing fence is looked for: a string in it may hold one."""
    opening = _FENCE_OPEN.match(text, at)
    if opening is None:
        return None
    try:
        value, j = _DECODER.raw_decode(text, opening.end())
    except (ValueError, RecursionError):
        return None
    while j < len(text) and text[j].isspace():
        j += 1
    return (value, j + 3) if text.startswith("```", j) else None


def _read_calls(text: str, family: Family, raw: str, *, tagged: bool, bare: bool
                ) -> tuple[list[tuple[int, ToolCall]], str]:
    """Calls read left to right, each with where it began in ``text``, and the text around them.

    One pass, as the grammar reads a reply: a call's JSON is read whole before anything after it
    is looked at, so a tag, a fence or a bracket inside one of its strings is part of the string,
    never the start or the end of another call (``tagged``: the family's tagged blocks; ``bare``:
    fenced and bare JSON calls too).
    """
    located: list[tuple[int, ToolCall]] = []
    out: list[str] = []
    start = family.call_start if tagged else ""
    i = 0
    while i < len(text):
        if start and text.startswith(start, i):
            value, end = _tagged_value(text, i, family, raw)
            found = _calls_from(value, family, raw)
            if not found:
                raise ToolCallParseError(
                    f"a {family.call_start} block is not a call (expected name and {family.args_key})", raw)
            located += [(i, c) for c in found]
            i = end
            continue
        if bare and text.startswith("```", i):
            fenced = _fenced_value(text, i)
            found = _calls_from(fenced[0], family, raw) if fenced is not None else None
            if fenced is not None and found:
                located += [(i, c) for c in found]
                i = fenced[1]
                continue
        if bare and text[i] in "{[":
            try:
                value, end = _DECODER.raw_decode(text, i)
            except (ValueError, RecursionError):
                value, end = None, i
            found = _calls_from(value, family, raw) if end > i else None
            if found:
                located += [(i, c) for c in found]
                i = end
                continue
        out.append(text[i])
        i += 1
    return located, "".join(out)


def _tagged_value(text: str, at: int, family: Family, raw: str) -> tuple[Any, int]:
    """The JSON value of the call block opening at ``at``, and where the block ends.

    The JSON is read before the closing tag is looked for: a string argument may itself contain
    the closing tag (the grammar allows it), so the first closing tag is not always the block's.
    """
    start, end = family.call_start, family.call_end
    i = at + len(start)
    while i < len(text) and text[i].isspace():
        i += 1
    if text.startswith("```", i):  # free decoding fences the JSON now and then
        fenced = _fenced_value(text, i)
        if fenced is None:
            raise ToolCallParseError(f"a {start} block does not hold valid JSON in its fence", raw)
        value, j = fenced
        while j < len(text) and text[j].isspace():
            j += 1
        if text.startswith(end, j):
            return value, j + len(end)
        if j == len(text):
            return value, j
        raise ToolCallParseError(f"a {start} block holds more than its fenced JSON before {end}", raw)
    try:
        value, j = _DECODER.raw_decode(text, i)
    except json.JSONDecodeError as exc:
        raise ToolCallParseError(f"a {start} block does not hold valid JSON ({exc.msg})", raw) from None
    except RecursionError:
        raise ToolCallParseError(f"a {start} block nests its JSON deeper than the parser reads", raw) from None
    while j < len(text) and text[j].isspace():
        j += 1
    if text.startswith(end, j):
        return value, j + len(end)
    if j == len(text):  # a final tag left open at the end of the output still counts
        return value, j
    raise ToolCallParseError(f"a {start} block holds more than one JSON value before {end}", raw)


#: Keys a call object names its tool with, and keys it holds the arguments in. A pair of the first
#: of each (``name``/``function``/``tool``... with ``arguments``/``parameters``) is a call whatever
#: the name; the looser pairs of other formats (ReAct's ``action``/``action_input``, ``args``,
#: ``input``, ...) only where the name is an offered tool, since prose describing an agent or an
#: API uses them too.
NAME_KEYS = frozenset({"name", "function", "function_name", "tool", "tool_name"})
ARGUMENT_KEYS = frozenset({"arguments", "parameters"})
_LOOSE_NAME_KEYS = NAME_KEYS | {"action", "api", "recipient_name"}
_LOOSE_ARGUMENT_KEYS = ARGUMENT_KEYS | {"args", "params", "input", "inputs", "action_input", "tool_input", "kwargs"}


def _named_call(item: Any, tool_names: Collection[str] | None) -> tuple[str, dict[str, Any]] | None:
    """A call object, read by its keys, not its spelling: a string under a name-like key and an
    object (or a JSON string of one) under an arguments-like key, at the top or under
    ``"function"`` (OpenAI's ``{"type": "function", "function": {...}}``)."""
    if not isinstance(item, dict):
        return None
    fn = item["function"] if isinstance(item.get("function"), dict) else item
    keys = {k.lower(): k for k in fn if isinstance(k, str)}
    for names, arguments in ((NAME_KEYS, ARGUMENT_KEYS), (_LOOSE_NAME_KEYS, _LOOSE_ARGUMENT_KEYS)):
        name = next((fn[keys[k]] for k in names if k in keys and isinstance(fn[keys[k]], str)), None)
        args = next((fn[keys[k]] for k in arguments if k in keys), None)
        if name is not None and args is not None:
            break
    else:
        return None
    strict = names is NAME_KEYS
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return None
    if not isinstance(name, str) or not name.strip() or not isinstance(args, dict):
        return None
    if (tool_names is not None or not strict) and name not in (tool_names or ()):
        return None
    # A tool's schema echoed back ({"name": ..., "description": ..., "parameters": {"type": "object", ...}})
    # names a tool too, but calls nothing: told by its arguments being a schema, not by its keys.
    if _is_schema(args):
        return None
    return name, args


_SCHEMA_WORDS = frozenset({"type", "properties", "required", "additionalProperties", "description", "title", "$schema",
                           "$defs", "definitions", "$ref", "patternProperties", "minProperties", "maxProperties",
                           "anyOf", "oneOf", "allOf", "default", "examples", "propertyNames", "$id", "$comment"})


def _is_schema(value: dict[str, Any]) -> bool:
    """Whether ``value`` is an object schema (what a tool's ``parameters`` hold), not arguments."""
    return (value.get("type") == "object" or isinstance(value.get("properties"), dict)) and set(value) <= _SCHEMA_WORDS


def _keyed_call(item: Any, names: Collection[str]) -> tuple[str, dict[str, Any]] | None:
    """``{"get_weather": {"city": "Paris"}}``: an offered tool's name as the one key, its arguments
    as the value."""
    if not isinstance(item, dict) or len(item) != 1:
        return None
    (name, args), = item.items()
    if name not in names or not isinstance(args, dict) or _is_schema(args):
        return None
    return name, args


#: ReAct's spelling of a call: ``Action: get_weather`` then ``Action Input: {...}``.
_REACT = re.compile(r"Action\s*:\s*`?(?P<tool>[^\s`]+)`?[ \t]*\r?\n\s*Action[ _]Input\s*:\s*", re.IGNORECASE)
# A call spelled as tags, its name and then its arguments: '<name>get_weather</name>\n<arguments>{...}'.
_TAGGED = re.compile(
    rf"<(?P<key>{'|'.join(sorted(NAME_KEYS))})>\s*`?(?P<tool>[^\s<`]+)`?\s*</(?P=key)>\s*"
    rf"<(?P<args>{'|'.join(sorted(ARGUMENT_KEYS))})>\s*", re.IGNORECASE)
#: Openings of a call spelled in words or tags, the tool's name in group ``tool``, its arguments next.
_SPELLED_OPENINGS = (_REACT, _TAGGED)


def _spelled_calls(text: str, names: Collection[str]) -> list[tuple[int, int, str, dict[str, Any]]]:
    """Calls to an offered tool spelled as code, as ReAct writes them or as tags, not as JSON
    objects: ``get_weather(city="Paris")`` (literal arguments, at least one), ``Action: get_weather`` /
    ``Action Input: {...}``, ``<name>get_weather</name><arguments>{...}</arguments>``. Each with
    where it begins and ends. A tool named in prose (``get_weather()``, ``get_weather(city)``)
    calls nothing."""
    found: list[tuple[int, int, str, dict[str, Any]]] = []
    if not names:
        return found
    ends = _closing_parens(text) if "(" in text else {}
    pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
                         + r")\s*\(")
    for m in pattern.finditer(text):
        end = ends.get(m.end() - 1)
        args = _literal_call(text[m.start():end]) if end is not None else None
        if args is not None:
            found.append((m.start(), end or m.end(), m.group(1), args))
    for m in (m for opening in _SPELLED_OPENINGS for m in opening.finditer(text)):
        if m.group("tool") not in names:
            continue
        read = _read_value(text, m.end(), _closing(text), [_LITERAL_BUDGET]) if text[m.end():m.end() + 1] in "{[" \
            else None
        args = read[0] if read is not None and isinstance(read[0], dict) else {}
        end = read[1] if read is not None else m.end()
        if "args" in m.groupdict() and (close := re.compile(rf"\s*</{m.group('args')}>", re.IGNORECASE).match(text, end)):
            end = close.end()
        found.append((m.start(), end, m.group("tool"), args))
    return sorted(found)


def _closing_parens(text: str) -> dict[int, int]:
    """Where each "(" in ``text`` closes (past it), strings in either quote read as strings."""
    ends: dict[int, int] = {}
    stack: list[int] = []
    quote, k = "", 0
    while k < len(text):
        ch = text[k]
        if quote:
            if ch == "\\":
                k += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "(":
            stack.append(k)
        elif ch == ")" and stack:
            ends[stack.pop()] = k + 1
        k += 1
    return ends


def _literal_call(code: str) -> dict[str, Any] | None:
    """The keyword arguments of a call expression whose arguments are all literals, at least one."""
    if len(code) > _LITERAL_BUDGET:
        return None
    try:
        tree = ast.parse(code, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not isinstance(tree, ast.Call) or not (tree.args or tree.keywords) or any(k.arg is None for k in tree.keywords):
        return None
    try:
        [ast.literal_eval(a) for a in tree.args]
        return {str(k.arg): ast.literal_eval(k.value) for k in tree.keywords}
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


_NAME_KEY = "|".join(sorted(NAME_KEYS))
_ARGS_KEY = "|".join(sorted(ARGUMENT_KEYS))
# A call's opening with any mix of quotes, in either key order: '{"name": "get_order\', '.
_BROKEN_CALL = re.compile(
    rf"""\{{\s*["']?(?:{_NAME_KEY})["']?\s*:\s*["']([^"'\n]+)["']\s*,\s*["']?(?:{_ARGS_KEY})["']?\s*:"""
    rf"""|\{{\s*["']?(?:{_ARGS_KEY})["']?\s*:\s*\{{[^{{}}]*\}}\s*,\s*["']?(?:{_NAME_KEY})["']?\s*:\s*["']([^"'\n]+)["']""",
    re.IGNORECASE)
#: Characters of bracketed text read as Python literals per reply at most: what is left is read as JSON only.
_LITERAL_BUDGET = 100_000


def _closing(text: str) -> dict[int, int]:
    """Where each bracket opened in ``text`` closes (past it), in one pass reading strings in
    either quote; unclosed ones are absent."""
    ends: dict[int, int] = {}
    stack: list[int] = []
    quote, k = "", 0
    while k < len(text):
        ch = text[k]
        if quote:
            if ch == "\\":
                k += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            stack.append(k)
        elif ch in "}]" and stack:
            ends[stack.pop()] = k + 1
        k += 1
    return ends


def _read_value(text: str, i: int, ends: dict[int, int], budget: list[int]) -> tuple[Any, int] | None:
    """The JSON value, or the Python literal (single quotes, True/None), opening at ``i``."""
    try:
        return _DECODER.raw_decode(text, i)
    except (ValueError, RecursionError):  # not JSON; too deep; an integer past Python's digit limit
        pass
    end = ends.get(i)
    if end is None or budget[0] < end - i:
        return None
    budget[0] -= end - i
    try:
        return ast.literal_eval(text[i:end]), end
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def disguised_calls(text: str, tool_names: Collection[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Calls written inside a text answer: anywhere (after a preamble, in a fence, in a list),
    in JSON or as a Python literal, read by their keys whatever their order, quoting or escapes:
    a call object's own keys whatever the name, looser formats' keys to an offered tool (only to
    ``tool_names``, when given): see ``_named_call``.

    A text answer that holds one is a call the grammar (or the parser) failed to catch: the
    constrained path decodes the turn again, the bench counts them. A tool schema echoed back is
    not a call. A call cut before it closes counts too, with no arguments: it is still no answer.
    """
    return [(name, args) for _, name, args in _disguises(text, tool_names)]


def first_disguise(text: str, offered: Collection[str] = ()) -> tuple[int, str] | None:
    """Where the first call in disguise in ``text`` opens (its bracket), and the tool it names
    (whatever the name under a call object's own keys; an ``offered`` one under looser keys)."""
    found = next(_disguises(text, None, offered), None)
    return None if found is None else found[:2]


def _disguises(text: str, tool_names: Collection[str] | None, offered: Collection[str] = ()
               ) -> Iterator[tuple[int, str, dict[str, Any]]]:
    ends = _closing(text) if "{" in text or "[" in text else {}
    budget = [_LITERAL_BUDGET]
    spelled = _spelled_calls(text, tool_names if tool_names is not None else offered)
    i = 0
    while i < len(text):
        while spelled and spelled[0][0] < i:
            spelled.pop(0)
        if spelled and spelled[0][0] == i:
            _, end, spelled_name, spelled_args = spelled.pop(0)
            yield i, spelled_name, spelled_args
            i = end
            continue
        if text[i] in "{[":
            read = _read_value(text, i, ends, budget)
            if read is None:
                broken = _BROKEN_CALL.match(text, i)
                name = broken and (broken.group(1) or broken.group(2))
                if broken and name and (tool_names is None or name in tool_names):
                    yield i, name, {}
                    i = broken.end()
                    continue
                i += 1
                continue
            value, end = read
            items = value if isinstance(value, list) else [value]
            hits = [c for item in items if (c := _read_call(item, tool_names, offered)) is not None]
            if hits:
                for name, args in hits:
                    yield i, name, args
                i = end
                continue
        i += 1


def _read_call(item: Any, tool_names: Collection[str] | None, offered: Collection[str]) -> tuple[str, dict[str, Any]] | None:
    if tool_names is not None:
        return _named_call(item, tool_names) or _keyed_call(item, tool_names)
    # Whatever the name under a call object's own keys; looser keys and a tool's name as the key
    # only to an offered tool.
    strict = _named_call(item, None)
    return strict if strict is not None or not offered else _named_call(item, offered) or _keyed_call(item, offered)


def _pattern_calls(text: str, family: Family, schemas: Mapping[str, Any], raw: str
                   ) -> tuple[list[tuple[int, ToolCall]], str]:
    """Calls spelled as the family's grammar file spells them (``call_style = "pattern"``): from
    each ``call_start`` on, calls (head, arguments in the family's syntax, tail) with the tags and
    separators of the grammar between them; the text around them is kept."""
    from ..grammar import call_shape
    from ._args import read_args  # the readers import the grammar's syntax constants

    shape = call_shape(family)
    start = family.call_start
    calls: list[tuple[int, ToolCall]] = []
    kept: list[str] = []
    pos = 0
    while (at := text.find(start, pos)) >= 0:
        kept.append(text[pos:at])
        pos = _skip_glue(text, at, shape.glue)
        if shape.text_open and text.startswith(shape.text_open, pos):
            # Functionary's ">>>all\n": what follows is text, up to the next call.
            nxt = text.find(start, pos)
            end = len(text) if nxt < 0 else nxt
            kept.append(text[pos + len(shape.text_open):end])
            pos = end
            continue
        found = False
        while (head := shape.head.match(text, pos)) is not None:
            name = head.group("name") if "name" in head.groupdict() else json.loads(head.group("qname"))
            try:
                args, pos = read_args(family.args_syntax, text, head.end(), schemas.get(name), family.arg_tags)
            except (ValueError, RecursionError):
                raise ToolCallParseError(f"the arguments of {_named(name, schemas)} do not parse", raw) from None
            tail = shape.tail.match(text, pos)
            if tail is None:
                raise ToolCallParseError(f"the call to {_named(name, schemas)} is not closed as its family closes calls",
                                         raw)
            call_id = head.groupdict().get("id") or new_call_id(family.id)
            calls.append((sum(map(len, kept)), ToolCall(id=call_id, name=name, arguments=args)))
            pos, found = _skip_glue(text, tail.end(), shape.glue), True
        if not found:
            raise ToolCallParseError(f"{start!r} is not followed by a call", raw)
    kept.append(text[pos:])
    return calls, "".join(kept)


def _named(name: str, schemas: Mapping[str, Any]) -> str:
    """A tool as an error names it: by name when it is offered, never a name the model made up."""
    return repr(name) if name in schemas else "a tool that is not offered"


def _skip_glue(text: str, pos: int, glue: tuple[str, ...]) -> int:
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        piece = next((g for g in glue if text.startswith(g, pos)), None)
        if piece is None:
            return pos
        pos += len(piece)


def _strip_stops(text: str, family: Family) -> str:
    for stop in family.stop:
        if text.endswith(stop):
            text = text[: -len(stop)]
    return text


def _strip_leading(text: str, strings: Collection[str]) -> str:
    while strings and (lead := next((s for s in strings if text.lstrip().startswith(s)), None)) is not None:
        text = text.lstrip()[len(lead):]
    return text


def parse_reply(text: str, family: Family, *, tolerant: bool = True,
                call_openings: Collection[str] | None = None, schemas: Mapping[str, Any] | None = None) -> ParsedReply:
    """Split model output into content and calls.

    Accepts the family's own syntax and, when ``tolerant`` (free decoding), fenced or bare JSON
    calls, several calls, and text around them. Something that starts a call but does not parse
    raises ``ToolCallParseError`` with the raw text. Constrained output is read strictly: a call
    counts only in the family's syntax, which the grammar guarantees; ``call_openings`` (see
    ``grammar.call_openings``) says how a bare call opens under that grammar. ``schemas`` (tool
    name to its parameters schema) types arguments written without quotes (``xml``).
    """
    raw = text
    if family.reply_opening and not text.startswith(family.reply_opening):
        text = family.reply_opening + text
    text = _strip_stops(text, family)
    # What the family's models write around a reply (Llama's <|python_tag|>) goes before the
    # reading; the same string inside an argument is the argument's.
    text = _strip_leading(text, family.strip)
    start = family.call_start
    # Under the grammar a reply that opens like a bare call to a given tool is one; anything else
    # that opens with "{" took the text branch (an echoed JSON result, or a "call" to a tool that
    # does not exist) and is the answer as written.
    bare = tolerant or text.startswith(tuple(call_openings) if call_openings is not None else BARE_CALL_OPENING)
    if family.call_style in (CallStyle.TAGGED, CallStyle.MARKER):
        # A tag around each call, or a marker before a JSON list of them (Mistral's [TOOL_CALLS]
        # [...]): one left-to-right reading with the bare forms, each call's JSON read whole.
        located, text = _read_calls(text, family, raw, tagged=True, bare=bare)
    else:
        calls: list[tuple[int, ToolCall]] = []
        if family.call_style is CallStyle.PATTERN:
            calls, text = _pattern_calls(text, family, schemas or {}, raw)
        # A pattern's calls were cut from the text before the JSON is read: each by where it
        # stood once cut, and its pass (a block cut at a position came before the text there now).
        found = [((at, 0), c) for at, c in calls]
        if bare:
            more, text = _read_calls(text, family, raw, tagged=False, bare=True)
            found += [((at, 1), c) for at, c in more]
        located = [(n, c) for n, (_, c) in enumerate(sorted(found, key=lambda item: item[0]))]
    for extra in family.strip:
        text = text.replace(extra, "")
    # The calls in the order they were written, whichever pass found them.
    tool_calls = [c for _, c in located]
    content = re.sub(r"\n{3,}", "\n\n", text).strip()
    if start and start in content:
        raise ToolCallParseError(f"the output starts a call with {start!r} that could not be parsed", raw)
    if tolerant and _CALL_LIKE.search(content):
        raise ToolCallParseError("the output holds a JSON call that could not be parsed", raw)
    return ParsedReply(content=content, tool_calls=tool_calls)
