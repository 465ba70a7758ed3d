"""OpenRLHF's real ``Actor`` (the tiny model) forward and ``PolicyLoss`` backward on the experiences
the gem pipeline produces (executor -> samples generator -> micro-batches -> ReBN)."""

from __future__ import annotations

import functools

import pytest

pytest.importorskip("openrlhf", reason="gem-openrlhf's tests need openrlhf (make test-openrlhf builds its venv)")

import torch  # noqa: E402
from gem_openrlhf.agent import make_label  # noqa: E402
from openrlhf_harness import harness  # noqa: E402

from gem_core.testing.conformance import SCENARIO, scenario_script  # noqa: E402


def test_actor_forward_and_policy_loss_backward_on_gem_experiences():
    from openrlhf.models.actor import Actor
    from openrlhf.models.loss import PolicyLoss

    h = harness()
    engine = h.engine(script=functools.partial(scenario_script, SCENARIO.name))
    labels = [make_label(SCENARIO.env_id, s, max_tokens_per_turn=SCENARIO.max_new_tokens) for s in SCENARIO.seeds]
    batches = h.advantages(h.micro_batches(h.experiences(h.responses(engine, labels))), SCENARIO.gamma)

    actor = Actor(h.model_path, attn_implementation="eager", param_dtype="bf16")
    loss_fn = PolicyLoss(clip_eps_low=0.2, clip_eps_high=0.2)
    for b in batches:
        mask = b.action_mask
        log_probs = actor(b.sequences, mask, attention_mask=b.attention_mask)
        assert log_probs.shape == mask.shape == b.advantages.shape
        loss, clip_ratio, ppo_kl, _, _ = loss_fn(log_probs, log_probs.detach(), b.advantages, action_mask=mask)
        assert torch.isfinite(loss) and loss.requires_grad
        actor.zero_grad()
        loss.backward()
        grads = [p.grad for p in actor.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads)
        assert any(g.abs().sum() > 0 for g in grads), "ReBN advantages must move the policy"
        assert float(clip_ratio) == 0.0 and abs(float(ppo_kl)) < 1e-6  # on-policy: ratio 1
