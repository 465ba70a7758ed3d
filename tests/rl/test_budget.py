"""`BudgetedPolicy`: the prompt and response budgets every trainer adapter needs."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gem_core
import gem_core.rl as rl
from gem_core.errors import InvalidArgument
from gem_core.rl.budget import BudgetedPolicy
from gem_core.rl.packing import pack_episode

STOP = 7


class Formatter:
    stop_token_ids = (STOP,)
    max_context = 0


def _policy(answer, **kw):
    calls = []

    async def generate(prompt_ids, max_tokens):
        calls.append((list(prompt_ids), max_tokens))
        return answer(prompt_ids, max_tokens)

    defaults = dict(prompt_length=10, response_length=20, max_tokens_per_turn=8)
    policy = BudgetedPolicy(generate, Formatter(), **{**defaults, **kw})
    return policy, calls


def _gen(policy, prompt):
    return asyncio.run(policy.generate(prompt, policy.sampling))


def test_first_prompt_must_fit_and_the_error_names_the_config_key():
    policy, calls = _policy(lambda p, n: ([1], [0.0], "stop"), prompt_length_key="data.max_prompt_length")
    with pytest.raises(InvalidArgument, match=r"renders to 11 tokens, more than data.max_prompt_length=10; raise data.max_prompt_length"):
        _gen(policy, list(range(11)))
    assert not calls
    policy, _ = _policy(lambda p, n: ([1], [0.0], "stop"), prompt_length_key="k", prompt_length_fix="do X")
    with pytest.raises(InvalidArgument, match="more than k=10; do X"):
        _gen(policy, list(range(11)))


def test_each_turn_is_capped_by_what_is_left_of_the_response():
    policy, calls = _policy(lambda p, n: ([1] * n, None, "length"))
    out = _gen(policy, [0] * 6)  # first prompt: 6 tokens -> context 6 + 20
    assert policy.formatter.max_context == 26 and calls[-1][1] == 8
    assert out.token_ids == [1] * 8 and out.finish_reason == "length"
    assert out.logprobs == [0.0] * 8 and not policy.has_logprobs
    _gen(policy, [0] * 21)  # 15 response tokens used: 5 left
    assert calls[-1][1] == 5
    assert policy.max_tokens([0] * 26) == 1  # never asks for 0 tokens
    assert policy.calls == 2 and policy.generate_s >= 0


def test_stop_tokens_end_a_turn_and_ids_past_the_cap_are_cut():
    policy, _ = _policy(lambda p, n: ([1, STOP, 2, 3], [-1.0, -2.0, -3.0, -4.0], None))
    out = _gen(policy, [0])
    assert out.token_ids == [1, STOP] and out.logprobs == [-1.0, -2.0] and out.finish_reason == "stop"
    assert policy.has_logprobs
    policy, _ = _policy(lambda p, n: ([1] * (n + 3), [-0.5] * (n + 3), "stop"))
    out = _gen(policy, [0])
    assert len(out.token_ids) == 8 and out.finish_reason == "length"  # the server overran the cap
    policy, _ = _policy(lambda p, n: ([1, 2], [-0.5, -0.5], "stop"))  # a stop string
    assert _gen(policy, [0]).finish_reason == "stop"
    policy, _ = _policy(lambda p, n: ([1, 2], [-0.5], None))  # too few logprobs
    out = _gen(policy, [0])
    assert out.logprobs == [0.0, 0.0] and not policy.has_logprobs and out.finish_reason == "length"


def test_bad_budgets_are_refused():
    with pytest.raises(InvalidArgument, match="response_length must be a positive int, got 0"):
        _policy(lambda p, n: ([], None, None), response_length=0)
    with pytest.raises(InvalidArgument, match="max_tokens_per_turn must be a positive int"):
        _policy(lambda p, n: ([], None, None), max_tokens_per_turn=True)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 12),
    st.lists(st.integers(0, 15), min_size=1, max_size=6),
)
def test_the_packed_response_always_fits(tokenizer, response_length, per_turn, lengths):
    formatter = rl.ChatFormatter(tokenizer)
    requests = []

    async def generate(prompt_ids, max_tokens):
        k = len(requests)
        requests.append((len(prompt_ids), max_tokens))
        n = lengths[k % len(lengths)]
        return [tokenizer.encode("a", add_special_tokens=False)[0]] * n, None, None

    policy = BudgetedPolicy(
        generate, formatter, prompt_length=512, response_length=response_length, max_tokens_per_turn=per_turn
    )
    env = gem_core.make("toy:Echo-v0")
    try:
        ep = asyncio.run(rl.run_episode(env, policy, formatter, seed=0, sampling=policy.sampling))
    finally:
        env.close()
    assert ep.error is None
    first = policy.first_prompt_len
    for prompt_len, cap in requests:  # plain-loop budget: what is left, at most per_turn
        assert cap == max(1, min(per_turn, first + response_length - prompt_len))
    packed = pack_episode(ep)
    assert len(packed.response_ids) <= response_length
    assert ep.end_reason in ("context", "env_truncated", "terminated")


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("transformers", reason="the tiny tokenizer needs gem-core[rl] (transformers)")
    from transformers import AutoTokenizer

    from gem_core.rl.testing import build_tiny_tokenizer

    return AutoTokenizer.from_pretrained(build_tiny_tokenizer(), local_files_only=True)
