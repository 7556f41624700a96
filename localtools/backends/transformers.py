"""transformers backend: a Hugging Face model directory or one of our GGUF files, on CPU or CUDA.

Grammars reach the decoder through a mask engine, one of ``ENGINES``, driven directly
(``_masks``): each gets its rendering of the same ``Grammar`` (Lark for llguidance, GBNF for
xgrammar, one regex for outlines_core), so no engine has a grammar of its own to keep in sync.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import shutil
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, ClassVar, Literal

from .._errors import BackendNotInstalled, ContextLengthExceeded, GrammarError, ModelError, UsageError
from .._types import Prompt
from ..grammar import Grammar, GrammarNotRegular
from ..host._catalog import cache_dir
from ..host._gguf import read_metadata
from ..host._machine import cpu_flags
from ._base import Bias, Capabilities, Generation, Parting, TokenChoice
from ._decode import Bonuses, FastForward, Heard, decode, penalised, top_choices, unwritten
from ._masks import Matcher, compile_grammar, new_matcher

__all__ = ["DEFAULT_ENGINE", "ENGINES", "TransformersBackend", "converted_dir"]

INSTALL_HINT = "pip install torch==2.13.0 'localtools[transformers]'  (pin torch on CPU: a bare torch pulls a multi-GB CUDA build)"

#: Mask engines, one record each: the outlines backend class that builds its per-model index,
#: and how our grammar is rendered for it. The default was picked by measurement (BENCHMARKS.md).
_ENGINES: dict[str, tuple[str, Callable[[Grammar], str]]] = {
    "llguidance": ("LLGuidanceBackend", Grammar.to_lark),
    "xgrammar": ("XGrammarBackend", Grammar.to_gbnf),
    "outlines_core": ("OutlinesCoreBackend", Grammar.to_regex),
}
ENGINES = tuple(_ENGINES)
#: xgrammar: llguidance builds a new tool set's first mask under ``auto`` in tens of milliseconds
#: where xgrammar takes seconds (BENCHMARKS.md), but as the default it refused a token the lazy
#: check had taken on an enum tool set (tests/test_models.py); until that is understood, xgrammar.
DEFAULT_ENGINE = "xgrammar"


def _import() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise BackendNotInstalled(f"the transformers backend needs torch and transformers: {INSTALL_HINT}") from exc
    return torch, transformers


def _check_engine(name: str) -> None:
    if name not in _ENGINES:
        raise UsageError(f"unknown mask engine {name!r}; expected one of {', '.join(ENGINES)}")


class _Engine:
    """One mask engine for a model: outlines' backend object holds its per-model work (the
    tokenizer index, built once); grammars are compiled once per rendering and cached."""

    def __init__(self, name: str, hf_model: Any, tokenizer: Any, cache_size: int = 32) -> None:
        _check_engine(name)
        class_name, self._render = _ENGINES[name]
        try:
            import outlines
            from outlines import backends
        except ImportError as exc:
            raise BackendNotInstalled(f"constrained decoding on transformers needs outlines: {INSTALL_HINT}") from exc
        model = outlines.from_transformers(hf_model, tokenizer)
        try:
            self.backend = getattr(backends, class_name)(model)
        except ImportError as exc:
            raise BackendNotInstalled(f"the {name} mask engine is not installed: pip install {name}") from exc
        self.name = name
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._size = cache_size

    def matcher(self, grammar: Grammar, vocab_size: int) -> Matcher:
        """A fresh matcher for one generation under ``grammar`` (``vocab_size``: the logits' width)."""
        try:
            source = self._render(grammar)
        except GrammarNotRegular as exc:
            raise GrammarError(
                f"the {self.name} engine takes regular grammars only and this one recurses ({exc}); "
                "use engine='llguidance' or 'xgrammar'"
            ) from exc
        compiled = self._cache.pop(source, None)
        if compiled is None:
            compiled = compile_grammar(self.backend, self.name, source)
        self._cache[source] = compiled
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return new_matcher(self.name, compiled, self.backend, vocab_size)


#: CPU flags (as /proc/cpuinfo spells them) of native bfloat16 matrix instructions. On such a CPU
#: bfloat16 evaluated a 1,800-token prompt 3.4× faster than float32 on Qwen2.5-0.5B (decoding 1.2×);
#: without them torch emulates bfloat16, slower than float32.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def auto_dtype(device: str) -> str:
    """The dtype ``dtype="auto"`` picks on ``device``: bfloat16 where the hardware computes it natively."""
    if device.startswith("cuda") or BF16_CPU_FLAGS & cpu_flags():
        return "bfloat16"
    return "float32"


_KEPT = "complete"  # written last: a directory without it is a conversion cut short


def converted_dir(path: Path, dtype: str) -> Path:
    """Where the de-quantized copy of the GGUF file ``path`` in ``dtype`` is kept: one per file
    (path, size and time), transformers version and dtype, so a changed file converts again."""
    import transformers

    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}|{dtype}"
    return cache_dir().parent / "converted" / f"{path.stem}-{dtype}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _keep(model: Any, tokenizer: Any, dest: Path) -> None:
    """Save a model loaded from GGUF as a model directory (safetensors), whole or not at all."""
    partial = dest.with_name(f"{dest.name}.{os.getpid()}.partial")
    # The weights are plain tensors once de-quantized; transformers refuses to save a model that
    # still names its GGUF quantizer, so it is unset for the save and put back.
    quantizer, config = getattr(model, "hf_quantizer", None), model.config
    quantization = config.__dict__.pop("quantization_config", None)
    model.hf_quantizer = None
    try:
        tokenizer.save_pretrained(partial)
        model.save_pretrained(partial)
        (partial / _KEPT).touch()
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            partial.replace(dest)
        except OSError:
            if not (dest / _KEPT).is_file():
                raise
            # Another process kept its conversion first: the same bytes, read from now on.
    except OSError as exc:
        warnings.warn(f"could not keep the converted model in {dest} ({exc}); the next load converts again",
                      RuntimeWarning, stacklevel=3)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        model.hf_quantizer = quantizer
        if quantization is not None:
            config.quantization_config = quantization


_READING = threading.Lock()


@contextmanager
def _one_reading() -> Iterator[None]:
    """Within one load from a GGUF file, read the file and build gguf's tensor-name map once.

    transformers parses the whole file (every vocabulary entry as its own array) for the tokenizer,
    again for the config and again for the weights, and rebuilds the name map once per module: most
    of a first load (SmolLM2-135M: 53 s, 23 s with one reading). Both are looked up on the ``gguf``
    module at call time, so they are swapped there for the load and put back after it.
    """
    try:
        import gguf as module
    except ImportError:  # transformers says what is missing when it needs it
        yield
        return
    gguf: Any = module
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: str | os.PathLike[str], mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    with _READING:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(name_map)
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map


class TransformersBackend:
    """Runs a causal LM through transformers with its own decode loop (KV cache, greedy or top-p).

    ``path``: a GGUF file (loaded with ``gguf_file=``, de-quantized; needs ``gguf``) or a model
    directory with ``config.json``. ``device``: ``"cpu"``, ``"cuda"`` or ``"auto"`` (CUDA when
    present). ``dtype``: ``"auto"`` (``auto_dtype``: bfloat16 on CUDA and on CPUs with native
    bfloat16, float32 on other CPUs) or a torch dtype name. A GGUF file is de-quantized once: the
    result is kept as a model directory under the cache (``converted_dir``; as large as the model in
    ``dtype``, e.g. 2 GB for 0.5B parameters in float32), which later loads read in seconds instead
    of converting again (about 50 s for Qwen 0.5B on 2 cores); ``keep_converted=False`` neither
    reads nor writes it.
    ``engine``: the mask engine for grammars, one of ``ENGINES``; ``mask`` and ``fast_forward``
    as on llama-cpp. Prompt segments marked as data are tokenized with special-token parsing off,
    as on llama.cpp.
    """

    name = "transformers"
    #: For ``localtools doctor``: the distributions this backend needs, its grammar engines'
    #: distributions, options to try again with after a crash, and the fix for each way it dies.
    packages: ClassVar[tuple[str, ...]] = ("torch", "transformers", "outlines", "gguf")
    install_hint: ClassVar[str] = INSTALL_HINT
    engine_packages: ClassVar[tuple[str, ...]] = ("xgrammar", "llguidance", "outlines_core")
    after_crash: ClassVar[dict[str, Any]] = {}
    crash_fixes: ClassVar[dict[str, str]] = {
        "SIGILL": "torch was built for another CPU: pip install --force-reinstall torch==2.13.0",
        "*": "reinstall the CPU build of torch (pip install --force-reinstall torch==2.13.0) and run "
             "localtools doctor again; if it still crashes, report it with this output",
    }

    @staticmethod
    def build_info() -> dict[str, str]:
        """What this torch can do here (for ``localtools doctor``)."""
        torch, _ = _import()
        cuda = torch.cuda.is_available()
        return {
            "torch": f"{torch.__version__}, {torch.get_num_threads()} CPU threads",
            "CUDA": f"yes: {torch.cuda.get_device_name(0)} (torch CUDA {torch.version.cuda})" if cuda
            else "no (device='cpu')",
            "dtype (auto)": auto_dtype("cuda" if cuda else "cpu"),
        }

    def __init__(
        self,
        path: str | Path,
        *,
        device: str = "auto",
        dtype: str = "auto",
        engine: str = DEFAULT_ENGINE,
        seed: int = 0,
        mask: Literal["lazy", "full"] = "lazy",
        fast_forward: bool = True,
        keep_converted: bool = True,
    ) -> None:
        _check_engine(engine)
        if mask not in ("lazy", "full"):
            raise UsageError(f"mask must be 'lazy' or 'full', not {mask!r}")
        #: "lazy": take the token the model wants and ask the grammar about that one token,
        #: masking the vocabulary only on a rejection (the same choice, see ``_Steps.pick``);
        #: "full": mask every step.
        self.mask = mask
        #: Append the tokens the grammar forces in one batch instead of one by one (``FastForward``).
        self.fast_forward = fast_forward
        #: Of the last generation under a grammar: (whole-vocabulary masks, tokens picked).
        self.mask_stats = (0, 0)
        torch, transformers = _import()
        path = Path(path)
        if path.is_file():
            directory, gguf_file = path.parent, path.name
            self.metadata: dict[str, Any] = read_metadata(path)
        elif (path / "config.json").is_file():
            directory, gguf_file = path, None
            self.metadata = {}
        else:
            raise ModelError(f"{path} is neither a GGUF file nor a model directory with config.json")
        self.path = path
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ModelError("device='cuda' was asked for, but torch sees no CUDA device (is this a CPU build of torch?)")
        if dtype == "auto":
            dtype = auto_dtype(device)
        torch_dtype = getattr(torch, dtype, None)
        if not isinstance(torch_dtype, torch.dtype):
            raise UsageError(f"unknown dtype {dtype!r}; expected auto, float32, float16 or bfloat16")
        self.device, self.dtype = device, torch_dtype
        kept = converted_dir(path, dtype) if gguf_file and keep_converted else None
        if kept is not None and (kept / _KEPT).is_file():
            directory, gguf_file = kept, None
        kwargs: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
        try:
            with _one_reading() if gguf_file else nullcontext():
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(directory), **kwargs)
                self.model = transformers.AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch_dtype,
                                                                               **kwargs)
        except ImportError as exc:
            raise BackendNotInstalled(f"loading {path.name} needs a package that is missing ({exc}): {INSTALL_HINT}") from exc
        except (OSError, ValueError) as exc:
            raise ModelError(f"transformers could not load {path}: {exc}") from exc
        if kept is not None and gguf_file:
            _keep(self.model, self.tokenizer, kept)
        self.model.to(device).eval()
        # transformers renamed past_key_values to cache during 5.x; speak whichever this one takes.
        params = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self._step_kwargs: dict[str, Any] = {"use_cache": True}
        if "logits_to_keep" in params:
            self._step_kwargs["logits_to_keep"] = 1  # the prompt's other logits are never read
        if not self.metadata:
            config = self.model.config
            self.metadata = {
                "general.architecture": config.model_type,
                "general.name": Path(str(config.name_or_path)).name,
                "tokenizer.chat_template": self.tokenizer.chat_template or "",
            }
        self.bos_token = self._token_text("tokenizer.ggml.bos_token_id", self.tokenizer.bos_token)
        self.eos_token = self._token_text("tokenizer.ggml.eos_token_id", self.tokenizer.eos_token)
        self._eog = self._end_ids()
        # Special tokens, added ones flagged special included (Llama 3's <|python_tag|>): never
        # fast-forwarded.
        added = getattr(self.tokenizer, "added_tokens_decoder", {}) or {}
        self._special = frozenset(self.tokenizer.all_special_ids) | {i for i, t in added.items() if getattr(t, "special", False)}
        #: The special tokens but the ends, with their text (``_specials_but_ends``).
        self._specials: list[tuple[int, str]] | None = None
        # The logits' width, padded rows included (multimodal configs have no top-level vocab_size).
        self._vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        self.engine_name = engine
        self._engines: dict[str, _Engine] = {}
        self._seed = seed
        # The last generation's KV cache and the ids in it: the next prompt of a conversation
        # starts with them, so only its new tokens are evaluated (as llama.cpp does).
        self._prefix: tuple[list[int], Any] | None = None
        self._prefix_lock = threading.Lock()
        #: Prompt tokens the last generation took from the cache instead of evaluating them.
        self.reused_tokens = 0
        #: The last greedy generation under a grammar's best tokens at each pick (``Heard``).
        self._heard: Heard | None = None

    def _token_text(self, key: str, fallback: str | None) -> str:
        token_id = self.metadata.get(key)
        if token_id is not None:
            return str(self.tokenizer.convert_ids_to_tokens(int(token_id)))
        return fallback or ""

    def _end_ids(self) -> set[int]:
        # End-of-generation tokens: the tokenizer's EOS, the generation config's, and the GGUF's.
        ids: set[int] = set()
        for value in (self.tokenizer.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None),
                      self.metadata.get("tokenizer.ggml.eos_token_id"), self.metadata.get("tokenizer.ggml.eot_token_id")):
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(int(v) for v in value)
        return ids

    def _specials_but_ends(self) -> list[tuple[int, str]]:
        """The special tokens but the ends, with their text (``_decode.unwritten``)."""
        if self._specials is None:
            self._specials = [(t, str(self.tokenizer.decode([t], skip_special_tokens=False)))
                              for t in sorted(self._special - self._eog)]
        return self._specials

    @property
    def engine(self) -> _Engine:
        """The current mask engine; set ``engine_name`` to switch (each is built once, on first use)."""
        if self.engine_name not in self._engines:
            self._engines[self.engine_name] = _Engine(self.engine_name, self.model, self.tokenizer)
        return self._engines[self.engine_name]

    @property
    def n_ctx(self) -> int | None:
        """The context the model was trained for (``max_position_embeddings``), when it says."""
        limit = getattr(self.model.config, "max_position_embeddings", None)
        return int(limit) if isinstance(limit, int) and limit > 0 else None

    @property
    def capabilities(self) -> Capabilities:
        """In process, one request at a time."""
        return Capabilities(n_ctx=self.n_ctx, next_tokens=True, continues=True, biases=True, parts=True)

    def next_tokens(self, prompt: Prompt, reply: Sequence[int] = (), *, k: int = 20) -> list[TokenChoice]:
        """The ``k`` most probable next tokens after ``prompt`` and ``reply`` (``NextTokens``), from
        the cached prefix of the last generation."""
        torch, _ = _import()
        ids = self.tokenize(prompt) + list(reply)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit and len(ids) >= limit:
            raise ContextLengthExceeded(len(ids), limit)
        text = self._choice_text
        heard = self._heard
        if heard is not None and (held := heard.choices(ids, k, text, self._eog.__contains__)) is not None:
            return held
        with torch.inference_mode():
            keep, past = self._take_prefix(ids)
            result = self.model(input_ids=torch.tensor([ids[keep:]], device=self.device), **{self._cache_arg: past},
                                **self._step_kwargs)
            logits = result.logits[0, -1, : len(self.tokenizer)].float().cpu().numpy()
        self._keep_prefix(ids, getattr(result, self._cache_arg))
        return top_choices(logits, k, text, self._eog.__contains__)

    def _choice_text(self, token: int) -> str:
        return str(self.tokenizer.decode([token], skip_special_tokens=True))

    def reply_text(self, reply: Sequence[int]) -> str:
        """The text of ``reply`` (``NextTokens``)."""
        return str(self.tokenizer.decode(list(reply), skip_special_tokens=True))

    def health(self) -> None:
        """Nothing behind it to ask."""
        return None

    def drop_prompt_cache(self) -> None:
        """Forget the evaluated prefix, so the next prompt is processed from its first token (for
        benchmarks that compare prompt processing)."""
        with self._prefix_lock:
            self._prefix = None

    def _take_prefix(self, ids: list[int]) -> tuple[int, Any]:
        """The cache of the longest prefix ``ids`` shares with the last generation (never all of
        ``ids``: the last token is evaluated for its logits), and that prefix's length. A
        generation running meanwhile on another thread finds no cache and starts cold."""
        with self._prefix_lock:
            held, self._prefix = self._prefix, None
        if held is None:
            return 0, None
        cached, cache = held
        shared = next((i for i, (a, b) in enumerate(zip(cached, ids, strict=False)) if a != b), min(len(cached), len(ids)))
        keep = min(shared, len(ids) - 1)
        length = cache.get_seq_length()
        if keep <= 0 or length != len(cached) or (keep < length and not getattr(cache, "is_croppable", True)):
            return 0, None
        if keep < length:
            cache.crop(keep - length)  # negative: drop that many from the end (every transformers reads it so)
        return keep, cache

    def _keep_prefix(self, ids: list[int], cache: Any) -> None:
        with self._prefix_lock:
            self._prefix = (ids, cache)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _data_ids(self, text: str) -> list[int]:
        # Text from a conversation: never a control token.
        return list(self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    def tokenize(self, prompt: Prompt) -> list[int]:
        """Token ids of ``prompt``: template text with special tokens, message text without."""
        ids: list[int] = []
        for text, is_data in prompt.segments:
            ids += self.tokenizer(text, add_special_tokens=False, split_special_tokens=is_data)["input_ids"]
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
        torch, _ = _import()
        prompt_ids = self.tokenize(prompt)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit and len(prompt_ids) >= limit:
            raise ContextLengthExceeded(len(prompt_ids), limit)
        if limit:
            max_tokens = min(max_tokens, limit - len(prompt_ids))
        matcher = self.engine.matcher(grammar, self._vocab_size) if grammar is not None else None
        ahead = FastForward(grammar, self._encode, self._special.__contains__) \
            if grammar is not None and self.fast_forward else None
        generator = torch.Generator(device="cpu").manual_seed(seed if seed is not None else self._seed)
        steps = _Steps(self, torch, prompt_ids, matcher, ahead, generator, temperature, top_p, repeat_penalty)
        if grammar is not None and (never := unwritten(self._specials_but_ends(), grammar.literals())):
            steps.unwritten = torch.tensor(never, device=self.device)
        if bias is not None:
            steps.bonuses = Bonuses(bias, self.reply_text, self._data_ids)
        # A greedy reply under a grammar is the one decisions are read after: what the model
        # wanted at each pick is kept for them.
        steps.heard = Heard(prompt_ids, reply, self._heard) if grammar is not None and temperature <= 0 else None
        with torch.inference_mode():
            try:
                generation = decode(steps, prompt_tokens=len(prompt_ids), max_tokens=max_tokens, stop=stop,
                                    cancel=cancel, on_text=on_text, reply=reply, parting=parting)
            finally:
                self.mask_stats = (steps.full_masks, steps.picks)
        if steps.bonuses is not None:
            generation.biased = tuple(steps.bonuses.flips)
        if steps.heard is not None:
            steps.heard.end(generation.tokens)
            self._heard = steps.heard
        # Kept only after a generation that ended whole: an interrupted one may have left the
        # cache and its ids apart.
        self._keep_prefix(steps.ids[0].tolist(), steps.past)
        return generation

    @staticmethod
    def _pick(torch: Any, logits: Any, temperature: float, top_p: float, generator: Any) -> int:
        if temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / temperature, dim=-1).cpu()
        if top_p < 1.0:
            ordered, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(ordered, dim=0) - ordered < top_p
            probs = torch.zeros_like(probs).scatter(0, order[keep], ordered[keep])
        return int(torch.multinomial(probs, 1, generator=generator))


class _Steps:
    """Transformers' steps for the shared decode loop: one forward pass per batch, with a KV cache."""

    def __init__(self, backend: TransformersBackend, torch: Any, prompt_ids: list[int], matcher: Matcher | None,
                 ahead: FastForward | None, generator: Any, temperature: float, top_p: float,
                 repeat_penalty: float) -> None:
        self.backend, self.torch, self.matcher, self.ahead, self.generator = backend, torch, matcher, ahead, generator
        self.temperature, self.top_p, self.penalty = temperature, top_p, repeat_penalty
        self.ids = torch.tensor([prompt_ids], device=backend.device)
        self.past: Any = None
        self.logits: Any = None
        self.full_masks = self.picks = 0
        self.heard: Heard | None = None
        self.bonuses: Bonuses | None = None
        #: Special tokens never picked under the grammar (``_decode.unwritten``).
        self.unwritten: Any = None

    def _forward(self, input_ids: Any) -> None:
        b = self.backend
        result = b.model(input_ids=input_ids, **{b._cache_arg: self.past}, **b._step_kwargs)
        self.past = getattr(result, b._cache_arg)
        self.logits = result.logits[:, -1, :].float()

    def start(self, reply: list[int]) -> None:
        if reply and self.matcher is not None and self._take(reply) != len(reply):
            raise GrammarError("the reply to go on from is not in the grammar")
        prompt = self.ids.shape[1]
        if reply:
            self.ids = self.torch.cat([self.ids, self.torch.tensor([reply], device=self.backend.device)], dim=1)
        # The cache holds the reply the tokens came from: only what it lacks is evaluated.
        keep, self.past = self.backend._take_prefix(self.ids[0].tolist())
        self.backend.reused_tokens = min(keep, prompt)
        self._forward(self.ids[:, keep:])

    def pick(self, reply: list[int]) -> int:
        torch, logits = self.torch, self.logits[0]
        if self.heard is not None:  # before the penalty, which changes the row in place
            self.heard.hear(reply, logits[: len(self.backend.tokenizer)].float().cpu().numpy())
        if self.penalty != 1.0 and reply:
            seen = torch.tensor(penalised(reply), device=logits.device)
            picked = logits[seen]
            logits[seen] = torch.where(picked > 0, picked / self.penalty, picked * self.penalty)
        if self.unwritten is not None:
            logits[self.unwritten] = float("-inf")
        bonus = self.bonuses(reply) if self.bonuses is not None else {}
        # Where the bonuses act on a greedy pick, the row without them too: a change is recorded.
        plain = logits.clone() if bonus and self.temperature <= 0 else None
        for token, add in bonus.items():
            logits[token] += add
        matcher = self.matcher
        if matcher is None:
            token = self.backend._pick(torch, logits, self.temperature, self.top_p, self.generator)
            if plain is not None and self.bonuses is not None and int(torch.argmax(plain)) != token:
                self.bonuses.flipped(reply)
            return token
        # Lazy: the token the model wants, unmasked, and the grammar asked about that one token.
        # Greedy, the best token, if allowed, is the best allowed one. Sampled (without top-p),
        # a token drawn from p and kept when allowed, else drawn again from p masked to the
        # allowed set A, is t in A with probability p(t) + (1 - p(A)) p(t) / p(A) = p(t) / p(A):
        # exactly the masked distribution. Top-p cuts the masked distribution's tail, which a
        # draw from p cannot see, so it masks first.
        lazy = self.backend.mask == "lazy" and (self.temperature <= 0 or self.top_p >= 1.0)
        token = self.backend._pick(torch, logits, self.temperature, self.top_p, self.generator) if lazy else -1
        if token < 0 or not matcher.allows(token):
            self.full_masks += 1
            matcher.mask(logits)
            matcher.check()
            if not bool(torch.isfinite(logits).any()):
                raise GrammarError("the grammar allows no token here (the grammar is broken)")
            token = self.backend._pick(torch, logits, self.temperature, self.top_p, self.generator)
        if plain is not None and self.bonuses is not None and self._best_allowed(plain) != token:
            self.bonuses.flipped(reply)
        matcher.consume([token])
        matcher.check()
        self.picks += 1
        return token

    def _best_allowed(self, row: Any) -> int:
        """The best token of ``row`` the grammar allows now (``row`` is masked in place)."""
        torch, matcher = self.torch, self.matcher
        token = int(torch.argmax(row))
        if matcher is not None and not matcher.allows(token):
            matcher.mask(row)
            token = int(torch.argmax(row))
        return token

    def forced(self, reply: list[int]) -> tuple[list[int], bool]:
        if self.ahead is None or self.matcher is None:
            return [], False

        def text() -> str | None:
            whole = self.text(reply, final=False)
            return None if whole.endswith("\ufffd") else whole

        ids, ends = self.ahead.after(text)
        # The first token the engine rejects (it never should) ends the batch.
        kept = ids[: self._take(ids)]
        # The grammar's end is taken only where the engine allows an end token too.
        return kept, ends and len(kept) == len(ids) and any(self.matcher.allows(e) for e in self.backend._eog)

    def _take(self, tokens: list[int]) -> int:
        """Consume ``tokens`` into the matcher while it allows them, each asked about after the
        ones before it; how many it took."""
        assert self.matcher is not None
        for taken, token in enumerate(tokens):
            if not self.matcher.allows(token):
                return taken
            self.matcher.consume([token])
        return len(tokens)

    def advance(self, tokens: list[int]) -> None:
        step = self.torch.tensor([tokens], device=self.backend.device)
        self.ids = self.torch.cat([self.ids, step], dim=1)
        self._forward(step)

    def is_end(self, token: int) -> bool:
        return token in self.backend._eog

    def text(self, tokens: list[int], *, final: bool) -> str:
        return str(self.backend.tokenizer.decode(tokens, skip_special_tokens=True))
