r"""ReBN for verl: the ``"rebn"`` advantage estimator over packed multi-turn rows.

verl calls a registered estimator with per-token tensors ``token_level_rewards`` and
``response_mask`` of shape ``[batch, response_length]`` (see
``verl.trainer.ppo.ray_trainer.compute_advantage``). The estimator is the adapter kit's
`gem_core.rl.token_advantages` with ``estimator="rebn"`` and ``gamma = config.gamma``
(``algorithm.gamma``): a turn is a maximal run of ``response_mask == 1``, its reward the
sum of the token rewards inside it, ``G_t = r_t + gamma * G_{t+1}`` per row, the
advantage ``(G - mean(G)) / (std(G) + eps)`` over all (row, turn) transitions of the
batch, written on every generated token of the turn (``returns`` carry ``G_t``). Tokens
with mask 0 and verl's padding rows get 0 and stay out of the statistics.

verl's legacy trainer (``trainer.use_v1=False``) keeps only the episode return, on the
last response token: `warn_if_legacy_rebn` warns once per process when ``rebn`` runs
there (the agent loop calls it at start-up).
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["REBN_EPS", "compute_rebn_advantage", "warn_if_legacy_rebn"]

#: The std offset of the normalisation (gem_core.rl's default for ReBN).
REBN_EPS = 1e-8

_legacy_warned = False


def warn_if_legacy_rebn(config: Any) -> bool:
    """Warn (once per process) when ``rebn`` runs on verl's legacy trainer; True if it warned."""
    global _legacy_warned
    trainer, algorithm = config.get("trainer") or {}, config.get("algorithm") or {}
    if _legacy_warned or algorithm.get("adv_estimator") != "rebn" or trainer.get("use_v1", True):
        return False
    _legacy_warned = True
    warnings.warn(
        "gem-verl: algorithm.adv_estimator=rebn on verl's legacy trainer (trainer.use_v1=False): "
        "its agent-loop worker keeps only the episode return, on the last response token, so "
        "ReBN sees one reward per episode (G_t = gamma^(T-1-t) * R), not the per-turn rewards; "
        "set trainer.use_v1=True",
        RuntimeWarning,
        stacklevel=2,
    )
    return True


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

    from gem_core.rl import token_advantages

    if token_level_rewards.shape != response_mask.shape:
        raise ValueError(
            f"token_level_rewards {tuple(token_level_rewards.shape)} and response_mask "
            f"{tuple(response_mask.shape)} must have the same shape [batch, response_length]"
        )
    gamma = config.get("gamma", 1.0) if isinstance(config, dict) else getattr(config, "gamma", 1.0)
    with torch.no_grad():
        return token_advantages(token_level_rewards, response_mask, gamma=float(gamma), eps=REBN_EPS)
