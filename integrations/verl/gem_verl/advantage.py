r"""ReBN for verl: the ``"rebn"`` advantage estimator over packed multi-turn rows.

verl calls a registered estimator with per-token tensors ``token_level_rewards`` and
``response_mask`` of shape ``[batch, response_length]`` (see
``verl.trainer.ppo.ray_trainer.compute_advantage``). In a packed row written by
`gem_verl.agent_loop.GemAgentLoop`:

- a *turn* is a maximal run of ``response_mask == 1`` (the tokens the policy generated
  in that turn; env observation tokens between turns have mask 0);
- the turn's reward is the sum of the token rewards inside the run (the agent loop puts
  it on the turn's last generated token);
- ``G_t = r_t + gamma * G_{t+1}`` per row, with ``gamma = config.gamma``
  (``algorithm.gamma``);
- the advantage is ``(G - mean(G)) / (std(G) + eps)`` over all (row, turn) transitions
  of the batch (`gem_core.rl.advantages.rebn`), written on every generated token of the
  turn; the returned ``returns`` carry ``G_t`` the same way. Tokens with mask 0 get 0.

Rows without generated tokens (verl's padding rows) have no turns and do not enter the
statistics. The returns and the normalisation are `gem_core.rl`'s own functions, so
verl trains on exactly the values the conformance scenario checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["REBN_EPS", "compute_rebn_advantage", "turn_index"]

#: The std offset of the normalisation (gem_core.rl's default for ReBN).
REBN_EPS = 1e-8


def turn_index(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Number the turns of a batch of packed rows.

    Args:
        mask: ``[batch, length]`` boolean response mask.

    Returns:
        ``(index, turns_per_row)``: ``index[i, j]`` is the batch-wide number of the turn
        token ``(i, j)`` belongs to (turns numbered row by row, left to right), or -1 on
        mask-0 tokens; ``turns_per_row[i]`` the number of turns of row ``i``.
    """
    m = np.asarray(mask, dtype=bool)
    if m.ndim != 2:
        raise ValueError(f"response_mask must be 2-D [batch, length], got shape {m.shape}")
    prev = np.zeros_like(m)
    prev[:, 1:] = m[:, :-1]
    starts = m & ~prev
    turns_per_row = starts.sum(axis=1)
    offsets = np.concatenate(([0], np.cumsum(turns_per_row)[:-1]))
    index = np.cumsum(starts, axis=1) - 1 + offsets[:, None]
    return np.where(m, index, -1), turns_per_row


def _gamma(config: Any) -> float:
    if config is None:
        return 1.0
    gamma = config.get("gamma", 1.0) if isinstance(config, dict) else getattr(config, "gamma", 1.0)
    return float(gamma)


def compute_rebn_advantage(
    token_level_rewards: Any,
    response_mask: Any,
    config: Any = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """verl's ``"rebn"`` estimator (registered by `gem_verl.plugin`).

    Args:
        token_level_rewards: ``[batch, length]`` float tensor of per-token rewards.
        response_mask: ``[batch, length]`` tensor, 1 on generated tokens.
        config: verl's ``AlgoConfig`` (or a mapping); ``config.gamma`` is the discount
            (1.0 when ``config`` is None).
        **kwargs: other inputs verl passes (``index``, ...), unused.

    Returns:
        ``(advantages, returns)``, both shaped and typed like ``token_level_rewards``.
    """
    import torch

    from gem_core.rl.advantages import discounted_returns, rebn

    if token_level_rewards.shape != response_mask.shape:
        raise ValueError(
            f"token_level_rewards {tuple(token_level_rewards.shape)} and response_mask "
            f"{tuple(response_mask.shape)} must have the same shape [batch, response_length]"
        )
    gamma = _gamma(config)
    with torch.no_grad():
        rewards = token_level_rewards.detach().to("cpu", torch.float64).numpy()
        mask = response_mask.detach().to("cpu").numpy() != 0
        index, turns_per_row = turn_index(mask)
        n = int(turns_per_row.sum())
        turn_rewards = np.bincount(index[mask], weights=rewards[mask], minlength=n)
        bounds = np.cumsum(turns_per_row)[:-1]
        returns = discounted_returns(np.split(turn_rewards, bounds), gamma)
        flat_returns = np.concatenate(returns) if returns else np.zeros(0)
        flat_adv = rebn(flat_returns, eps=REBN_EPS)
        adv_tok = np.zeros_like(rewards)
        ret_tok = np.zeros_like(rewards)
        adv_tok[mask] = flat_adv[index[mask]]
        ret_tok[mask] = flat_returns[index[mask]]
        like = dict(dtype=token_level_rewards.dtype, device=token_level_rewards.device)
        return torch.from_numpy(adv_tok).to(**like), torch.from_numpy(ret_tok).to(**like)
