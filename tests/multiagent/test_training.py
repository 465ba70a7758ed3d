"""Smoke: a short REINFORCE/ReBN training on tau:Retail-v0 with the scripted user, through gem_core.rl.

The assistant's single-agent view is an ordinary env for the rollout engine: a scripted
policy playing a task's reference solution through the engine is graded a success, and the
tiny offline model plays the env for two policy-gradient steps (each batch with one such
demonstration, so that ReBN has a reward to normalise).
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="the training smoke needs gem-core[rl] (torch)")
pytest.importorskip("transformers", reason="the training smoke needs gem-core[rl] (transformers)")

import gem_core  # noqa: E402
import gem_core.rl as rl  # noqa: E402
from gem_core.core import ObservationWrapper  # noqa: E402
from gem_core.envs.tau.tasks import TASKS, reference_script  # noqa: E402
from gem_core.rl.testing import TextPolicy, load_tiny_model  # noqa: E402

_START = "The conversation starts.\n"


class Brief(ObservationWrapper):
    """Drops the policy and tool schemas from the first observation (~6,400 tokens of the tiny
    tokenizer, over the tiny model's 4,096 positions): the conversation alone."""

    def observation(self, observation):
        _, sep, rest = observation.partition(_START)
        return rest if sep else observation


def _env(**kwargs):
    return Brief(gem_core.make("tau:Retail-v0", **kwargs))


def _teacher_episodes(tokenizer, formatter):
    """One episode of CancelHeadphones played by its reference solution (a scripted policy)."""

    def respond(prompt: str) -> str:
        script = reference_script(TASKS["CancelHeadphones"])
        for _ in range(prompt.count("<|im_start|>assistant") - 1):  # turns already played
            next(script)
        return next(script)

    return rl.collect_episodes_sync(
        lambda: _env(tasks=["CancelHeadphones"]),
        TextPolicy(tokenizer, respond),
        formatter,
        seeds=[0],
        sampling=rl.SamplingParams(max_new_tokens=512),
    )


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    model, tokenizer = load_tiny_model()
    return model, tokenizer


def test_a_reference_playing_policy_succeeds_through_the_rollout_engine(tiny):
    _, tokenizer = tiny

    (ep,) = _teacher_episodes(tokenizer, rl.ChatFormatter(tokenizer, max_context=4096))
    assert ep.error is None and ep.success is True, (ep.error, ep.end_reason, ep.turns[-1].info)
    assert ep.turns[-1].reward == 1.0 and ep.num_turns == 6


def test_short_reinforce_training_on_retail_with_the_scripted_user(tiny):
    model, tokenizer = tiny
    policy = rl.TransformersPolicy(model, tokenizer, max_batch_size=4)
    formatter = rl.ChatFormatter(tokenizer, max_context=2048)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    for it in range(2):
        episodes = rl.collect_episodes_sync(
            lambda: _env(max_turns=4, format_penalty=-0.1),
            policy,
            formatter,
            seeds=[0, 1, 2],
            sampling=rl.SamplingParams(temperature=1.0, max_new_tokens=12, seed=it),
            concurrency=4,
        )
        assert all(ep.error is None for ep in episodes), [ep.error for ep in episodes]
        assert all(ep.end_reason in ("terminated", "env_truncated", "truncated") for ep in episodes), [
            ep.end_reason for ep in episodes
        ]
        assert all(ep.turns[0].observation.startswith("User: ") for ep in episodes), [ep.turns[0].observation[:80] for ep in episodes]
        # One demonstration per batch (the reference solution, reward 1): the sampled
        # episodes of a random-weight model all earn 0, which ReBN would normalise to 0.
        episodes += _teacher_episodes(tokenizer, formatter)
        advantages = rl.compute_advantages(episodes, "rebn", gamma=0.9)
        batch = rl.build_training_batch(episodes, advantages, pad_token_id=policy.pad_token_id)
        t = batch.to_torch()
        model.train()
        logp = rl.sequence_logprobs(model, t["input_ids"], t["attention_mask"])
        loss = -(logp * t["advantages"] * t["loss_mask"]).sum() / t["loss_mask"].sum().clamp(min=1)
        optimizer.zero_grad()
        assert t["advantages"].abs().sum() > 0
        loss.backward()
        optimizer.step()
        model.eval()
        assert math.isfinite(loss.item())
    policy.close()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
