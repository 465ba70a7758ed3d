"""Tiny offline models: normal Hugging Face directories, built once and cached."""

from __future__ import annotations

import time

import pytest

from gem_core.errors import InvalidArgument
from gem_core.rl.testing import build_tiny_model, build_tiny_tokenizer

pytest.importorskip("torch", reason="building tiny models needs gem-core[rl] (torch)")


def test_tiny_model_loads_offline_with_auto_classes(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_tiny_model(tmp_path / "qwen", arch="qwen2", hidden=32, layers=1, heads=2)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    assert type(model).__name__ == "Qwen2ForCausalLM"
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Guess: \\boxed{7}"}], add_generation_prompt=True
    )
    assert (
        tokenizer.decode(ids)
        == "<|im_start|>user\nGuess: \\boxed{7}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert (
        tokenizer.eos_token == "<|im_end|>" and model.config.eos_token_id == tokenizer.eos_token_id
    )
    assert (
        tokenizer.pad_token == "<|endoftext|>"
        and model.generation_config.eos_token_id == tokenizer.eos_token_id
    )
    with torch.no_grad():
        assert model(torch.tensor([ids])).logits.shape == (1, len(ids), model.config.vocab_size)


def test_builds_are_cached_by_config(tmp_path, monkeypatch):
    monkeypatch.setenv("GEM_CACHE", str(tmp_path))
    a = build_tiny_model(hidden=32, layers=1, heads=2)
    start = time.perf_counter()
    assert build_tiny_model(hidden=32, layers=1, heads=2) == a
    assert time.perf_counter() - start < 0.5
    b = build_tiny_model(hidden=32, layers=1, heads=2, seed=1)
    assert a != b and a.parent == b.parent == tmp_path / "tiny-models"
    assert (a / "model.safetensors").read_bytes() != (b / "model.safetensors").read_bytes()
    assert (build_tiny_tokenizer() / "tokenizer.json").is_file()


def test_refuses_to_overwrite_a_foreign_directory(tmp_path):
    (tmp_path / "mine.txt").write_text("precious")
    with pytest.raises(InvalidArgument, match="is not a tiny model built by gem_core"):
        build_tiny_model(tmp_path, hidden=32, layers=1, heads=2)
    assert (tmp_path / "mine.txt").read_text() == "precious"
    with pytest.raises(InvalidArgument, match="arch must be one of"):
        build_tiny_model(tmp_path / "x", arch="gpt2")
