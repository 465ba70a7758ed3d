"""Test support: import stand-ins for CUDA-only packages, and the LLM server replaced by a tiny model.

- `install_import_stubs`: OpenRLHF imports ``vllm`` and ``flash_attn`` symbols at module
  level (``samples_generator.py``, ``trainer/ray/vllm_engine.py``,
  ``models/ring_attn_utils.py``); neither package installs without CUDA. Where the real
  package is missing, this puts modules with those names in ``sys.modules`` whose
  symbols raise when used, so a test that reached one would fail (STUBS.md).
- `TinyVLLMEngine`: the LLM server behind OpenRLHF's ``llm_engine`` interface
  (``await generate(prompt_token_ids, sampling_params) -> RequestOutput``), answered by
  `gem_core.rl.testing.TinyModelGenerator` (a real transformers model in this process),
  with `EngineSamplingParams` its request type (the vLLM ``SamplingParams`` fields
  OpenRLHF sets). It also serves as the ``self`` of OpenRLHF's real
  ``RolloutRayActor.generate_responses`` (it has the ``executor`` attribute).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EngineSamplingParams", "TinyVLLMEngine", "STUBBED_MODULES", "install_import_stubs"]

#: The stand-in modules and the symbols OpenRLHF imports from them at module level.
STUBBED_MODULES: dict[str, tuple[str, ...]] = {
    "vllm": ("SamplingParams",),
    "vllm.inputs": ("TokensPrompt",),
    "vllm.utils": ("random_uuid",),
    "flash_attn": (),
    "flash_attn.bert_padding": ("index_first_axis", "pad_input", "rearrange", "unpad_input"),
    "flash_attn.utils": (),
    "flash_attn.utils.distributed": ("all_gather",),
}


def _unavailable(module: str, name: str) -> Any:
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{module}.{name} is an import stand-in of gem-openrlhf's tests ({module} needs CUDA); "
            "the tested path must not use it (see integrations/openrlhf/STUBS.md)"
        )

    stand_in.__name__ = stand_in.__qualname__ = name
    return stand_in


def install_import_stubs() -> list[str]:
    """Put stand-ins for ``vllm`` / ``flash_attn`` in ``sys.modules`` where they are not installed.

    Returns:
        The names of the modules stubbed (none when the real packages are installed).
    """
    stubbed = []
    for top in ("vllm", "flash_attn"):
        if top in sys.modules or importlib.util.find_spec(top) is not None:
            continue
        for name, symbols in STUBBED_MODULES.items():
            if name.split(".")[0] != top:
                continue
            module = types.ModuleType(name)
            module.__doc__ = f"gem-openrlhf test stand-in for {name} (not installable without CUDA)"
            # A package without a version or a file: transformers' availability probes
            # (find_spec, then __version__ / __file__) report the package as absent.
            module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
            module.__path__ = []
            for symbol in symbols:
                setattr(module, symbol, _unavailable(name, symbol))
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
            stubbed.append(name)
    return stubbed


@dataclass
class EngineSamplingParams:
    """The request of `TinyVLLMEngine`: the vLLM ``SamplingParams`` fields OpenRLHF sets."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int | None = None
    min_tokens: int = 1
    skip_special_tokens: bool = False
    logprobs: int | None = 1


@dataclass
class _Logprob:
    logprob: float


@dataclass
class _CompletionOutput:
    token_ids: list[int]
    text: str
    finish_reason: str
    logprobs: list[dict[int, _Logprob]] | None


@dataclass
class _RequestOutput:
    outputs: list[_CompletionOutput] = field(default_factory=list)


class TinyVLLMEngine:
    """A vLLM engine stand-in for OpenRLHF's ``llm_engine``: a tiny transformers model in this process.

    Args:
        model_path: a Hugging Face model directory (`gem_core.rl.testing.build_tiny_model`).
        tokenizer: its tokenizer (decodes ``text``).
        script: ``script(tokenizer, prompt_ids) -> ids`` choosing the tokens (scripted
            mode, the model scores them); ``None`` decodes greedily.
        executor: the agent executor, for OpenRLHF's ``RolloutRayActor.generate_responses``.

    ``requests`` records ``(prompt_ids, max_tokens)`` of every call.
    """

    def __init__(
        self,
        model_path: str,
        tokenizer: Any,
        *,
        script: Callable[[Any, list[int]], list[int]] | None = None,
        executor: Any = None,
    ):
        from gem_core.rl.testing import TinyModelGenerator

        self.generator = TinyModelGenerator(model_path, script=script)
        self.tokenizer = tokenizer
        self.executor = executor
        self.requests: list[tuple[list[int], int]] = []

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        """vLLM's answer to one request: ``RequestOutput``-shaped (``outputs[0].token_ids`` ...)."""
        max_tokens = int(sampling_params.max_tokens or 64)
        prompt = [int(t) for t in prompt_token_ids]
        self.requests.append((prompt, max_tokens))
        ids, logprobs = self.generator.complete(prompt, max_tokens)
        eos = getattr(self.tokenizer, "eos_token_id", None)
        finish = "stop" if ids and ids[-1] == eos else "length"
        entries = None
        if getattr(sampling_params, "logprobs", None) is not None:
            entries = [{int(t): _Logprob(float(lp))} for t, lp in zip(ids, logprobs, strict=True)]
        text = self.tokenizer.decode(ids, skip_special_tokens=bool(sampling_params.skip_special_tokens))
        return _RequestOutput([_CompletionOutput(list(ids), text, finish, entries)])
