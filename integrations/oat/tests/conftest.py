"""Fixtures for the gem-oat tests: oat 0.2.4's real actor and learner on the CPU, tiny offline model.

vLLM and dm-launchpad cannot be installed here (CUDA only; wheels only up to CPython
3.10): when they are missing, the import-only stand-ins of ``tests/stubs`` go on
``sys.path`` (see ../STUBS.md). Everything else oat imports is the real package.
"""

from __future__ import annotations

import importlib.util
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("DS_ACCELERATOR", "cpu")

_STUBS = os.path.join(os.path.dirname(__file__), "stubs")
if importlib.util.find_spec("vllm") is None or importlib.util.find_spec("launchpad") is None:
    sys.path.insert(0, _STUBS)

import functools  # noqa: E402
from typing import Any  # noqa: E402


@functools.lru_cache(maxsize=1)
def tiny_model_path() -> str:
    import torch

    from gem_core.rl.testing import build_tiny_model

    torch.set_num_threads(1)
    return str(build_tiny_model())


@functools.lru_cache(maxsize=1)
def tiny_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path(), local_files_only=True)


def make_args(**overrides: Any) -> Any:
    """`gem_oat.GemArgs` for CPU tests (oat's defaults otherwise)."""
    from gem_oat.args import GemArgs

    base = dict(
        pretrain=tiny_model_path(),
        algo="PPO",
        gpus=1,
        bf16=False,
        flash_attn=False,
        use_fused_lm_head=False,
        prompt_max_length=1024,
        max_response_length=3072,
        temperature=1.0,  # the learner divides logits by it; the scripted engine ignores it
        tis_c=None,
        learning_rate=0.0,
        rollout_batch_size_per_device=4,
    )
    base.update(overrides)
    return GemArgs(**base)
