"""Reference ``gem.utils.debug``: print an episode played by a policy (for quick manual checks).

``run_and_print_episode(env, policy, ignore_done=False, max_steps=1e9)`` resets ``env``,
then steps it with ``policy(obs)`` until the episode ends (every sub-env's, for a vector
env) or ``max_steps``, printing each step's observation, action and reward and the wall
time. ``..._with_selective_step`` steps a vector env with a random non-empty subset of the
actions (``{i: action}``); ``..._async`` awaits ``env.reset()`` / ``env.step()``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pprint import pprint
from typing import Any

import numpy as np

__all__ = ["ppprint", "run_and_print_episode", "run_and_print_episode_async", "run_and_print_episode_with_selective_step"]


def ppprint(x: Any) -> None:
    """Pretty-print ``x``; a list or tuple item by item, numbered."""
    if isinstance(x, (list, tuple)):
        for i, item in enumerate(x):
            print("-" * 5, f"{i + 1}/{len(x)}:")
            pprint(item)
            print("")
    else:
        pprint(x)


def _print_step(step: int, shown: list[tuple[str, Any]], terminated: Any, truncated: Any) -> bool:
    print("=" * 30)
    print(f"Step {step}")
    for title, value in shown:
        print("-" * 10, title, "-" * 10)
        ppprint(value)
    print("terminated: ", terminated, "truncated: ", truncated)
    print("=" * 30)
    done = np.logical_or(terminated, truncated)
    return bool(np.all(done))


def run_and_print_episode(env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9) -> None:
    """Play and print one episode of ``env`` with ``policy`` (see the module docs)."""
    start = time.time()
    obs, _ = env.reset()
    step = 0
    while True:
        step += 1
        action = policy(obs)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        done = _print_step(step, [("observation", obs), ("action", action), ("reward", reward)], terminated, truncated)
        obs = next_obs
        if (done and not ignore_done) or step >= max_steps:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")


def run_and_print_episode_with_selective_step(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9
) -> None:
    """Like `run_and_print_episode` on a vector env, stepping a random non-empty subset each step."""
    start = time.time()
    obs, _ = env.reset()
    step = 0
    while True:
        step += 1
        actions = list(policy(obs))
        if not actions:
            raise ValueError("run_and_print_episode_with_selective_step: the policy returned no actions")
        chosen = {i: a for i, a in enumerate(actions) if random.random() > 0.5} or {0: actions[0]}
        next_obs, reward, terminated, truncated, _ = env.step(chosen)
        done = _print_step(step, [("action", chosen), ("next_observation", next_obs), ("reward", reward)], terminated, truncated)
        obs = next_obs
        if (done and not ignore_done) or step >= max_steps:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")


async def run_and_print_episode_async(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9
) -> None:
    """`run_and_print_episode` for an env whose ``reset`` and ``step`` are coroutines."""
    start = time.time()
    obs, _ = await env.reset()
    step = 0
    while True:
        step += 1
        action = policy(obs)
        next_obs, reward, terminated, truncated, _ = await env.step(action)
        done = _print_step(step, [("observation", obs), ("action", action), ("reward", reward)], terminated, truncated)
        obs = next_obs
        if (done and not ignore_done) or step >= max_steps:
            break
    print(f"----TIME: {time.time() - start:.2f} seconds")
