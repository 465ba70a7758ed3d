"""gem_core.compat.gem_llm: gem-llm's ``gem.make`` builds gem_core envs (the way ROLL drives them).

Runs where the reference package is importable:
``pip install --no-deps -r tests/compat/requirements-gem-llm.txt`` (gem-llm 0.1.0; 0.0.4 too).
"""

from __future__ import annotations

import pytest

gem = pytest.importorskip(
    "gem",
    reason="gem-llm is not installed; pip install --no-deps -r tests/compat/requirements-gem-llm.txt",
)
registration = pytest.importorskip("gem.envs.registration", reason="`gem` here is not gem-llm")

from gem_core.compat.gem_llm import GemCoreEnv, register_gem_core_envs  # noqa: E402
from gem_core.errors import NameNotFound, RegistrationError  # noqa: E402


@pytest.fixture(autouse=True)
def clean_registry():
    saved = dict(registration.ENV_REGISTRY)
    yield
    registration.ENV_REGISTRY.clear()
    registration.ENV_REGISTRY.update(saved)


def play_like_roll_traj_env_manager(env_type, env_config, group_seed=100, episodes=2, max_steps=50):
    """TrajEnvManager: seed from the group, gem.make(env_id=..., **config), reset(seed=...),
    step(action=...) until terminated (truncated alone never ends an episode), pop suffix."""
    config = dict(env_config)
    if "seed" in config:
        config["seed"] = group_seed
    env = gem.make(env_id=env_type, **config)
    histories = []
    for episode_id in range(episodes):
        observation, info = env.reset(seed=group_seed + episode_id)
        assert observation is not None
        history = [{"observation": observation, **info}]
        step = 0
        terminated = False
        while not terminated:
            observation, reward, terminated, truncated, info = env.step(action="\\boxed{1}")
            suffix = info.pop("suffix", None)
            step += 1
            history[-1].update(reward=reward, **info)
            history.append({"observation": observation, "suffix": suffix})
            assert step < max_steps, "the episode never reported terminated"
        histories.append(history)
    return env, histories


def test_gem_make_builds_gem_core_env_and_plays_like_roll():
    registered = register_gem_core_envs()
    assert "game:GuessTheNumber-v0-easy" in registered and "game:GuessTheNumber-v0" in registered
    env, histories = play_like_roll_traj_env_manager(
        "game:GuessTheNumber-v0-easy", {"min_number": 1, "max_number": 20, "max_turns": 3, "seed": 0}
    )
    assert isinstance(env, GemCoreEnv) and isinstance(env, gem.Env)
    assert env.max_turns == 3 and env.env_id == "game:GuessTheNumber-v0-easy"  # set by gem.make
    for history in histories:
        first = history[0]
        assert first["env_instruction"] == "" and "suffix" in first
        assert len(history) == 4  # three guesses of 1: the turn limit ends it with terminated=True
        for entry in history[:-1]:
            assert set(entry["metrics"]) == {"success", "action_is_valid"}
            assert entry["metrics_agg_mode"] == {"success": "last", "action_is_valid": "mean"}
        assert history[-1]["suffix"]
    env.close()


def test_roll_004_alias_config():
    register_gem_core_envs()
    # traj_envs_gem_games.yaml: env_type game:GuessTheNumber-v0 with the 0.0.4 kwargs
    env, histories = play_like_roll_traj_env_manager(
        "game:GuessTheNumber-v0", {"min_number": 1, "max_number": 20, "max_turns": 5}, episodes=1
    )
    assert len(histories[0]) == 6 and env.max_turns == 5


def test_gem_llm_tool_wrapper_on_a_gem_core_env():
    from gem.tools.python_code_tool import PythonCodeTool
    from gem.tools.tool_env_wrapper import ToolEnvWrapper

    register_gem_core_envs(ids=["game:GuessTheNumber-v0-easy"])
    env = gem.make(env_id="game:GuessTheNumber-v0-easy", max_turns=2, seed=1)
    wrapped = ToolEnvWrapper(env, [PythonCodeTool(timeout=5)], max_tool_uses=1)
    assert wrapped.max_turns == 2  # gem-llm's EnvWrapper copied the plain attribute
    _, info = wrapped.reset(seed=3)
    assert {"env_instruction", "suffix", "tool_use_counter", "prev_ep_tool_use_counter"} <= set(info)
    terminated = False
    while not terminated:
        *_, terminated, truncated, info = wrapped.step("\\boxed{1}")
    assert truncated and info["metrics"]["success"] == 0.0


def test_prefix_ids_and_unknown_ids():
    registered = register_gem_core_envs(prefix="gem_core/", ids=["rg:leg_counting", "game:Wordle-v0"])
    assert registered == ["gem_core/rg:leg_counting", "gem_core/game:Wordle-v0"]
    env = gem.make("gem_core/game:Wordle-v0")
    assert env.max_turns == 15
    with pytest.raises(NameNotFound, match="Did you mean"):
        register_gem_core_envs(ids=["game:Wordl-v0-easy"])


def test_foreign_registrations_are_not_replaced_without_override():
    class UserEnv(gem.Env):
        def reset(self, seed=None):
            return "user", {}

        def step(self, action):
            return "user", 0.0, True, True, {}

    registration.ENV_REGISTRY.pop("toy:Echo-v0", None)
    gem.register("toy:Echo-v0", entry_point=UserEnv)
    with pytest.raises(RegistrationError, match=r"toy:Echo-v0 already registered .* Nothing was registered"):
        register_gem_core_envs()
    assert registration.ENV_REGISTRY["toy:Echo-v0"].entry_point is UserEnv
    register_gem_core_envs(ids=["toy:Echo-v0"], override=True)
    assert isinstance(gem.make("toy:Echo-v0"), GemCoreEnv)
    register_gem_core_envs()  # calling again is harmless


def test_spawn_and_attributes():
    register_gem_core_envs(ids=["game:GuessTheNumber-v0-easy"])
    env = gem.make("game:GuessTheNumber-v0-easy", seed=4)
    assert env.seed == 4 and env.gem_core_env.env_id == "game:GuessTheNumber-v0-easy"
    child = env.spawn(max_turns=2)
    assert child.max_turns == 2
    assert isinstance(env.sample_random_action(), str)
    with pytest.raises(NotImplementedError):
        env.spawn(same_state=True)
