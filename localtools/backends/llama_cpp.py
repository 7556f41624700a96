"""llama-cpp-python backend: GGUF weights on CPU or GPU (``n_gpu_layers``), GBNF constraints."""

from __future__ import annotations

import ctypes
import inspect
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from .._errors import BackendNotInstalled, ContextLengthExceeded, GrammarError, ModelError, UsageError
from .._types import Prompt
from ..grammar import Grammar
from ..host._gguf import read_metadata
from ._base import Bias, Capabilities, Generation, Parting, TokenChoice
from ._decode import Bonuses, FastForward, Heard, decode, penalised, top_choices, unwritten
from ._draw import best_allowed, draw, nucleus_draw

__all__ = ["START_CONTEXT", "ExtraBuffers", "LlamaCppBackend", "available_memory", "build_features", "extra_buffers_choice",
           "grown_context", "kv_bytes_per_token", "open_llama", "system_info", "trained_context"]

_log = logging.getLogger("localtools.backends")

#: Where a context sized by the backend starts (``n_ctx=None``), in tokens: a prompt that needs more grows it.
START_CONTEXT = 4096
#: Bytes a token's keys and values take per layer and KV head dimension (llama.cpp's f16 cache).
_KV_BYTES = 2


def trained_context(metadata: dict[str, Any]) -> int | None:
    """The context length the model was trained for, as its GGUF states it."""
    arch = metadata.get("general.architecture")
    value = metadata.get(f"{arch}.context_length") if arch else None
    return int(value) if isinstance(value, int) and value > 0 else None


def kv_bytes_per_token(metadata: dict[str, Any]) -> int | None:
    """What one token of context costs in llama.cpp's f16 KV cache (keys and values, every
    layer), from the GGUF's shape; ``None`` where it does not say."""
    arch = metadata.get("general.architecture")

    def get(key: str) -> int:
        value = metadata.get(f"{arch}.{key}") if arch else None
        return value if isinstance(value, int) and value > 0 else 0

    layers, heads, width = get("block_count"), get("attention.head_count"), get("embedding_length")
    if not (layers and heads and width):
        return None
    kv_heads = get("attention.head_count_kv") or heads
    key = get("attention.key_length") or width // heads
    value = get("attention.value_length") or width // heads
    return layers * kv_heads * (key + value) * _KV_BYTES


def available_memory() -> int | None:
    """Bytes of memory free to take now (Linux's MemAvailable; ``None`` where unknown)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def grown_context(need: int, now: int, trained: int | None, per_token: int | None, free: int | None) -> tuple[int | None, str]:
    """The context to grow ``now`` to for ``need`` tokens (doubling, at most ``trained``), or
    ``None`` and why it cannot: past what the model was trained for, or more memory than is free."""
    if trained is not None and need > trained:
        return None, f"the model was trained for {trained} tokens"
    size = now
    while size < need:
        size *= 2
    size = min(size, trained) if trained is not None else size
    if per_token is not None and free is not None and (size - now) * per_token > free:
        return None, (f"growing it to {size} tokens takes {(size - now) * per_token // 2**20} MiB more, "
                      f"and {free // 2**20} MiB are free")
    return size, ""


INSTALL_HINT = "pip install 'localtools[llama-cpp]'  (builds llama-cpp-python; a few minutes on a laptop)"


def _import() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise BackendNotInstalled(f"the llama-cpp backend needs llama-cpp-python: {INSTALL_HINT}") from exc
    return llama_cpp


@dataclass(frozen=True)
class ExtraBuffers:
    """Whether llama.cpp loads weights into its extra CPU buffer types, and why."""

    use: bool
    reason: str


def system_info() -> str:
    """llama.cpp's own one-line report of the features it was built with."""
    return str(_import().llama_print_system_info().decode("utf-8", errors="replace")).strip()


def build_features(info: str) -> frozenset[str]:
    """The features ``system_info`` reports as on, e.g. ``{"AVX2", "AMX_INT8", "REPACK"}``."""
    on = set()
    for item in info.split("|"):
        name, sep, value = item.rpartition("=")
        # "CPU : SSE3 = 1" names its backend first.
        name = name.rpartition(":")[2].strip()
        if sep and name and value.strip() == "1":
            on.add(name)
    return frozenset(on)


def extra_buffers_choice(setting: str, cpu_flags: frozenset[str], built: frozenset[str]) -> ExtraBuffers:
    """Decide ``use_extra_bufts`` from the option, the CPU's flags and llama.cpp's build features.

    Extra buffer types hold weights repacked for the CPU's kernels (llama.cpp's default; their speed
    depends on CPU and quantization, see BENCHMARKS.md) and, where llama.cpp was built with AMX, its
    AMX matrix multiply. That AMX path crashes on any prompt
    of more than one token in the llama.cpp that llama-cpp-python 0.3.36 vendors, so ``auto`` turns
    extra buffers off exactly where it would run: an AMX build on a CPU that has (or may have) AMX.
    """
    if setting == "on":
        return ExtraBuffers(True, "on: forced by extra_buffers='on'")
    if setting == "off":
        return ExtraBuffers(False, "off: forced by extra_buffers='off'")
    if setting != "auto":
        raise UsageError(f"extra_buffers must be 'auto', 'on' or 'off', not {setting!r}")
    cpu_amx = bool({"amx_tile", "amx_int8"} & cpu_flags)
    if "AMX_INT8" in built and (cpu_amx or not cpu_flags):
        where = "this CPU has AMX" if cpu_amx else "this CPU's features are unknown"
        return ExtraBuffers(False, f"off: llama.cpp was built with AMX and {where}; its AMX matrix multiply crashes "
                                   "on multi-token prompts (extra_buffers='on' forces it)")
    why = "this CPU has no AMX" if "AMX_INT8" in built else "this llama.cpp build has no AMX kernels"
    return ExtraBuffers(True, f"on: weights repacked for this CPU's kernels ({why})")


#: llama-cpp-python builds its model parameters inside ``Llama.__init__`` with no argument for some
#: fields; they are set by wrapping the default-params call for the duration of one load.
_PARAMS_LOCK = threading.Lock()


@contextmanager
def _model_params(llama_cpp: Any, **fields: Any) -> Iterator[None]:
    # One load at a time: the patch is process-wide, and a second thread reading the patched
    # function as "the original" would restore it for good.
    with _PARAMS_LOCK:
        module = llama_cpp.llama_cpp
        original = module.llama_model_default_params

        def with_fields() -> Any:
            params = original()
            for name, value in fields.items():
                setattr(params, name, value)
            return params

        module.llama_model_default_params = with_fields
        try:
            yield
        finally:
            module.llama_model_default_params = original


def open_llama(path: str | Path, *, extra_buffers: str = "auto", n_threads: int | None = None,
               **llama_kwargs: Any) -> tuple[Any, ExtraBuffers]:
    """A ``llama_cpp.Llama`` loaded with the extra-buffers choice for this CPU and build."""
    from ..host._machine import cpu_flags

    llama_cpp = _import()
    choice = extra_buffers_choice(extra_buffers, cpu_flags(), build_features(system_info()))
    llama_kwargs.setdefault("verbose", False)
    try:
        with _model_params(llama_cpp, use_extra_bufts=choice.use):
            llm = llama_cpp.Llama(model_path=str(path), n_threads=n_threads or os.cpu_count() or 1, **llama_kwargs)
    except (ValueError, RuntimeError) as exc:
        raise ModelError(f"llama.cpp could not load {path}: {exc}") from exc
    if bool(llm.model_params.use_extra_bufts) != choice.use:
        llm.close()
        raise ModelError("this llama-cpp-python ignores use_extra_bufts; localtools needs llama-cpp-python==0.3.36")
    return llm, choice


class LlamaCppBackend:
    """Runs a GGUF file through llama.cpp.

    Prompt segments marked as data are tokenized with special-token parsing off, so text such as
    ``<|im_end|>`` inside a tool result stays text.
    """

    name = "llama-cpp"
    #: For ``localtools doctor``: the distributions this backend needs, its grammar engines'
    #: distributions (llama.cpp's own GBNF sampler), options to try again with after a crash, and
    #: the fix for each way it dies.
    packages: ClassVar[tuple[str, ...]] = ("llama-cpp-python",)
    install_hint: ClassVar[str] = INSTALL_HINT
    engine_packages: ClassVar[tuple[str, ...]] = ()
    grammar_engine: ClassVar[str] = "llama.cpp's own GBNF sampler (built in)"
    after_crash: ClassVar[dict[str, Any]] = {"extra_buffers": "off"}
    crash_fixes: ClassVar[dict[str, str]] = {
        "SIGILL": "llama-cpp-python was compiled for another CPU (pip reuses a wheel built with -march=native "
                  "elsewhere): pip install --no-cache-dir --force-reinstall llama-cpp-python==0.3.36",
        "*": "rebuild llama-cpp-python without tuning for this CPU: CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install "
             "--no-cache-dir --force-reinstall llama-cpp-python==0.3.36; if it still crashes, report it with this output",
    }

    def __init__(
        self,
        path: str | Path,
        *,
        n_ctx: int | None = None,
        n_gpu_layers: int = 0,
        n_threads: int | None = None,
        seed: int = 0,
        mask: Literal["lazy", "full"] = "lazy",
        fast_forward: bool = True,
        extra_buffers: Literal["auto", "on", "off"] = "auto",
        **llama_kwargs: Any,
    ) -> None:
        llama_cpp = _import()
        if mask not in ("lazy", "full"):
            raise UsageError(f"mask must be 'lazy' or 'full', not {mask!r}")
        #: Greedy decoding under a grammar: "lazy" masks the vocabulary only when the grammar rejects
        #: the best token (same output, less work); "full" masks every step. See ``_Greedy``.
        self.mask = mask
        #: Append the tokens the grammar forces in one batch instead of one by one (``FastForward``).
        self.fast_forward = fast_forward
        #: Of the last generation under a grammar: (whole-vocabulary masks, tokens picked).
        self.mask_stats = (0, 0)
        self._all: Any = None
        #: The vocabulary's control tokens but its ends, with their text (``_controls_but_ends``).
        self._controls: list[tuple[int, str]] | None = None
        #: The last greedy generation under a grammar's best tokens at each pick (``Heard``).
        self._heard: Heard | None = None
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"no GGUF file at {path}")
        self.path = path
        self.metadata = read_metadata(path)
        unknown = sorted(set(llama_kwargs) - set(inspect.signature(llama_cpp.Llama).parameters))
        if unknown:
            raise UsageError(f"llama_cpp.Llama takes no option {', '.join(unknown)} (is it meant for another backend?)")
        #: The length the model was trained for (its GGUF's ``context_length``).
        self.trained_context = trained_context(self.metadata)
        #: ``n_ctx=None``: the context starts at ``START_CONTEXT`` (or the trained length, if less)
        #: and grows, doubling, when a prompt and its reply need more, up to the trained length and
        #: within free memory; a number is kept as given.
        self.grows = n_ctx is None
        if n_ctx is None:
            n_ctx = min(START_CONTEXT, self.trained_context or START_CONTEXT)
        self._open = dict(extra_buffers=extra_buffers, n_gpu_layers=n_gpu_layers, n_threads=n_threads, seed=seed,
                          **llama_kwargs)
        #: The llama_cpp.Llama, and whether its weights went into extra CPU buffer types, and why.
        self.llm, self.extra_buffers = open_llama(path, n_ctx=n_ctx, **self._open)
        self.n_ctx = n_ctx
        #: What the context was sized to and why, in order (for the CLI and ``doctor``).
        self.context_changes: list[str] = [
            f"context of {n_ctx} tokens" + (f", growing up to the {self.trained_context} the model was trained for"
                                            if self.grows and self.trained_context else " (as given)" if not self.grows else "")]
        self.bos_token = self._token_text(self.metadata.get("tokenizer.ggml.bos_token_id"))
        self.eos_token = self._token_text(self.metadata.get("tokenizer.ggml.eos_token_id"))

    @staticmethod
    def build_info() -> dict[str, str]:
        """What this build of llama.cpp can do here (for ``localtools doctor``)."""
        from ..host._machine import cpu_flags

        llama_cpp = _import()
        info = system_info()
        return {
            "llama.cpp system info": info,
            "GPU offload": "yes" if llama_cpp.llama_supports_gpu_offload() else "no (a CPU-only build)",
            "extra buffers (auto)": extra_buffers_choice("auto", cpu_flags(), build_features(info)).reason,
        }

    def _token_text(self, token_id: int | None) -> str:
        if token_id is None:
            return ""
        return self.llm.detokenize([token_id], special=True).decode("utf-8", errors="replace")

    def _candidates(self) -> Any:
        """A reusable llama_token_data array over the vocabulary, as numpy (ids filled in once)."""
        import numpy as np

        if self._all is None:
            layout = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)
            assert layout.itemsize == ctypes.sizeof(_import().llama_token_data)
            self._all = np.zeros(self.llm.n_vocab(), dtype=layout)
            self._all["id"] = np.arange(self.llm.n_vocab(), dtype=np.int32)
        return self._all

    @property
    def capabilities(self) -> Capabilities:
        """In process, one request at a time (a llama.cpp context is not thread-safe)."""
        return Capabilities(n_ctx=self.n_ctx, max_ctx=self.trained_context if self.grows else None, next_tokens=True,
                            continues=True, biases=True, parts=True)

    def next_tokens(self, prompt: Prompt, reply: Sequence[int] = (), *, k: int = 20) -> list[TokenChoice]:
        """The ``k`` most probable next tokens after ``prompt`` and ``reply`` (``NextTokens``); the
        prompt cache is reused, so after a generation only the reply's last token is evaluated."""
        ids = self.tokenize(prompt) + list(reply)
        self.fit(len(ids) + 1, len(ids))
        if len(ids) >= self.n_ctx:
            raise ContextLengthExceeded(len(ids), self.n_ctx)
        llama_cpp = _import()

        def ends(t: int) -> bool:
            return bool(llama_cpp.llama_vocab_is_eog(self.llm._model.vocab, t))

        if self._heard is not None and (held := self._heard.choices(ids, k, self._token_text, ends)) is not None:
            return held
        self._feed(ids)
        return top_choices(self._logits(), k, self._token_text, ends)

    def _logits(self) -> Any:
        """The last evaluated position's logits, as a numpy view of llama.cpp's buffer (no copy)."""
        import numpy as np

        return np.ctypeslib.as_array(_import().llama_get_logits_ith(self.llm._ctx.ctx, -1), shape=(self.llm.n_vocab(),))

    def reply_text(self, reply: Sequence[int]) -> str:
        """The text of ``reply`` (``NextTokens``)."""
        return str(self.llm.detokenize(list(reply)).decode("utf-8", errors="replace"))

    def health(self) -> None:
        """Nothing behind it to ask."""
        return None

    def fit(self, need: int, prompt_tokens: int) -> None:
        """Make room for ``need`` tokens (a prompt of ``prompt_tokens`` and its reply): a context
        that grows grows (``grown_context``), and says so; a prompt that cannot fit raises
        ``ContextLengthExceeded`` saying why."""
        if need <= self.n_ctx:
            return
        if not self.grows:
            if prompt_tokens >= self.n_ctx:
                hint = f"n_ctx={self.n_ctx} was given" + (
                    f"; the model was trained for {self.trained_context}" if self.trained_context else "")
                raise ContextLengthExceeded(prompt_tokens, self.n_ctx, hint)
            return  # the reply gets the room left, as asked
        size, why = grown_context(need, self.n_ctx, self.trained_context, kv_bytes_per_token(self.metadata),
                                  available_memory())
        if size is None or size <= self.n_ctx:
            if prompt_tokens >= self.n_ctx:
                raise ContextLengthExceeded(prompt_tokens, self.n_ctx, why)
            return
        note = f"context grown from {self.n_ctx} to {size} tokens for a prompt of {prompt_tokens}"
        _log.info(note)
        self.llm.close()
        # A new llama.cpp context: the weights are mapped again, the evaluated prefix is gone.
        self.llm, self.extra_buffers = open_llama(self.path, n_ctx=size, **self._open)
        self.n_ctx, self._heard = size, None
        self.context_changes.append(note)

    def drop_prompt_cache(self) -> None:
        """Forget the evaluated prefix, so the next prompt is processed from its first token.

        Between turns of one conversation the reused prefix is what makes a reply fast; a benchmark
        that compares prompt processing drops it.
        """
        self.llm.reset()

    def _encode(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _data_ids(self, text: str) -> list[int]:
        # Text from a conversation: never a control token.
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _is_control(self, token: int) -> bool:
        return bool(_import().llama_vocab_is_control(self.llm._model.vocab, token))

    def _controls_but_ends(self) -> list[tuple[int, str]]:
        """The vocabulary's control tokens but its ends, with their text (``_decode.unwritten``)."""
        if self._controls is None:
            llama_cpp, vocab = _import(), self.llm._model.vocab
            self._controls = [
                (t, str(self.llm.detokenize([t], special=True).decode("utf-8", errors="replace")))
                for t in range(self.llm.n_vocab())
                if llama_cpp.llama_vocab_is_control(vocab, t) and not llama_cpp.llama_vocab_is_eog(vocab, t)]
        return self._controls

    def tokenize(self, prompt: Prompt) -> list[int]:
        """Token ids of ``prompt``: template text with special tokens, message text without."""
        ids: list[int] = []
        for text, is_data in prompt.segments:
            ids += self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=not is_data)
        return ids

    def generate(
        self,
        prompt: Prompt,
        *,
        grammar: Grammar | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        repeat_penalty: float = 1.0,
        cancel: Callable[[], bool] | None = None,
        on_text: Callable[[str], None] | None = None,
        reply: Sequence[int] = (),
        bias: Bias | None = None,
        parting: Parting | None = None,
    ) -> Generation:
        """One reply to ``prompt`` under ``grammar`` (``Backend.generate``), going on from ``reply``
        (``Capabilities.continues``); with ``bias``'s bonuses, greedy or drawn (``Capabilities.biases``);
        stopped where it parts (``Capabilities.parts``)."""
        prompt_ids = self.tokenize(prompt)
        self.fit(len(prompt_ids) + len(reply) + max_tokens, len(prompt_ids))
        room = self.n_ctx - len(prompt_ids)
        if room <= 0:
            raise ContextLengthExceeded(len(prompt_ids), self.n_ctx)
        max_tokens = min(max_tokens, room)
        bonuses = Bonuses(bias, self.reply_text, self._data_ids) if bias is not None else None
        if temperature > 0:
            pick: _Picker = _Sampled(self, grammar, temperature, top_p, seed, repeat_penalty, bonuses=bonuses)
        else:
            pick = _Greedy(self, grammar, repeat_penalty, lazy=self.mask == "lazy", bonuses=bonuses)
        ahead = FastForward(grammar, self._encode, self._is_control) if grammar is not None and self.fast_forward else None
        # A greedy reply under a grammar is the one decisions are read after: what the model
        # wanted at each pick is kept for them.
        heard = Heard(prompt_ids, reply, self._heard) if grammar is not None and temperature <= 0 else None
        steps = _Steps(self, prompt_ids, pick, ahead, heard)
        try:
            gen = decode(steps, prompt_tokens=len(prompt_ids), max_tokens=max_tokens, stop=stop, cancel=cancel,
                         on_text=on_text, reply=reply, parting=parting)
            if bonuses is not None:
                gen.biased = tuple(bonuses.flips)
            if heard is not None:
                heard.end(gen.tokens)
                self._heard = heard
            return gen
        finally:
            pick.close()
            self.mask_stats = (getattr(pick, "full_masks", 0), getattr(pick, "picks", 0))

    def _feed(self, ids: list[int]) -> None:
        """Evaluate the prompt, reusing the longest cached prefix (a conversation's earlier turns)."""
        import numpy as np

        llm = self.llm
        cached = llm.input_ids[: llm.n_tokens]
        n = min(len(cached), len(ids))
        differ = np.flatnonzero(cached[:n] != np.asarray(ids[:n], dtype=cached.dtype))
        same = int(differ[0]) if len(differ) else n
        # At least the last prompt token is evaluated again, so the logits are this prompt's.
        keep = min(same, len(ids) - 1)
        if keep > 0 and llm._ctx.kv_cache_seq_rm(-1, keep, -1):
            llm.n_tokens = keep
        else:
            llm.reset()
        llm.eval(ids[llm.n_tokens:])


class _Picker(Protocol):
    def __call__(self, reply: list[int]) -> int: ...

    def force(self, tokens: list[int]) -> int:
        """Accept ``tokens`` into the grammar while it allows them; how many it took."""

    def allows_end(self) -> bool:
        """Whether the grammar allows an end-of-generation token next."""

    def close(self) -> None: ...


class _Steps:
    """llama.cpp's steps for the shared decode loop."""

    def __init__(self, backend: LlamaCppBackend, prompt_ids: list[int], pick: _Picker,
                 ahead: FastForward | None, heard: Heard | None) -> None:
        self.backend, self.prompt_ids, self.picker, self.ahead, self.heard = backend, prompt_ids, pick, ahead, heard
        self.llama_cpp = _import()
        self.vocab = backend.llm._model.vocab

    def start(self, reply: list[int]) -> None:
        if reply and self.picker.force(reply) != len(reply):
            raise GrammarError("the reply to go on from is not in the grammar")
        # The cache holds the reply the tokens came from: only what it lacks is evaluated.
        self.backend._feed(self.prompt_ids + reply)

    def pick(self, reply: list[int]) -> int:
        if self.heard is not None:
            self.heard.hear(reply, self.backend._logits())
        return self.picker(reply)

    def forced(self, reply: list[int]) -> tuple[list[int], bool]:
        if self.ahead is None:
            return [], False

        def text() -> str | None:
            # Special tokens as text: a call marker that is a control token ([TOOL_CALLS]) is
            # text to the grammar.
            try:
                return str(self.backend.llm.detokenize(reply, prev_tokens=self.prompt_ids, special=True).decode("utf-8"))
            except UnicodeDecodeError:
                return None

        ids, ends = self.ahead.after(text)
        taken = self.picker.force(ids)
        # The grammar's end is taken only where the engine's grammar allows an end token too.
        return ids[:taken], ends and taken == len(ids) and self.picker.allows_end()

    def advance(self, tokens: list[int]) -> None:
        self.backend.llm.eval(tokens)

    def is_end(self, token: int) -> bool:
        return bool(self.llama_cpp.llama_vocab_is_eog(self.vocab, token))

    def text(self, tokens: list[int], *, final: bool) -> str:
        raw = self.backend.llm.detokenize(tokens, prev_tokens=self.prompt_ids)
        return raw.decode("utf-8", errors="replace" if final else "ignore")


def _grammar_sampler(llama_cpp: Any, backend: LlamaCppBackend, grammar: Grammar) -> Any:
    sampler = llama_cpp.llama_sampler_init_grammar(backend.llm._model.vocab, grammar.to_gbnf().encode("utf-8"), b"root")
    if not sampler:
        raise GrammarError("llama.cpp could not parse the grammar built for these tools")
    return sampler


def _allows(llama_cpp: Any, grammar: Any, one_array: Any, token: int, logit: float = 0.0) -> bool:
    """Whether ``grammar`` allows ``token`` next: it is applied to a one-token array (cheap)."""
    one = one_array.data[0]
    one.id, one.logit = token, logit
    one_array.size, one_array.selected = 1, -1
    llama_cpp.llama_sampler_apply(grammar, ctypes.byref(one_array))
    return bool(one_array.data[0].logit != float("-inf"))


def _force(llama_cpp: Any, grammar: Any, one_array: Any, tokens: list[int]) -> int:
    # Each token is checked before it is accepted: llama.cpp aborts the process on a token its
    # grammar rejects, so a forced token that disagrees with it (it never should) ends the batch.
    for taken, token in enumerate(tokens):
        if not _allows(llama_cpp, grammar, one_array, token):
            return taken
        llama_cpp.llama_sampler_accept(grammar, token)
    return len(tokens)


def _allows_end(llama_cpp: Any, grammar: Any, one_array: Any, vocab: Any) -> bool:
    ends = {llama_cpp.llama_vocab_eos(vocab), llama_cpp.llama_vocab_eot(vocab)}
    return any(_allows(llama_cpp, grammar, one_array, token) for token in ends if token >= 0)


def _scored(np: Any, logits: Any, reply: list[int], penalty: float, bonus: dict[int, float]) -> Any:
    """The logits a pick reads: the repeat penalty on the reply's recent tokens, then the bonuses
    (a copy where either changes them; llama.cpp's own row otherwise)."""
    if (penalty == 1.0 or not reply) and not bonus:
        return logits
    scores = logits.copy()
    if penalty != 1.0 and reply:
        seen = np.asarray(penalised(reply))
        # llama.cpp's rule: shrink positive logits, push negative ones further down.
        scores[seen] = np.where(scores[seen] <= 0, scores[seen] * penalty, scores[seen] / penalty)
    for token, add in bonus.items():
        scores[token] += add
    return scores


def _vocabulary(llama_cpp: Any, backend: LlamaCppBackend) -> tuple[Any, Any]:
    """The backend's reusable candidates over the vocabulary (``_candidates``) and a llama.cpp
    array over the same memory, for masking it whole."""
    candidates = backend._candidates()
    array = llama_cpp.llama_token_data_array(ctypes.cast(candidates.ctypes.data, llama_cpp.llama_token_data_p),
                                             len(candidates), -1, False)
    return candidates, array


def _masked(llama_cpp: Any, grammar: Any, candidates: Any, array: Any, scores: Any) -> Any:
    """``scores`` with every token ``grammar`` refuses at -inf: the whole vocabulary masked, in the
    backend's reusable candidates array (``_candidates``; its ``logit`` column is returned)."""
    candidates["logit"] = scores
    array.size, array.selected = len(candidates), -1
    llama_cpp.llama_sampler_apply(grammar, ctypes.byref(array))
    return candidates["logit"]


def _one_array(llama_cpp: Any) -> Any:
    return llama_cpp.llama_token_data_array(ctypes.pointer(llama_cpp.llama_token_data(0, 0.0, 0.0)), 1, -1, False)


class _Pick:
    """What greedy and drawn picks share: the row a pick reads (``_scored``), the grammar's
    llama.cpp sampler, asked about one token at a time, and the whole vocabulary to mask when that
    does not settle a pick; forced tokens, the end and freeing the sampler."""

    def __init__(self, backend: LlamaCppBackend, grammar: Grammar | None, repeat_penalty: float,
                 bonuses: Bonuses | None):
        import numpy

        self.np = numpy
        self.llama_cpp = llama_cpp = _import()
        self.backend, self.bonuses, self.penalty = backend, bonuses, repeat_penalty
        self.vocab = backend.llm._model.vocab
        self.one_array = _one_array(llama_cpp)
        self.grammar = _grammar_sampler(llama_cpp, backend, grammar) if grammar is not None else None
        #: Control tokens never picked under the grammar (``_decode.unwritten``): a set to ask, a
        #: list to mask with.
        self.unwritten_ids = unwritten(backend._controls_but_ends(), grammar.literals()) if grammar is not None else []
        self.unwritten = frozenset(self.unwritten_ids)
        if self.grammar is not None:
            self.all, self.all_array = _vocabulary(llama_cpp, backend)

    def _scores(self, reply: list[int]) -> Any:
        return _scored(self.np, self.backend._logits(), reply, self.penalty,
                       self.bonuses(reply) if self.bonuses is not None else {})

    def _allowed(self, token: int, logit: float = 0.0) -> bool:
        return token not in self.unwritten and _allows(self.llama_cpp, self.grammar, self.one_array, token, logit)

    def _masked(self, scores: Any) -> Any:
        masked = _masked(self.llama_cpp, self.grammar, self.all, self.all_array, scores)
        masked[self.unwritten_ids] = float("-inf")
        return masked

    def force(self, tokens: list[int]) -> int:
        if self.grammar is None:
            return len(tokens)  # nothing to refuse them, nothing to remember them
        return _force(self.llama_cpp, self.grammar, self.one_array, tokens)

    def allows_end(self) -> bool:
        return self.grammar is not None and _allows_end(self.llama_cpp, self.grammar, self.one_array, self.vocab)

    def close(self) -> None:
        if self.grammar is not None:
            self.llama_cpp.llama_sampler_free(self.grammar)
            self.grammar = None


class _Greedy(_Pick):
    """Greedy decoding under an optional grammar.

    ``lazy``: take the best token and ask the grammar about that one token; when it refuses, ask
    about the next best ones (``best_allowed``), and mask the whole vocabulary only when they do not
    settle it. The choice is the same as masking first (the best token, if allowed, is the best
    allowed token), and most tokens of a call are ones the grammar allows, so the 151k-entry mask
    of a Qwen vocabulary is rarely paid. llama.cpp's own server samples this way; llama-cpp-python
    masks every step.
    """

    def __init__(self, backend: LlamaCppBackend, grammar: Grammar | None, repeat_penalty: float, *, lazy: bool,
                 bonuses: Bonuses | None = None):
        super().__init__(backend, grammar, repeat_penalty, bonuses)
        self.lazy = lazy
        self.full_masks = self.picks = 0

    def __call__(self, reply: list[int]) -> int:
        logits = self.backend._logits()
        bonus = self.bonuses(reply) if self.bonuses is not None else {}
        token = self._best(_scored(self.np, logits, reply, self.penalty, bonus))
        # Where the bonuses acted, the pick without them too: a change is recorded (``flipped``).
        if bonus and self.bonuses is not None and self._best(_scored(self.np, logits, reply, self.penalty, {})) != token:
            self.bonuses.flipped(reply)
        if self.grammar is not None:
            self.llama_cpp.llama_sampler_accept(self.grammar, token)
            self.picks += 1
        return token

    def _best(self, scores: Any) -> int:
        token = int(self.np.argmax(scores))
        if self.grammar is not None and not (self.lazy and self._allowed(token, float(scores[token]))):
            token = self._best_allowed(scores)
        return token

    def _best_allowed(self, scores: Any) -> int:
        if self.lazy:
            # The next best tokens first, a one-token question each: 151k masked costs ~19 ms.
            token = best_allowed(scores, lambda t: self._allowed(t, float(scores[t])))
            if token is not None:
                return token
        self.full_masks += 1
        masked = self._masked(scores)
        token = int(self.np.argmax(masked))
        if not self.np.isfinite(masked[token]):
            raise GrammarError("the grammar allows no token here (the grammar is broken)")
        return token


class _Sampled(_Pick):
    """Temperature sampling under an optional grammar: top-p of the tokens the grammar allows, at
    the temperature, drawn as masking first would draw it (``draw``), the grammar asked about the
    best tokens one at a time; the whole vocabulary is masked only when they do not settle it."""

    def __init__(self, backend: LlamaCppBackend, grammar: Grammar | None, temperature: float, top_p: float,
                 seed: int | None, repeat_penalty: float, *, bonuses: Bonuses | None = None):
        super().__init__(backend, grammar, repeat_penalty, bonuses)
        self.temperature, self.top_p = temperature, top_p
        self.rng = self.np.random.default_rng(seed if seed is not None else 0)

    def __call__(self, reply: list[int]) -> int:
        scores = self._scores(reply)
        grammar = self.grammar
        token = draw(scores, lambda t: grammar is None or self._allowed(t), top_p=self.top_p,
                     temperature=self.temperature, rng=self.rng)
        if token is None:
            masked = scores if grammar is None else self._masked(scores)
            token = nucleus_draw(masked, top_p=self.top_p, temperature=self.temperature, rng=self.rng)
            if token is None:
                raise GrammarError("the grammar allows no token here (the grammar is broken)")
        if grammar is not None:
            self.llama_cpp.llama_sampler_accept(grammar, token)
        return token
