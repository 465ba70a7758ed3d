"""gem_core.compat.make / register / print_envs: the reference's calls run on gem_core envs."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

import gem_core
import gem_core.compat as gem
from gem_core.compat.core import CompatEnv, LegacyEnvAdapter, reset_options
from gem_core.compat.envs.registration import LEGACY_ALIASES, DuplicateEnvError, resolve
from gem_core.errors import InvalidKwarg, NameNotFound, RegistrationError

GUESS = "game:GuessTheNumber-v0-easy"


def test_import_gem_core_does_not_import_compat():
    code = "import sys, gem_core; print(any(m.startswith('gem_core.compat') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


def test_make_env_id_keyword_and_swallowed_kwargs():
    # openrlhf / rl2 / tinker: gem.make(env_id=..., seed=time.time_ns(), use_mp=False)
    env = gem.make(env_id=GUESS, seed=233, use_mp=False, verbose=True, load_from_cache_file=False)
    assert isinstance(env, CompatEnv)
    assert env.env_id == GUESS and env.seed == 233
    assert env.entry_point == gem_core.spec(GUESS).entry_point
    assert env.max_turns == 4  # forwarded attribute (openrlhf reads env.max_turns)
    obs, info = env.reset()
    assert obs.startswith("You are playing Guess The Number")
    assert info["suffix"] == env.get_task_suffix() and "boxed" in info["suffix"]


def test_make_seed_is_first_reset_seed():
    a, b = gem.make(GUESS, seed=5), gem.make(GUESS)
    first = a.reset()[0], a.step("\\boxed{5}")[0]
    b.reset(5)  # positional seed, as openrlhf's self.env.reset(random.randint(...))
    assert (first[0], b.step("\\boxed{5}")[0]) == first
    # a time.time_ns() seed is accepted
    gem.make(GUESS, seed=1_764_000_000_000_000_000).reset()


def test_step_info_has_suffix_and_native_keys():
    env = gem.make(GUESS, seed=0)
    env.reset()
    _, _, _, _, info = env.step("\\boxed{3}")
    assert "suffix" in info and "success" in info and "turn" in info


def test_unknown_kwarg_still_raises_naming_env_and_kwarg():
    with pytest.raises(InvalidKwarg) as e:
        gem.make("math:GSM8K", data_path="sample", no_such_option=1)
    assert "math:GSM8K" in str(e.value) and "no_such_option" in str(e.value)


def test_unknown_id_gets_did_you_mean():
    with pytest.raises(NameNotFound) as e:
        gem.make("game:GuesTheNumber-v0-easy")
    assert "Did you mean" in str(e.value) and GUESS in str(e.value)


def test_single_turn_families_swallow_max_turns():
    # reference tests: gem.make(env_name, max_turns=3) on a math env stays single-turn
    env = gem.make("math:GSM8K", max_turns=3, seed=1, data_path="sample", use_mp=False)
    env.reset()
    _, _, terminated, _, _ = env.step("\\boxed{-1}")
    assert terminated
    assert len(env.dataset) == len(env.unwrapped.rows) > 0  # oat eval reads env.dataset


def test_game_max_turns_is_the_turn_limit():
    env = gem.make(GUESS, max_turns=2, seed=0)
    assert env.max_turns == 2
    env.reset()
    _, _, terminated, truncated, _ = env.step("\\boxed{1}")
    assert not terminated and not truncated
    _, _, terminated, truncated, _ = env.step("\\boxed{1}")
    assert terminated and truncated  # the reference's convention by default


def test_a_loop_testing_only_terminated_ends_at_the_turn_limit():
    """A loop written for the reference (ROLL's tests only ``terminated``) stops at the limit."""
    vec = gem.make_vec([GUESS], seed=0, max_turns=3)  # kept: the vector env owns its sub-envs
    for env in (gem.make(GUESS, max_turns=3, seed=0), vec.envs[0]):
        env.reset()
        steps, terminated = 0, False
        while not terminated:
            _, _, terminated, _, _ = env.step("\\boxed{1}")
            steps += 1
            assert steps <= 3, "stepped past the turn limit"
        assert steps == 3


def test_gymnasium_convention_on_request():
    vec = gem.make_vec([GUESS], seed=0, max_turns=1, terminate_on_truncation=False)
    for env in (gem.make(GUESS, max_turns=1, seed=0, terminate_on_truncation=False), vec.envs[0]):
        env.reset()
        _, _, terminated, truncated, _ = env.step("\\boxed{1}")
        assert truncated and not terminated


def test_reset_keywords_become_options():
    assert reset_options(None, {"idx": 3}) == {"index": 3}
    assert reset_options({"a": 1}, {}) == {"a": 1} and reset_options(None, {}) is None
    env = gem.make("math:GSM8K", data_path="sample")
    _, info = env.reset(idx=3)  # the reference math reset(idx=...)
    assert info["index"] == 3


@pytest.mark.parametrize("alias", sorted(LEGACY_ALIASES))
def test_legacy_004_aliases(alias):
    target, kwargs = LEGACY_ALIASES[alias]
    spec, got = resolve(alias)
    assert spec.id == target and got == kwargs
    env = gem.make(alias, seed=0)
    assert env.max_turns == kwargs["max_turns"]
    obs, _ = env.reset()
    assert isinstance(obs, str) and obs


def test_spawn_and_print_envs(capsys):
    env = gem.make(GUESS, seed=4, max_turns=3)
    child = env.spawn(seed=9)
    assert child.seed == 9 and child.max_turns == 3
    with pytest.raises(NotImplementedError, match="same seed"):
        env.spawn(same_state=True)
    gem.print_envs()
    assert GUESS in capsys.readouterr().out


def test_missing_attribute_names_the_wrapper():
    env = gem.make(GUESS)
    with pytest.raises(AttributeError, match="no env it wraps has one"):
        env.no_such_attribute  # noqa: B018


# --- register: a reference-style env class (examples/register_new_env.py) ------------
class ReverseStringEnv(gem.Env):
    """Written the reference way: reset(self, seed=None), super().reset(seed), global random."""

    def __init__(self, str_len: int = 5, **_):
        super().__init__()
        self.str_len = str_len

    def reset(self, seed=None):
        super().reset(seed)
        self.gt_str = "".join(random.choices("abcdefgh", k=self.str_len))
        return f"Reverse the string: {self.gt_str}", {}

    def step(self, action):
        ok = action == self.gt_str[::-1]
        return "<｜TERMINAL_STATE｜>", float(ok), True, True, {"success": ok}


class PlainRefEnv:
    """Not a gem_core.Env at all (like a class subclassing gem-llm's gem.Env)."""

    def __init__(self, word="abc"):
        self.word = word

    def reset(self, seed=None, **kwargs):
        self.kwargs = kwargs
        return self.word, {}

    def step(self, action):
        return "done", 1.0, True, False, {"success": True}


def test_register_reference_style_class():
    env_id = "compat_test:ReverseString-v0"
    gem.register(env_id, ReverseStringEnv, str_len=4)
    try:
        env = gem.make(env_id, seed=3)
        assert isinstance(env.unwrapped, LegacyEnvAdapter)
        obs, _ = env.reset()
        assert len(env.gt_str) == 4  # forwarded through the adapter (register_new_env reads it)
        obs2, _ = gem.make(env_id).reset(3)
        assert obs == obs2  # reset(seed) seeds the global random, as the reference does
        _, reward, terminated, _, _ = env.step(env.gt_str[::-1])
        assert reward == 1.0 and terminated
        # extra keywords are constructor kwargs and can be overridden in make
        assert len(gem.make(env_id, str_len=7).env.unwrapped.inner.__dict__["str_len"] * "x") == 7
        with pytest.raises(DuplicateEnvError) as e:
            gem.register(env_id, ReverseStringEnv)
        assert isinstance(e.value, ValueError) and env_id in str(e.value)
    finally:
        dict.pop(gem_core.registry, env_id, None)


def test_register_string_entry_point_and_plain_class():
    env_id = "compat_test:Plain-v0"
    gem.register(env_id, f"{__name__}:PlainRefEnv", word="xyz")
    try:
        env = gem.make(env_id)
        assert env.reset()[0] == "xyz"
        env.reset(1, idx=2, level="hard")
        assert env.kwargs == {"index": 2, "level": "hard"}
        assert env.word == "xyz"
    finally:
        dict.pop(gem_core.registry, env_id, None)


def test_register_takes_ids_without_a_category_as_the_reference_does():
    from gem_core.compat.envs.registration import PLAIN_IDS

    gem.register("compat_plain_sokoban", PlainRefEnv, word="box")  # ROLL's register("sokoban", ...)
    gem.register("compat_plain_other", PlainRefEnv, plain_id_category="mine")
    try:
        assert PLAIN_IDS["compat_plain_sokoban"] == "custom:compat_plain_sokoban"
        assert "mine:compat_plain_other" in gem_core.registry
        env = gem.make("compat_plain_sokoban")
        assert env.env_id == "compat_plain_sokoban" and env.reset()[0] == "box"
        assert gem.make("custom:compat_plain_sokoban").reset()[0] == "box"
        vec = gem.make_vec(["compat_plain_sokoban", "compat_plain_other"])
        assert [e.reset()[0] for e in vec.envs] == ["box", "abc"]
        with pytest.raises(DuplicateEnvError, match="'compat_plain_sokoban' is already registered"):
            gem.register("compat_plain_sokoban", PlainRefEnv)
        with pytest.raises(RegistrationError, match="plain_id_category"):
            gem.register("compat_plain_third", PlainRefEnv, plain_id_category="a:b")
        assert "compat_plain_third" not in PLAIN_IDS
    finally:
        for plain in ("compat_plain_sokoban", "compat_plain_other"):
            dict.pop(gem_core.registry, PLAIN_IDS.pop(plain, ""), None)


def test_register_rejects_malformed_entry_point():
    with pytest.raises(RegistrationError, match="malformed"):
        gem.register("compat_test:Bad-v0", "no_colon")
    with pytest.raises(RegistrationError, match="callable"):
        gem.register("compat_test:Bad-v0", 42)


def test_legacy_adapter_options_it_cannot_take():
    class NoKwargs:
        def reset(self, seed=None):
            return "x", {}

        def step(self, action):
            return "x", 0.0, True, False, {}

    adapter = LegacyEnvAdapter(NoKwargs())
    assert adapter.reset(seed=1) == ("x", {})
    with pytest.raises(TypeError, match=r"does not take the reset options \['idx'\]"):
        adapter.reset(seed=1, options={"idx": 1})
