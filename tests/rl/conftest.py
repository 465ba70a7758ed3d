"""Shared fixtures for the RL tests: the tiny offline tokenizer and model (built once, cached)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_tokenizer():
    pytest.importorskip(
        "transformers", reason="the tiny tokenizer needs gem-core[rl] (transformers)"
    )
    from transformers import AutoTokenizer

    from gem_core.rl.testing import build_tiny_tokenizer

    return AutoTokenizer.from_pretrained(build_tiny_tokenizer(), local_files_only=True)


@pytest.fixture(scope="session")
def tiny_model():
    torch = pytest.importorskip("torch", reason="the tiny model needs gem-core[rl] (torch)")
    from gem_core.rl.testing import load_tiny_model

    # A tiny model runs fastest on one thread; more threads spin against each other on a
    # shared 2-core machine (10x slower).
    torch.set_num_threads(1)

    return load_tiny_model()
