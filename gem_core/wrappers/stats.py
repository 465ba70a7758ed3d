"""`EpisodeStats`: return, turns, success and wall time of each episode, in the final info."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from gem_core.core import Env, Wrapper
from gem_core.errors import check_positive_int

__all__ = ["EpisodeStats"]


class EpisodeStats(Wrapper):
    """Records per-episode statistics and reports them on the final step.

    On the step where ``terminated`` or ``truncated`` is true, the info gets::

        info["episode"] = {
            "return": float,      # sum of the episode's rewards
            "turns": int,         # steps taken in the episode
            "success": bool,      # info["success"] of the final step (False when absent)
            "duration_s": float,  # wall time from reset to the final step
        }

    The final info is a shallow copy of the env's, so a dict the env reuses is never
    modified. Running counters (over the wrapper's life) are attributes:

    Attributes:
        episode_return: the return of the current episode so far.
        episode_turns: the steps taken in the current episode so far.
        episodes: finished episodes.
        successes: finished episodes with ``success`` true.
        total_turns: steps over all episodes (finished or not).
        return_queue / turns_queue / success_queue / duration_queue: the values of the
            last ``buffer_length`` finished episodes (``collections.deque``).

    Args:
        env: the env to wrap.
        buffer_length: how many recent episodes the queues keep.
    """

    def __init__(self, env: Env, buffer_length: int = 100):
        check_positive_int("buffer_length", buffer_length)
        super().__init__(env)
        self.episode_return = 0.0
        self.episode_turns = 0
        self.episodes = 0
        self.successes = 0
        self.total_turns = 0
        self.return_queue: deque[float] = deque(maxlen=buffer_length)
        self.turns_queue: deque[int] = deque(maxlen=buffer_length)
        self.success_queue: deque[bool] = deque(maxlen=buffer_length)
        self.duration_queue: deque[float] = deque(maxlen=buffer_length)
        self._start = time.perf_counter()

    @property
    def success_rate(self) -> float:
        """Fraction of the recent finished episodes (``success_queue``) that succeeded; 0.0 before any."""
        if not self.success_queue:
            return 0.0
        return sum(self.success_queue) / len(self.success_queue)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        result = self.env.reset(seed=seed, options=options)
        self.episode_return = 0.0
        self.episode_turns = 0
        self._start = time.perf_counter()
        return result

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.episode_return += float(reward)
        self.episode_turns += 1
        self.total_turns += 1
        if terminated or truncated:
            success = bool(info.get("success", False))
            duration = time.perf_counter() - self._start
            self.episodes += 1
            self.successes += success
            self.return_queue.append(self.episode_return)
            self.turns_queue.append(self.episode_turns)
            self.success_queue.append(success)
            self.duration_queue.append(duration)
            info = {
                **info,
                "episode": {
                    "return": self.episode_return,
                    "turns": self.episode_turns,
                    "success": success,
                    "duration_s": duration,
                },
            }
        return obs, reward, terminated, truncated, info
