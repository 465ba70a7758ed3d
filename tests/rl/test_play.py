"""`play_row`: the env of a dataset row, one episode, one named error."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import gem_core
import gem_core.rl as rl
from gem_core.errors import InvalidArgument, InvalidRow, NameNotFound, PlayRowError
from gem_core.rl.budget import BudgetedPolicy
from gem_core.rl.play import play_row, row_value


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("transformers", reason="the tiny tokenizer needs gem-core[rl] (transformers)")
    from transformers import AutoTokenizer

    from gem_core.rl.testing import build_tiny_tokenizer

    return AutoTokenizer.from_pretrained(build_tiny_tokenizer(), local_files_only=True)


def _echo_policy(tokenizer, formatter, **kw):
    """Answers Echo with the word it is asked for (reads it from the prompt)."""

    async def generate(prompt_ids, max_tokens):
        text = tokenizer.decode(prompt_ids)
        word = text.rsplit("and nothing else: ", 1)[1].split("<|im_end|>", 1)[0]
        return tokenizer.encode(word, add_special_tokens=False) + [tokenizer.eos_token_id], None, None

    return BudgetedPolicy(generate, formatter, prompt_length=256, response_length=256, **kw)


def _play(tokenizer, row, **kw):
    formatter = rl.ChatFormatter(tokenizer)
    return asyncio.run(play_row(row, _echo_policy(tokenizer, formatter), formatter, **kw))


def test_env_and_seed_from_columns_or_extra_info(tokenizer):
    a = _play(tokenizer, {"env_id": "toy:Echo-v0", "seed": np.int64(3)})
    b = _play(tokenizer, {"extra_info": {"env_id": "toy:Echo-v0", "seed": 3}, "env_id": None})
    assert a.seed == b.seed == 3 and a.env_id == "toy:Echo-v0" and a.success and b.success
    assert a.turns[0].response_ids == b.turns[0].response_ids
    assert row_value({"seed": np.array(5)}, "seed") == 5 and row_value({}, "seed") is None


def test_make_and_close_run_off_the_event_loop(tokenizer, monkeypatch):
    seen = {}
    real_make = gem_core.make

    def make(env_id, **kwargs):
        seen["make"] = threading.get_ident()
        env = real_make(env_id, **kwargs)
        real_close = env.close

        def close():
            seen["close"] = threading.get_ident()
            real_close()

        env.close = close
        return env

    monkeypatch.setattr(gem_core, "make", make)
    main = threading.get_ident()
    _play(tokenizer, {"env_id": "toy:Echo-v0", "seed": 1}, env_kwargs={"word_length": 3})
    assert seen["make"] != main and seen["close"] != main


def test_a_bad_row_is_an_invalid_row(tokenizer):
    with pytest.raises(InvalidRow, match=r"needs the env id in the row's 'env_id' column \(or extra_info.env_id\), got None among keys \['prompt'\]; see X"):
        _play(tokenizer, {"prompt": "hi"}, hint="; see X")
    with pytest.raises(InvalidRow, match="'seed' must be an integer .* got 'abc' for toy:Echo-v0"):
        _play(tokenizer, {"env_id": "toy:Echo-v0", "seed": "abc"})
    with pytest.raises(InvalidRow, match="got 1.5"):
        _play(tokenizer, {"env_id": "toy:Echo-v0", "seed": 1.5})
    err = InvalidRow("x")
    assert isinstance(err, PlayRowError) and isinstance(err, InvalidArgument)


def test_make_failure_and_failed_episode_are_play_row_errors(tokenizer):
    with pytest.raises(PlayRowError, match="could not make toy:Echo-v0.*InvalidKwarg") as info:
        _play(tokenizer, {"env_id": "toy:Echo-v0", "seed": 0}, env_kwargs={"no_such_kwarg": 1})
    assert info.value.env_id == "toy:Echo-v0" and not isinstance(info.value, InvalidRow)
    # An id unknown in this process is a deployment error, not a failed row: it is raised as is.
    with pytest.raises(NameNotFound, match="no env registered with id 'toy:Nope-v0'.*Looked up in pid"):
        _play(tokenizer, {"env_id": "toy:Nope-v0", "seed": 0})
    formatter = rl.ChatFormatter(tokenizer)
    policy = BudgetedPolicy(_raise, formatter, prompt_length=4, response_length=64, prompt_length_key="p.len")
    with pytest.raises(PlayRowError, match=r"episode of toy:Echo-v0 \(seed 2\) failed: policy: InvalidArgument: .*more than p.len=4") as info:
        asyncio.run(play_row({"env_id": "toy:Echo-v0", "seed": 2}, policy, formatter))
    assert info.value.seed == 2 and isinstance(info.value, RuntimeError)


async def _raise(prompt_ids, max_tokens):  # pragma: no cover - never reached
    raise AssertionError("the prompt check comes first")
