"""Fixtures for the gem-trl tests: a GemGRPOTrainer over the tiny offline model, on the CPU."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")

import functools  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402


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


def make_config(tmp_dir: str, **overrides: Any) -> Any:
    """A CPU `GemGRPOConfig` for tests (no logging integrations, no checkpoints)."""
    from gem_trl import GemGRPOConfig

    base = dict(
        output_dir=str(tmp_dir),
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=256,
        max_tokens_per_turn=16,
        gamma=0.9,
        seed=0,
        disable_tqdm=True,
    )
    base.update(overrides)
    return GemGRPOConfig(**base)


def make_trainer(tmp_dir: str, *, dataset: Any = None, rollout: Any = None, model: Any = None, **config: Any) -> Any:
    """A `GemGRPOTrainer` on the tiny model (a fresh copy unless ``model`` is given)."""
    from gem_trl import GemGRPOTrainer, make_dataset
    from transformers import AutoModelForCausalLM

    if model is None:
        model = AutoModelForCausalLM.from_pretrained(tiny_model_path(), local_files_only=True)
    if dataset is None:
        dataset = make_dataset("game:GuessTheNumber-v0-easy", range(8))
    return GemGRPOTrainer(
        model, make_config(tmp_dir, **config), dataset, processing_class=tiny_tokenizer(), rollout_func=rollout
    )


@pytest.fixture
def tokenizer() -> Any:
    return tiny_tokenizer()
