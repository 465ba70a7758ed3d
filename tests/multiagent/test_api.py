"""Tests for gem_core.multiagent: the agent-iteration API and the single-agent view."""

from __future__ import annotations

import warnings

import pytest

from gem_core.checker import check_env
from gem_core.errors import InvalidArgument, ResetNeeded
from gem_core.multiagent import (
    MAX_OTHER_STEPS,
    MultiAgentEnv,
    MultiAgentError,
    as_single_agent,
    derive_agent_seed,
)
from gem_core.wrappers import OrderEnforcing


class Relay(MultiAgentEnv):
    """Agents "a" and "b" alternate; each move gives the *other* agent reward 1.

    The episode ends after ``moves`` moves; ``b`` sees a secret drawn from the seed.
    ``first`` picks who moves first; ``end_at_reset`` ends it before anyone moves.
    """

    possible_agents = ["a", "b"]

    def __init__(self, moves=4, first="b", end_at_reset=False, loop_forever=False):
        super().__init__()
        self.moves, self.first, self.end_at_reset, self.loop_forever = moves, first, end_at_reset, loop_forever
        self.log = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed, options=options)
        self.t = 0
        self.secret = self.rng.randint(0, 10**6)
        self.agent_selection = self.first
        self.observations = {"a": f"a starts, t=0 secret={self.secret}", "b": f"b secret={self.secret}"}
        self.infos = {"a": {"turn": 0}, "b": {"turn": 0}}
        if self.end_at_reset:
            for agent in self.agents:
                self.terminations[agent] = True
                self.infos[agent]["success"] = False
                self.rewards[agent] = 0.5
            self._accumulate_rewards()

    def step(self, action):
        if self._was_dead_step(action):
            return
        agent = self.agent_selection
        self.log.append((agent, action))
        self._cumulative_rewards[agent] = 0.0
        self.t += 1
        other = "b" if agent == "a" else "a"
        self.rewards = {agent: 0.0, other: 1.0}
        self.observations[other] = f"{agent} said {action!r} at t={self.t}"
        self.infos[other] = {"turn": self.t}
        if self.t >= self.moves:
            for a in self.agents:
                self.terminations[a] = True
                self.infos[a]["success"] = True
        if not self.loop_forever:
            self.agent_selection = other
        self._accumulate_rewards()


def test_agent_iteration_follows_pettingzoo():
    env = Relay(moves=3)
    env.reset(seed=1)
    seen = []
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        seen.append((agent, reward, terminated))
        env.step(None if terminated or truncated else f"hi from {agent}")
    assert seen == [("b", 0.0, False), ("a", 1.0, False), ("b", 1.0, False), ("a", 1.0, True), ("b", 0.0, True)]
    assert env.agents == []


def test_a_dead_step_with_an_action_is_an_error():
    env = Relay(moves=1)
    env.reset(seed=0)
    env.step("x")
    with pytest.raises(MultiAgentError, match="is done .* step it with None"):
        env.step("y")


def test_last_before_reset_is_an_error():
    with pytest.raises(MultiAgentError, match=r"last\(\) called before reset"):
        Relay().last()


def test_the_view_plays_the_others_and_sums_rewards_since_the_agents_last_move():
    calls = []
    view = as_single_agent(Relay(moves=6), "a", {"b": lambda obs, info: calls.append(obs) or "B"})
    obs, info = view.reset(seed=0)
    assert obs == "b said 'B' at t=1" and calls == [f"b secret={view.env.secret}"]
    obs, reward, terminated, truncated, info = view.step("A")
    # b's opening move (before a's first move) and b's reply each paid a 1.0.
    assert (obs, reward, terminated) == ("b said 'B' at t=3", 2.0, False)
    assert view.step("A")[1] == 1.0
    obs, reward, terminated, truncated, info = view.step("A")
    assert (reward, terminated, info["success"]) == (0.0, True, True)
    with pytest.raises(ResetNeeded):
        view.step("A")


def test_policies_are_reset_with_derived_seeds():
    class Counter:
        def __init__(self):
            self.seeds = []

        def reset(self, *, seed=None):
            self.seeds.append(seed)

        def act(self, obs, info):
            return "x"

    policy = Counter()
    view = as_single_agent(Relay(), "a", {"b": policy})
    view.reset(seed=7)
    view.reset()
    assert policy.seeds == [derive_agent_seed(7, "b"), None]
    assert derive_agent_seed(7, "b") != derive_agent_seed(7, "c") and derive_agent_seed(None, "b") is None


def test_an_episode_that_ends_before_the_agents_first_move_ends_on_its_first_step():
    view = as_single_agent(Relay(end_at_reset=True), "a", {"b": lambda o, i: "B"})
    view.reset(seed=0)
    obs, reward, terminated, truncated, info = view.step("ignored")
    assert (reward, terminated, info["success"]) == (0.5, True, False)
    assert view.env.log == []


def test_others_that_never_yield_the_turn_are_a_clear_error_not_a_hang():
    view = as_single_agent(Relay(moves=10**9, loop_forever=True), "a", {"b": lambda o, i: "B"})
    with pytest.raises(MultiAgentError, match=f"moved {MAX_OTHER_STEPS} times without giving 'a' a turn"):
        view.reset(seed=0)


@pytest.mark.parametrize("kwargs,message", [
    ({"agent": "c", "others": {"b": print}}, "agent 'c' is not an agent"),
    ({"agent": "a", "others": {}}, r"no policy for agent\(s\) \['b'\]"),
    ({"agent": "a", "others": {"b": print, "z": print}}, r"names agents \['z'\]"),
    ({"agent": "a", "others": {"a": print, "b": print}}, "has a policy for 'a', the agent this view trains"),
    ({"agent": "a", "others": {"b": 42}}, "must have an act"),
])
def test_view_construction_errors_say_how_to_fix(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        as_single_agent(Relay(), **kwargs)


def test_the_view_of_a_toy_env_passes_check_env():
    view = OrderEnforcing(as_single_agent(Relay(moves=4), "a", {"b": lambda o, i: "B"}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no sample_random_action: the fallback script is noted
        check_env(view)


def test_close_closes_env_and_policies_once():
    closed = []

    class P:
        def act(self, o, i):
            return "B"

        def close(self):
            closed.append("p")

    class R(Relay):
        def close(self):
            closed.append("env")

    view = as_single_agent(R(), "a", {"b": P()})
    view.close()
    view.close()
    assert closed == ["env", "p"]
