"""verl's own policy-loss function consumes gem-verl's advantages and updates a tiny model.

The advantages are the ``rebn`` estimator's output through verl's own dispatch
(``compute_advantage``) on the conformance episodes; the log-probs are the tiny model's on
the packed sequences; the loss is verl's ``get_policy_loss_fn`` (the function verl's actor
``ppo_loss`` calls) with verl's ``ActorConfig``. verl's full actor (FSDP/Megatron engines)
is not built on CPU: see STUBS.md.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl", reason="gem-verl's tests need verl installed (make test-verl builds its venv)")

import torch  # noqa: E402
from verl.trainer.ppo.core_algos import get_policy_loss_fn  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402

from .test_advantage import _batch  # noqa: E402


def test_verls_policy_loss_reads_the_adapters_advantages_and_moves_the_model(reference, verl_config, tiny_model_path):
    from transformers import AutoModelForCausalLM

    algo = omega_conf_to_dataclass(verl_config.algorithm)
    width = 400
    data = compute_advantage(_batch(reference, width), adv_estimator=algo.adv_estimator, gamma=algo.gamma, config=algo)
    advantages, mask = data.batch["advantages"], data.batch["response_mask"]
    n = advantages.shape[0]

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    before = [p.detach().clone() for p in model.parameters()]
    log_prob = torch.zeros(n, width)
    rows = []
    for i in range(n):
        p = reference.packed(i)
        ids = torch.tensor([p["prompt_ids"] + p["response_ids"]])
        logits = model(input_ids=ids).logits[0, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0]
        rows.append(lp[len(p["prompt_ids"]) - 1 :])  # the log-prob of each response token
    log_prob = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)
    log_prob = torch.nn.functional.pad(log_prob, (0, width - log_prob.shape[1]))
    log_prob.retain_grad()

    from omegaconf import OmegaConf

    # The actor config as the trainer finalises it (a micro-batch size is required there).
    actor = omega_conf_to_dataclass(OmegaConf.merge(verl_config.actor_rollout_ref.actor, {"ppo_micro_batch_size_per_gpu": 1}))
    loss_fn = get_policy_loss_fn(actor.policy_loss.get("loss_mode", "vanilla"))
    loss, _metrics = loss_fn(
        old_log_prob=log_prob.detach(), log_prob=log_prob, advantages=advantages, response_mask=mask.bool(),
        loss_agg_mode=actor.loss_agg_mode, config=actor,
    )
    loss.backward()
    # On-policy (ratio 1) the loss is minus the mean advantage over the generated tokens, and its
    # gradient on each token's log-prob is minus that token's advantage (token-mean): the loss
    # read exactly the adapter's advantages, nothing on env tokens or padding.
    tokens = mask.sum()
    assert actor.loss_agg_mode == "token-mean"
    torch.testing.assert_close(loss, -(advantages * mask).sum() / tokens)
    torch.testing.assert_close(log_prob.grad, -(advantages * mask) / tokens)
    assert not log_prob.grad[mask == 0].any()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    optimizer.step()
    moved = sum(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters(), strict=True))
    assert moved > 0 and np.isfinite(loss.item())
