"""Envs for the pool tests (imported by the Ray workers, so kept free of test machinery)."""

from __future__ import annotations

import threading
import time

from tests.testing_env import GenericTestEnv


def _reset(env, seed, options):
    if seed == 13:
        raise OSError("no data")
    env.t = 0
    return f"start {seed}", {}


def _step(env, action):
    if action == "boom":
        raise ValueError("env exploded")
    if action == "lock":
        return "locked", 0.0, False, False, {"lock": threading.Lock()}
    if action == "slow":
        time.sleep(0.4)
    env.t += 1
    return f"obs {env.t}", 1.0, env.t >= env.episode_len, False, {"success": env.t >= env.episode_len}


class Scripted(GenericTestEnv):
    """``start <seed>`` (seed 13 raises in reset); ``boom`` raises in step, ``lock`` returns
    an info that cannot be pickled, ``slow`` takes 0.4 s; ends after ``episode_len`` steps."""

    def __init__(self, episode_len: int = 2):
        super().__init__(reset_fn=_reset, step_fn=_step, episode_len=episode_len)
