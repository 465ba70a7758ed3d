"""Tiny offline models (a random-weight Llama/Qwen2 causal LM with a BPE tokenizer trained in
code), scripted policies, and `TinyModelGenerator`: a tiny model behind an adapter's generate call."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from gem_core.errors import DependencyNotInstalled, InvalidArgument

__all__ = [
    "CHATML_TEMPLATE",
    "ScriptedPolicy",
    "TextPolicy",
    "TinyModelGenerator",
    "SPECIAL_TOKENS",
    "build_tiny_tokenizer",
    "build_tiny_model",
    "load_tiny_model",
    "tiny_model_cache_dir",
]

# Bump when the build changes, so cached models are rebuilt.
_BUILDER_VERSION = 1

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

#: A ChatML template (the Qwen layout without tools): each message is
#: ``<|im_start|>{role}\n{content}<|im_end|>\n``; the generation prompt is
#: ``<|im_start|>assistant\n``. The model stops by emitting ``<|im_end|>``.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_ARCHS = ("llama", "qwen2")
_lock = threading.Lock()


def _require(module: str, purpose: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise DependencyNotInstalled(module, extra="rl", purpose=purpose) from None


def _corpus() -> list[str]:
    """Text the tokenizer is trained on: game rules, hints, boxed numbers, chat words."""
    lines = [
        "You are playing Guess The Number. Find the hidden integer between 1 and 10 "
        "(inclusive) within 4 turns. After each guess you are told whether the target is "
        "higher or lower. Give each guess as \\boxed{N}, for example \\boxed{5}.",
        "No guesses yet. Enter your first guess.",
        "Correct! The number was 7; found in 3 turns.",
        "Format error at turn 1: no complete \\boxed{...} found. Game over.",
        "Give your guess as \\boxed{N} with N an integer.",
        "You have used all 4 turns. Game over.",
        "You are a helpful assistant. Think step by step, then answer.",
        "<think> The target is higher, so I guess the middle. </think>",
        "system user assistant tool observation action reward answer",
        "the quick brown fox jumps over the lazy dog THE QUICK BROWN FOX 0123456789",
        "a b c d e f g h i j k l m n o p q r s t u v w x y z , . ; : ! ? ( ) [ ] { } - + = * / _",
    ]
    for n in range(0, 101):
        lines.append(
            f"Turn {n % 10}: you guessed {n}; the target is higher than {n}. "
            f"Guesses so far: {n} (lower), {n + 1} (higher). \\boxed{{{n}}}"
        )
        lines.append(f"{n} is outside the range 1-{n}. you already guessed {n}. \\boxed{{{n}}}")
    return lines


def _config_hash(payload: dict[str, Any]) -> str:
    import transformers

    payload = {**payload, "builder": _BUILDER_VERSION, "transformers": transformers.__version__}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def tiny_model_cache_dir() -> Path:
    """Where built tiny models are cached: ``$GEM_CACHE/tiny-models`` (default ``~/.cache/gem``)."""
    root = os.environ.get("GEM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gem")
    return Path(root) / "tiny-models"


def _make_tokenizer(vocab: int, chat_template: str) -> Any:
    tokenizers = _require("tokenizers", "building a tiny offline tokenizer")
    transformers = _require("transformers", "building a tiny offline tokenizer")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        clean_up_tokenization_spaces=False,
        model_max_length=4096,
    )
    fast.chat_template = chat_template
    return fast


def build_tiny_tokenizer(
    path: str | os.PathLike[str] | None = None,
    *,
    vocab: int = 1024,
    chat_template: str = CHATML_TEMPLATE,
) -> Path:
    """Build (or reuse) a byte-level BPE tokenizer with a ChatML template; no torch needed.

    The vocabulary is trained in code on a small built-in corpus (game text, digits,
    ``\\boxed{}``), with special tokens ``<|endoftext|>`` (padding), ``<|im_start|>`` and
    ``<|im_end|>`` (end of a turn and the EOS token).

    Args:
        path: directory to save to; ``None`` uses the cache (`tiny_model_cache_dir`).
        vocab: target vocabulary size (at least 300; the built-in corpus yields at most
            about 760 tokens, so larger values change nothing).
        chat_template: the Jinja chat template to store.

    Returns:
        The directory, loadable with ``AutoTokenizer.from_pretrained`` offline.
    """
    if vocab < 300:
        raise InvalidArgument(f"vocab must be >= 300 (256 bytes + specials + merges), got {vocab}")
    key = _config_hash({"kind": "tokenizer", "vocab": vocab, "chat_template": chat_template})

    def build(out: Path) -> None:
        _make_tokenizer(vocab, chat_template).save_pretrained(out)

    return _build_cached(path, f"tokenizer-{key}", key, build)


def build_tiny_model(
    path: str | os.PathLike[str] | None = None,
    *,
    vocab: int = 1024,
    arch: str = "llama",
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    max_positions: int = 4096,
    init_std: float = 0.1,
    seed: int = 0,
    chat_template: str = CHATML_TEMPLATE,
) -> Path:
    """Build (or reuse) a tiny causal LM with random weights and the tiny tokenizer.

    The result is a normal Hugging Face model directory: ``AutoModelForCausalLM
    .from_pretrained(path)`` and ``AutoTokenizer.from_pretrained(path)`` load it with no
    network. Models are cached by a hash of the configuration (and the transformers
    version): a second call with the same arguments returns at once.

    Args:
        path: directory to write; ``None`` uses the cache (`tiny_model_cache_dir`). An
            existing directory built with the same configuration is reused.
        vocab: target tokenizer vocabulary size (see `build_tiny_tokenizer`).
        arch: ``"llama"`` or ``"qwen2"``.
        hidden: hidden size (the MLP is 2x).
        layers: number of decoder layers.
        heads: attention heads (key/value heads: half of them, at least 1).
        max_positions: maximum sequence length.
        init_std: standard deviation of the random weights. Larger than the usual 0.02 so
            that greedy decoding depends on the prompt (a 0.02 model repeats one token
            whatever it reads), while sampling stays close to uniform.
        seed: seed of the random weights.
        chat_template: the tokenizer's chat template.

    Returns:
        The model directory.
    """
    if arch not in _ARCHS:
        raise InvalidArgument(f"arch must be one of {_ARCHS}, got {arch!r}")
    if hidden % heads:
        raise InvalidArgument(f"hidden ({hidden}) must be divisible by heads ({heads})")
    cfg = {
        "kind": "model",
        "vocab": vocab,
        "arch": arch,
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "max_positions": max_positions,
        "init_std": init_std,
        "seed": seed,
        "chat_template": chat_template,
    }
    key = _config_hash(cfg)

    def build(out: Path) -> None:
        torch = _require("torch", "building a tiny model")
        transformers = _require("transformers", "building a tiny model")
        tokenizer = _make_tokenizer(vocab, chat_template)
        tokenizer.save_pretrained(out)
        common = dict(
            vocab_size=len(tokenizer),
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2),
            max_position_embeddings=max_positions,
            initializer_range=init_std,
            tie_word_embeddings=True,
            bos_token_id=None,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            torch_dtype="float32",
        )
        if arch == "llama":
            config = transformers.LlamaConfig(**common)
        else:
            config = transformers.Qwen2Config(**common)
        gen = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
            model = transformers.AutoModelForCausalLM.from_config(config)
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.bos_token_id = None
        model.save_pretrained(out, safe_serialization=True)

    return _build_cached(path, f"{arch}-h{hidden}-l{layers}-{key}", key, build)


def load_tiny_model(**kwargs: Any) -> tuple[Any, Any]:
    """`build_tiny_model` (cached) and load it: returns ``(model, tokenizer)`` in eval mode."""
    transformers = _require("transformers", "loading a tiny model")
    _require("torch", "loading a tiny model")
    path = build_tiny_model(**kwargs)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model.eval()
    return model, tokenizer


def _build_cached(path: str | os.PathLike[str] | None, name: str, key: str, build: Any) -> Path:
    """Build into a temp dir next to the target and rename it into place (atomic)."""
    target = Path(path) if path is not None else tiny_model_cache_dir() / name
    marker = target / "gem_tiny.json"
    with _lock:
        if marker.is_file():
            try:
                if json.loads(marker.read_text()).get("key") == key:
                    return target
            except (OSError, ValueError):
                pass
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            build(tmp)
            (tmp / "gem_tiny.json").write_text(json.dumps({"key": key}))
            if target.exists():
                if path is None or marker.is_file() or not any(target.iterdir()):
                    shutil.rmtree(target)
                else:
                    raise InvalidArgument(
                        f"{target} exists and is not a tiny model built by gem_core; "
                        "pass an empty or new directory"
                    )
            try:
                os.replace(tmp, target)
            except OSError:
                # Another process won the race: use its copy.
                if not (target / "gem_tiny.json").is_file():
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


class ScriptedPolicy:
    """A `Policy` from a function, for tests, benchmarks and conformance scenarios.

    Args:
        respond: ``respond(prompt_ids, sampling)`` returning a `GenerationResult`, or a
            list of token ids (then every logprob is 0.0 and the finish reason ``"stop"``
            when the last id is in ``stop_token_ids``, else ``"length"``). It may raise
            to simulate a backend failure.
        stop_token_ids: see above.
        delay_s: seconds to ``await`` before answering (simulates a server).
    """

    def __init__(self, respond: Any, *, stop_token_ids: tuple[int, ...] = (), delay_s: float = 0.0):
        self.respond = respond
        self.stop_token_ids = tuple(stop_token_ids)
        self.delay_s = delay_s
        self.calls = 0

    async def generate(self, prompt_ids: list[int], sampling: Any) -> Any:
        import asyncio

        from gem_core.rl.rollout import GenerationResult

        self.calls += 1
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        out = self.respond(prompt_ids, sampling)
        if isinstance(out, GenerationResult):
            return out
        ids = [int(t) for t in out]
        reason = "stop" if ids and ids[-1] in self.stop_token_ids else "length"
        return GenerationResult(ids, [0.0] * len(ids), reason)


class TextPolicy(ScriptedPolicy):
    """A `ScriptedPolicy` answering in text: ``respond(prompt_text) -> response_text``.

    The response is tokenized (``add_special_tokens=False``) and the tokenizer's EOS
    token appended, like a chat model ending its turn.
    """

    def __init__(self, tokenizer: Any, respond: Any, *, delay_s: float = 0.0):
        eos = tokenizer.eos_token_id

        def to_ids(prompt_ids: list[int], sampling: Any) -> list[int]:
            text = respond(tokenizer.decode(prompt_ids, skip_special_tokens=False))
            return list(tokenizer(text, add_special_tokens=False)["input_ids"]) + [eos]

        super().__init__(to_ids, stop_token_ids=(eos,), delay_s=delay_s)


class TinyModelGenerator:
    """A tiny transformers model answering generate calls in this process (adapter tests).

    An adapter's tests put it behind the trainer's own server interface (e.g. verl's
    ``LLMServerClient``), so everything above that call is the trainer's code. Two modes:

    - free: greedy decoding (stops at the tokenizer's EOS or ``max_tokens``);
    - scripted: ``script(tokenizer, prompt_ids) -> ids`` picks the tokens (e.g.
      ``functools.partial(gem_core.testing.conformance.scenario_script, name)``), cut to
      ``max_tokens``; the model scores them, so the log-probs are the model's.

    The model is loaded on first use in the process that generates; the object pickles
    small (without the model), so it can travel into Ray actors.

    Args:
        model_path: a Hugging Face model directory (e.g. `build_tiny_model`).
        script: see above; ``None`` decodes greedily.

    Attributes:
        requests: ``{"prompt_ids", "token_ids", "max_tokens"}`` of every call.
    """

    def __init__(self, model_path: str | os.PathLike[str], *, script: Any = None):
        self.model_path = str(model_path)
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_model=None, _tokenizer=None, _lock=None, requests=[])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def load(self) -> tuple[Any, Any]:
        """``(model, tokenizer)``, loaded once (offline)."""
        with self._lock:
            if self._model is None:
                torch = _require("torch", "TinyModelGenerator")
                transformers = _require("transformers", "TinyModelGenerator")
                torch.set_num_threads(1)
                path = self.model_path
                self._tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
                model = transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
                self._model = model.eval()
        return self._model, self._tokenizer

    def score(self, prompt_ids: list[int], ids: list[int]) -> list[float]:
        """The model's log-prob of each of ``ids`` after ``prompt_ids``."""
        import torch

        model, _ = self.load()
        if not ids:
            return []
        seq = torch.tensor([list(prompt_ids) + list(ids)], dtype=torch.long)
        with torch.no_grad():
            logits = model(seq).logits[0, len(prompt_ids) - 1 : -1].float()
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(1, torch.tensor(ids).unsqueeze(1)).squeeze(1).tolist()

    def greedy(self, prompt_ids: list[int], max_tokens: int) -> list[int]:
        """Greedy decoding with the KV cache, up to EOS (included) or ``max_tokens``."""
        import torch

        model, tokenizer = self.load()
        eos = tokenizer.eos_token_id
        out: list[int] = []
        past = None
        inp = torch.tensor([list(prompt_ids)], dtype=torch.long)
        with torch.no_grad():
            for _ in range(max_tokens):
                res = model(inp, past_key_values=past, use_cache=True)
                past = res.past_key_values
                tok = int(res.logits[0, -1].argmax())
                out.append(tok)
                if tok == eos:
                    break
                inp = torch.tensor([[tok]], dtype=torch.long)
        return out

    def complete(self, prompt_ids: list[int], max_tokens: int) -> tuple[list[int], list[float]]:
        """One response (scripted or greedy) and its log-probs; recorded in `requests`."""
        _, tokenizer = self.load()
        prompt = [int(t) for t in prompt_ids]
        if self.script is not None:
            ids = [int(t) for t in self.script(tokenizer, prompt)][:max_tokens]
        else:
            ids = self.greedy(prompt, max_tokens)
        self.requests.append({"prompt_ids": prompt, "token_ids": ids, "max_tokens": int(max_tokens)})
        return ids, self.score(prompt, ids)

    async def __call__(self, prompt_ids: list[int], max_tokens: int) -> tuple[list[int], list[float], None]:
        """The `gem_core.rl.BudgetedPolicy` generate signature."""
        ids, logprobs = self.complete(prompt_ids, max_tokens)
        return ids, logprobs, None
