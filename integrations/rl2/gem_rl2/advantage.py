r"""ReBN for RL2: ``adv.estimator=rebn`` in RL2's ``compute_advantages``.

RL2 computes advantages in one function, ``compute_advantages`` (an if/elif of ``gae``
and ``reinforce``; anything else raises ``NotImplementedError``), called from
``RL2/trainer/ppo.py`` on rank 0 as a module global. `wrap_compute_advantages` returns a
function with the same signature that handles ``rebn`` and hands every other estimator
to the function it wraps; `install` puts it into ``RL2.trainer.ppo`` (what
`gem_rl2.train` does before RL2's ``main``). Both signatures work:

- HEAD: ``compute_advantages(config, tensor_dict, cu_seqs, step)`` (the whole config:
  ``config.adv``, ``config.actor.kl``);
- 0.0.2: ``compute_advantages(config.adv, tensor_dict, cu_seqs, step)`` with ``step``
  positional (RL2's ``time_logger`` reads it from the positional arguments).

ReBN (`rebn_advantages`): RL2's ``tensor_dict`` holds one row per sequence and
``cu_seqs`` groups consecutive rows into trajectories (a trajectory has several
sequences when the chat template rewrote the history). A turn is a maximal run of
``action_mask`` inside a sequence; its reward the sum of ``rewards`` over the run (RL2
puts each turn's reward on its last action token); ``G_t = r_t + gamma * G_{t+1}`` over
the turns of a trajectory, in order; the advantage ``(G - mean(G)) / (std(G) + eps)``
over all turns of the batch (population std, ``eps = 1e-8``), written on every action
token of the turn (`gem_core.rl.token_advantages`). ``returns`` carry ``G_t``.
With HEAD's ``actor.kl.type=reward`` the KL penalty is subtracted from the rewards first,
and with ``advantage`` from the advantages after, as RL2 does for its own estimators.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["REBN_EPS", "rebn_advantages", "wrap_compute_advantages", "install", "ESTIMATOR"]

#: The estimator name (``adv.estimator=rebn``).
ESTIMATOR = "rebn"

#: The std offset of the normalisation (gem_core.rl's default for ReBN).
REBN_EPS = 1e-8


def rebn_advantages(tensor_dict: dict[str, Any], cu_seqs: Any, *, gamma: float, eps: float = REBN_EPS) -> None:
    """Write ReBN ``advantages`` and ``returns`` into RL2's ``tensor_dict`` (module docs).

    Args:
        tensor_dict: RL2's packed batch: ``rewards`` and ``action_mask`` of shape
            ``[sequences, length]`` (right-padded).
        cu_seqs: ``[trajectories + 1]`` offsets of each trajectory's sequences.
        gamma: ``adv.gamma``.
        eps: the std offset.
    """
    import torch

    from gem_core.rl import token_advantages

    rewards, mask = tensor_dict["rewards"], tensor_dict["action_mask"]
    if rewards.shape != mask.shape:
        raise ValueError(
            f"tensor_dict['rewards'] {tuple(rewards.shape)} and tensor_dict['action_mask'] "
            f"{tuple(mask.shape)} must have the same shape [sequences, length]"
        )
    bounds = [int(x) for x in cu_seqs]
    if bounds[0] != 0 or bounds[-1] != rewards.shape[0] or any(b < a for a, b in zip(bounds, bounds[1:], strict=False)):
        raise ValueError(f"cu_seqs {bounds} does not split {rewards.shape[0]} sequences into trajectories")
    width = rewards.shape[1] + 1  # one mask-0 column between the sequences of a trajectory
    most = max((b - a for a, b in zip(bounds, bounds[1:], strict=False)), default=0)
    n = len(bounds) - 1
    traj_rewards = torch.zeros((n, max(1, most) * width), dtype=torch.float64)
    traj_mask = torch.zeros((n, max(1, most) * width), dtype=torch.int64)
    for t, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        for k, row in enumerate(range(a, b)):
            traj_rewards[t, k * width : k * width + width - 1] = rewards[row].double()
            traj_mask[t, k * width : k * width + width - 1] = (mask[row] != 0).long()
    with torch.no_grad():
        adv, ret = token_advantages(traj_rewards, traj_mask, gamma=float(gamma), eps=eps)
    advantages = torch.zeros(rewards.shape, dtype=torch.float32)
    returns = torch.zeros(rewards.shape, dtype=torch.float32)
    for t, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        for k, row in enumerate(range(a, b)):
            advantages[row] = adv[t, k * width : k * width + width - 1].float()
            returns[row] = ret[t, k * width : k * width + width - 1].float()
    tensor_dict["advantages"] = advantages
    tensor_dict["returns"] = returns


def _adv_and_kl(config: Any) -> tuple[Any, Any]:
    """``(adv config, actor.kl config or None)`` for HEAD's whole config or 0.0.2's ``config.adv``."""
    if "adv" in config and "estimator" not in config:
        actor = config.get("actor") or {}
        return config.adv, actor.get("kl") if hasattr(actor, "get") else None
    return config, None


def wrap_compute_advantages(original: Callable[..., Any]) -> Callable[..., Any]:
    """RL2's ``compute_advantages`` plus ``rebn`` (module docs); other estimators go to ``original``."""
    if getattr(original, "__gem_rebn__", False):
        return original

    @functools.wraps(original)
    def compute_advantages(config: Any, tensor_dict: Any, cu_seqs: Any, step: Any, *args: Any, **kwargs: Any) -> Any:
        adv, kl = _adv_and_kl(config)
        if adv.get("estimator") != ESTIMATOR:
            return original(config, tensor_dict, cu_seqs, step, *args, **kwargs)
        approx_kl = None
        if kl is not None and float(kl.get("coef", 0.0) or 0.0) > 0 and kl.get("type") in ("reward", "advantage"):
            from RL2.utils import algorithms

            approx_kl = algorithms.compute_approx_kl(
                tensor_dict["old_logps"], tensor_dict["ref_logps"], kl.get("reward_estimator")
            )
            if kl.get("type") == "reward":
                tensor_dict["rewards"] = tensor_dict["rewards"] - float(kl.coef) * approx_kl
        rebn_advantages(tensor_dict, cu_seqs, gamma=float(adv.get("gamma", 1.0)))
        if approx_kl is not None and kl.get("type") == "advantage":
            tensor_dict["advantages"] = tensor_dict["advantages"] - float(kl.coef) * approx_kl
        return None

    compute_advantages.__gem_rebn__ = True  # type: ignore[attr-defined]
    return compute_advantages


def install() -> Callable[..., Any]:
    """Wrap ``RL2.trainer.ppo.compute_advantages`` in place (idempotent); returns the wrapper.

    ``RL2/trainer/ppo.py`` looks the name up in its module globals at each call, so the
    trainer started afterwards (``RL2.trainer.ppo.main``) computes ReBN.
    """
    from RL2.trainer import ppo

    check_rl2_hook(getattr(ppo, "compute_advantages", None))
    ppo.compute_advantages = wrap_compute_advantages(ppo.compute_advantages)
    return ppo.compute_advantages


#: The RL2 releases gem-rl2 is tested with, and the parameters of their ``compute_advantages``.
RL2_TESTED = {"rl-square 0.0.2": ("config", "raw_tensor_dict", "cu_seqs", "step"),
              "RL2 HEAD 9161ede": ("config", "tensor_dict", "cu_seqs", "step")}


def check_rl2_hook(fn: Callable[..., Any] | None) -> None:
    """Raise ImportError, naming the change, unless ``RL2.trainer.ppo.compute_advantages``
    (the module global gem-rl2 wraps) has the parameters of a tested RL2."""
    from gem_core.rl.versions import check_hook

    if getattr(fn, "__gem_rebn__", False):
        fn = getattr(fn, "__wrapped__", fn)
    errors = []
    for tested, params in RL2_TESTED.items():
        try:
            check_hook("gem-rl2", "RL2", "RL2.trainer.ppo.compute_advantages", fn, params, tested=tested)
            return
        except ImportError as exc:
            errors.append(str(exc))
    raise ImportError(errors[-1])
