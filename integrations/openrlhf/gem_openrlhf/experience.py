r"""Per-turn rewards through OpenRLHF's experience pipeline, and exact ReBN at its advantage step.

OpenRLHF (0.11) has no estimator registry, and its ``reinforce`` puts the scalar reward
on the last action token, discounts per *token* and whitens per token: not ReBN. Two
subclasses of OpenRLHF's own classes carry the per-turn rewards and compute ReBN:

- `GemSamplesGenerator` (a ``SamplesGenerator``): after OpenRLHF's
  ``_process_response_into_experience`` it adds the executor's per-token rewards as
  ``info["gem_token_rewards"]``, a ``(1, A)`` float tensor aligned with
  ``action_mask`` (the same ``[1:max_len]`` shift). ``Experience.concat_experiences``
  right-pads and stacks info tensors like the other fields, so micro-batches carry them.
- `GemExperienceMaker` (a ``RemoteExperienceMaker``): its
  ``compute_advantages_and_returns`` computes ReBN over all micro-batches of the rollout
  with `gem_core.rl.token_advantages` (`rebn_advantages`): a turn is a maximal run of
  ``action_mask == 1``, its reward the sum of the token rewards inside it,
  ``G_t = r_t + gamma * G_{t+1}`` per sample with ``gamma = --algo.advantage.gamma``, the
  advantage ``(G - mean) / (std + 1e-8)`` over all (sample, turn) transitions of the
  batch on every token of the turn; ``returns`` carry ``G_t``. Failed episodes
  (``info["gem_error"] == 1``) stay out of the statistics and get 0. The per-token
  reward tensor is then dropped from ``info`` (OpenRLHF logs every info value).

`gem_openrlhf.train` installs both into OpenRLHF's trainer.
"""

from __future__ import annotations

from typing import Any

import torch
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

from gem_core.errors import InvalidArgument
from gem_openrlhf.agent import ERROR_FLAG, TOKEN_REWARDS

__all__ = ["REBN_EPS", "GemExperienceMaker", "GemSamplesGenerator", "rebn_advantages", "check_openrlhf_hooks"]

#: The std offset of the normalisation (gem_core.rl's default for ReBN).
REBN_EPS = 1e-8


def check_openrlhf_hooks() -> None:
    """Raise ImportError, naming the change, when an OpenRLHF method gem-openrlhf overrides changed."""
    from gem_core.rl.versions import check_hook
    from gem_openrlhf._version import OPENRLHF_MIN

    tested = f"openrlhf {OPENRLHF_MIN}"
    check_hook("gem-openrlhf", "OpenRLHF", "SamplesGenerator._process_response_into_experience",
               getattr(SamplesGenerator, "_process_response_into_experience", None), ("self", "response"),
               tested=tested)
    # gem_openrlhf.trainer.install_gem_pipeline rebuilds both from a built trainer's: keywords ...
    check_hook("gem-openrlhf", "OpenRLHF", "SamplesGenerator.__init__", SamplesGenerator.__init__,
               ("self", "strategy", "prompts_dataloader", "eval_dataloader", "tokenizer", "vllm_engines"),
               tested=tested)
    # ... and positions.
    check_hook("gem-openrlhf", "OpenRLHF", "RemoteExperienceMaker.__init__", RemoteExperienceMaker.__init__,
               ("self", "actor_model_group", "critic_model_group", "reward_model_group", "initial_model_group",
                "kl_controller", "strategy", "tokenizer"), tested=tested)


check_openrlhf_hooks()


class GemSamplesGenerator(SamplesGenerator):
    """OpenRLHF's ``SamplesGenerator`` keeping the executor's per-token rewards in ``Experience.info``."""

    def _process_response_into_experience(self, response: dict[str, Any], **generate_kwargs: Any) -> Any:
        experience = super()._process_response_into_experience(response, **generate_kwargs)
        rewards = response.get(TOKEN_REWARDS)
        if rewards is None:
            raise InvalidArgument(
                f"gem-openrlhf: the agent's response has no {TOKEN_REWARDS!r} (keys "
                f"{sorted(response)}): pass --train.agent_func_path the file of gem_openrlhf.agent"
            )
        if len(rewards) != len(response["observation_tokens"]):
            raise InvalidArgument(
                f"gem-openrlhf: {len(rewards)} token rewards for {len(response['observation_tokens'])} "
                "observation tokens; the agent must give one reward per token"
            )
        truncate_length = generate_kwargs.get("max_len", 2048)
        values = torch.tensor(rewards[1:truncate_length], dtype=torch.float32)  # aligned with action_mask
        experience.info[TOKEN_REWARDS] = values.unsqueeze(0)
        if ERROR_FLAG not in experience.info:
            experience.info[ERROR_FLAG] = torch.tensor([0.0])
        return experience


def rebn_advantages(experiences: list[Any], gamma: float, *, eps: float = REBN_EPS) -> list[tuple[Any, Any]]:
    """ReBN over the transitions of all ``experiences`` (micro-batches); ``(advantages, returns)`` each.

    Each experience needs ``action_mask`` ``(B, A)`` and ``info["gem_token_rewards"]`` of
    the same shape; rows with ``info["gem_error"] == 1`` are left out and get 0.

    Raises:
        InvalidArgument: an experience has no per-token rewards, or they are misshaped.
    """
    from gem_core.rl import token_advantages

    rewards, masks = [], []
    for k, exp in enumerate(experiences):
        r = exp.info.get(TOKEN_REWARDS)
        if not isinstance(r, torch.Tensor):
            raise InvalidArgument(
                f"gem-openrlhf: experience {k} has no per-token rewards (info[{TOKEN_REWARDS!r}]); "
                "launch training with python -m gem_openrlhf.train so that GemSamplesGenerator makes the samples"
            )
        mask = exp.action_mask
        if r.shape != mask.shape:
            raise InvalidArgument(
                f"gem-openrlhf: experience {k}: info[{TOKEN_REWARDS!r}] has shape {tuple(r.shape)}, "
                f"action_mask {tuple(mask.shape)}; they must match"
            )
        m = mask.to(torch.float64)
        flag = exp.info.get(ERROR_FLAG)
        if isinstance(flag, torch.Tensor) and flag.numel() == mask.shape[0]:
            m = m * (flag.reshape(-1, 1).to(torch.float64) == 0)
        rewards.append(r.to(torch.float64))
        masks.append(m)
    width = max((m.shape[1] for m in masks), default=0)
    pad = lambda t: torch.nn.functional.pad(t, (0, width - t.shape[1]))  # noqa: E731
    adv, ret = token_advantages(
        torch.cat([pad(r) for r in rewards]), torch.cat([pad(m) for m in masks]), gamma=float(gamma), eps=eps
    )
    out, row = [], 0
    for r in rewards:
        n, a = r.shape
        out.append((adv[row : row + n, :a], ret[row : row + n, :a]))
        row += n
    return out


class GemExperienceMaker(RemoteExperienceMaker):
    """OpenRLHF's ``RemoteExperienceMaker`` with per-turn ReBN as the advantage step (module docs)."""

    @torch.no_grad()
    def compute_advantages_and_returns(self, experiences: list[Any]) -> list[Any]:
        gamma = float(self.strategy.args.algo.advantage.gamma)
        for exp, (adv, ret) in zip(experiences, rebn_advantages(experiences, gamma), strict=True):
            exp.rewards = exp.rewards.to(torch.promote_types(exp.rewards.dtype, torch.float32))
            dtype = torch.promote_types(exp.rewards.dtype, torch.float32)
            exp.advantages = adv.to(device=exp.action_mask.device, dtype=dtype)
            exp.returns = ret.to(device=exp.action_mask.device, dtype=dtype)
            exp.info["return"] = exp.info.pop(TOKEN_REWARDS).sum(dim=-1)
            exp.kl = None
        return experiences
