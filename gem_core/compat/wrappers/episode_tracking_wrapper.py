"""The reference ``EpisodeTrackingWrapper`` (step counter, cumulative reward) on `EpisodeStats`."""

from __future__ import annotations

from typing import Any

from gem_core.compat.core import ForwardingMixin, reset_options
from gem_core.core import Env
from gem_core.wrappers.stats import EpisodeStats

__all__ = ["EpisodeTrackingWrapper"]


class EpisodeTrackingWrapper(ForwardingMixin, EpisodeStats):
    """`gem_core.wrappers.EpisodeStats` with the reference info keys.

    Every step: ``info["step_counter"]`` and ``info["cumulative_rewards"]`` (this
    episode's). Every reset: both at 0 plus ``prev_ep_step_counter`` and
    ``prev_ep_cumulative_rewards`` (the previous episode's). ``info["episode"]`` of
    `EpisodeStats` is on the final step as well.
    """

    def __init__(self, env: Env, buffer_length: int = 100):
        super().__init__(env, buffer_length=buffer_length)

    @property
    def step_counter(self) -> int:
        return self.episode_turns

    @property
    def cumulative_rewards(self) -> float:
        return self.episode_return

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None, **kwargs: Any):  # type: ignore[override]
        prev_steps, prev_return = self.episode_turns, self.episode_return
        obs, info = super().reset(seed=seed, options=reset_options(options, kwargs))
        info = dict(info)
        info.update(
            step_counter=0,
            prev_ep_step_counter=prev_steps,
            cumulative_rewards=0.0,
            prev_ep_cumulative_rewards=prev_return,
        )
        return obs, info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        info = dict(info)
        info.update(step_counter=self.episode_turns, cumulative_rewards=self.episode_return)
        return obs, reward, terminated, truncated, info
