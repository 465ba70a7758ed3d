"""gem_core.compat.make_vec: the reference's vector loops (oat/verl collect, oat eval, rl2) on gem_core."""

from __future__ import annotations

import numpy as np
import pytest

import gem_core.compat as gem
from gem_core.compat.vector.vector_env import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gem_core.errors import InvalidArgument, NameNotFound

GUESS = "game:GuessTheNumber-v0-easy"


def test_defaults_same_step_and_seed_plus_i():
    vec = gem.make_vec([GUESS] * 3, seed=10)
    assert isinstance(vec, SyncVectorEnv) and vec.autoreset_mode is AutoresetMode.SAME_STEP
    assert [e.seed for e in vec.envs] == [10, 11, 12]
    vec2 = gem.make_vec([GUESS] * 2, vec_kwargs=[{"seed": 7}, {"seed": 99}])
    assert [e.seed for e in vec2.envs] == [7, 99]
    assert vec.env_ids == [GUESS] * 3 and vec.num_envs == len(vec) == 3
    vec.close()
    vec2.close()


def test_oat_collect_loop_same_step():
    """The train_oat / train_verl collect loop: SAME_STEP, obs[i] after done[i] starts the next
    episode, prev_ep_tool_* read from info[i] when done, env.envs[i].reset() on a failed generation."""
    vec = gem.make_vec([GUESS] * 2, vec_kwargs=[{"seed": j} for j in range(2)])
    obs, _ = vec.reset()
    episodes, finished = [[] for _ in range(2)], []
    steps = 0
    while len(finished) < 4:
        actions = ["\\boxed{1}", "no box here"]  # env 1 ends by a format error every turn
        next_obs, reward, terminated, truncated, info = vec.step(actions)
        done = terminated | truncated
        for i in range(2):
            episodes[i].append((obs[i], actions[i], reward[i], done[i]))
            if done[i]:
                finished.append(episodes[i])
                episodes[i] = []
                assert next_obs[i].startswith("You are playing")  # the reset observation
                assert "final_obs" in info[i] and "suffix" in info[i]
        if steps == 1 and not done[0]:
            next_obs[0] = vec.envs[0].reset()[0]  # the generation_failed branch
        obs = next_obs
        steps += 1
        assert steps < 50
    assert all(ep[-1][3] for ep in finished)
    vec.close()


def test_oat_eval_loop_compact_partial_steps_and_env_kwargs():
    """train_oat.run_eval_episode: reset(**{f"env{j}_kwargs": {"idx": i + j}}), then partial steps
    {i: action} whose results are compact (one entry per stepped env, in the dict's order)."""
    vec = gem.make_vec(["math:GSM8K"] * 3, data_path="sample", use_mp=False)
    dataset = vec.envs[0].dataset
    assert len(dataset) > 3
    obs, info = vec.reset(**{f"env{j}_kwargs": {"idx": 2 + j} for j in range(2)})
    assert [info[0]["index"], info[1]["index"]] == [2, 3] and len(obs) == 3
    done = np.array([False, False])
    while not all(done):
        actions = {i: "\\boxed{0}" for i, d in enumerate(done) if not d}
        next_obs, reward, terminated, truncated, info = vec.step(actions)
        assert len(next_obs) == len(reward) == len(info) == len(actions)
        done[~done] = terminated | truncated
    vec.close()


def test_partial_step_keeps_the_dict_order():
    vec = gem.make_vec([GUESS] * 3, seed=0)
    vec.reset()
    obs, reward, terminated, _, _ = vec.step({2: "\\boxed{1}", 0: "no box"})
    assert len(obs) == 2 and reward[0] >= 0 > reward[1]  # env 0's format penalty comes second
    assert list(terminated) == [False, True]
    vec.close()


def test_bad_reset_keywords_and_vec_kwargs():
    vec = gem.make_vec([GUESS] * 2)
    with pytest.raises(InvalidArgument, match="env0_kwargs ... env1_kwargs"):
        vec.reset(env5_kwargs={})
    with pytest.raises(InvalidArgument, match="expects a dict"):
        vec.reset(env0_kwargs=3)
    with pytest.raises(TypeError, match="read-only"):
        vec.envs[0] = vec.envs[1]
    vec.close()
    with pytest.raises(InvalidArgument, match="one dict per env id"):
        gem.make_vec([GUESS] * 2, vec_kwargs=[{}])
    with pytest.raises(NameNotFound, match="Did you mean"):
        gem.make_vec(["game:GuessTheNumbr-v0-easy"])


def test_rl2_async_loop_and_wrappers():
    """rl2 vec_multi_turn: make_vec(..., wrappers=..., async_mode=True), stepping finished envs."""
    from gem_core.compat.wrappers.wrapper_factory import get_wrapper_fns

    vec = gem.make_vec([GUESS] * 2, wrappers=get_wrapper_fns("concat_with_action"), async_mode=True, seed=3)
    try:
        assert isinstance(vec, AsyncVectorEnv)
        with pytest.raises(AttributeError, match="worker processes"):
            vec.envs  # noqa: B018
        obs, _ = vec.reset()
        for _ in range(6):
            obs, reward, terminated, truncated, info = vec.step(["\\boxed{2}", ""])
            assert len(obs) == 2 and all(isinstance(o, str) for o in obs)
        assert vec.get_attr("max_turns") == [4, 4]
    finally:
        vec.close()
    assert vec.closed
