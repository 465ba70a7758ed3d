"""A real ``GemGRPOTrainer.train()`` on the CPU: 3 steps, batched generation, ReBN checked on the way."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("trl", reason="gem-trl's tests need TRL installed (make test-trl builds its venv)")

import torch  # noqa: E402

from gem_core.testing.adapter_suite import plain_rebn  # noqa: E402

from .conftest import make_trainer  # noqa: E402


def test_three_training_steps_change_the_weights_with_rebn_advantages(tmp_path) -> None:
    # format_error="retry": the untrained model's malformed answers cost -0.1 each and the
    # episode goes on, so returns differ between turns and ReBN is not all zeros.
    trainer = make_trainer(
        tmp_path, max_steps=3, per_device_train_batch_size=8, num_generations=4, max_tokens_per_turn=6,
        max_completion_length=160, learning_rate=5e-3, gamma=0.9, env_kwargs={"format_error": "retry"},
    )  # fmt: skip
    seen: list[dict[str, Any]] = []
    parent = trainer._generate_and_score_completions

    def spy(inputs: list[dict[str, Any]]) -> dict[str, Any]:
        out = parent(inputs)
        seen.append({k: v.clone() for k, v in out.items() if isinstance(v, torch.Tensor)})
        seen[-1]["stats"] = dict(trainer.gem_rollout.stats)
        return out

    trainer._generate_and_score_completions = spy
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()

    assert len(seen) == 3, f"expected one generation batch per step, got {len(seen)}"
    for step, out in enumerate(seen):
        mask = (out["completion_mask"] * out["tool_mask"]).numpy()
        adv = out["advantages"].double().numpy()
        assert adv.shape == mask.shape, f"step {step}: advantages {adv.shape} are not per token {mask.shape}"
        want = plain_rebn(out["gem_token_rewards"].double().numpy(), mask, 0.9)
        np.testing.assert_allclose(adv, want, atol=1e-6, err_msg=f"step {step}: advantages are not ReBN")
        assert np.abs(adv).max() > 0.1, f"step {step}: ReBN gave no signal (all turns equal?)"
        stats = out["stats"]
        assert stats["episodes"] == 8 and stats["generate_calls"] > 8, stats
        # gem_core.rl's TransformersPolicy decodes concurrent turns together.
        assert stats["batches"] < stats["generate_calls"], f"step {step}: one decode per request: {stats}"
    changed = [k for k, v in trainer.model.named_parameters() if not torch.equal(v.detach(), before[k])]
    assert changed, "3 training steps left every weight unchanged"
    logged = [h for h in trainer.state.log_history if "gem/success_rate" in h]
    assert len(logged) == 3, "TRL's log history lacks the gem/ metrics"
    assert {"gem/mean_turns", "gem/episode_return", "gem/adv_abs_mean", "rewards/gem_episode_return/mean"} <= set(logged[0])
    assert logged[0]["gem/mean_turns"] > 1.0, "format_error='retry' should give multi-turn episodes"
