"""gem_core.compat.multiagent: the reference's dict-of-actions multi-agent env and its AgentSelector."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import pytest

import gem_core.compat as gem
import gem_core.compat.envs.multiagent as head
import gem_core.compat.envs.multiagent.multi_agent_env as head_module
from gem_core.compat.multiagent import AgentSelector, MultiAgentEnv
from gem_core.errors import InvalidArgument


class Scoreboard(MultiAgentEnv):
    """Each action scores its length; ``"quit"`` ends the agent; ``limit`` steps truncate all.

    ``_process_actions`` records every call so tests can see who acted, in which order.
    """

    def __init__(self, agents=("a", "b", "c"), mode: str | None = "sequential", limit: int = 100):
        super().__init__()
        self.possible_agents = list(agents)
        if mode is not None:
            self.agent_selector = AgentSelector(self.possible_agents, mode=mode)
        self.limit = limit
        self.turns: list[dict[str, str]] = []

    def reset(self, seed=None):
        self.turns = []
        return super().reset(seed=seed)

    def observe(self, agent: str) -> str:
        return f"{agent} after {len(self.turns)} steps"

    def _process_actions(self, actions):
        self.turns.append(dict(actions))
        rewards = {agent: float(len(action)) for agent, action in actions.items()}
        for agent, action in actions.items():
            if action == "quit":
                self.terminations[agent] = True
        if len(self.turns) >= self.limit:
            for agent in self.agents:
                self.truncations[agent] = True
        observations = {agent: self.observe(agent) for agent in actions}
        return observations, rewards, self.terminations, self.truncations, self.infos


def _play_turns(env: Scoreboard, n: int, action: str = "x") -> list[str]:
    """Step ``n`` sequential turns; the agents that acted, in order."""
    acted = []
    for _ in range(n):
        [agent] = env.agent_selector.get_active_agents()
        env.step({agent: action})
        acted.append(agent)
    return acted


# --- import paths -------------------------------------------------------------------------
def test_both_reference_paths_serve_the_same_objects():
    assert head.MultiAgentEnv is MultiAgentEnv and head.AgentSelector is AgentSelector
    assert head_module.MultiAgentEnv is MultiAgentEnv and head_module.AgentSelector is AgentSelector
    assert issubclass(MultiAgentEnv, gem.Env)


def test_import_gem_multiagent_through_the_alias():
    hide_and_alias = """
    import importlib.abc, sys
    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "gem" or name.startswith("gem."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Hide())
    import gem_core.compat as compat
    compat.install_as_gem()
    from gem.multiagent import AgentSelector, MultiAgentEnv
    from gem.envs.multiagent import MultiAgentEnv as Head
    from gem.envs.multiagent.multi_agent_env import AgentSelector as HeadSelector
    import gem_core.compat.multiagent as ours
    assert MultiAgentEnv is Head is ours.MultiAgentEnv
    assert AgentSelector is HeadSelector is ours.AgentSelector
    print("ok")
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(hide_and_alias)], capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip() == "ok", out.stdout + out.stderr


# --- AgentSelector --------------------------------------------------------------------------
def test_selector_sequential_cycles_and_reports_position():
    selector = AgentSelector(["p", "q", "r"])
    seen = []
    for _ in range(7):
        seen.append((selector.selected, selector.is_first(), selector.is_last()))
        assert selector.get_active_agents() == [selector.selected]
        selector.next()
    assert [s[0] for s in seen] == ["p", "q", "r", "p", "q", "r", "p"]
    assert seen[0][1:] == (True, False) and seen[1][1:] == (False, False) and seen[2][1:] == (False, True)


def test_selector_parallel_returns_everyone_and_next_is_a_no_op():
    selector = AgentSelector(("p", "q"), mode="parallel")
    active = selector.get_active_agents()
    assert active == ["p", "q"]
    active.append("mutated")
    selector.next()
    assert selector.get_active_agents() == ["p", "q"] and selector.selected == "p"


def test_selector_copies_its_agents_and_reinit_starts_over():
    agents = ["p", "q", "r"]
    selector = AgentSelector(agents)
    agents.append("s")
    assert selector.agents == ["p", "q", "r"]
    selector.next()
    selector.reinit(["x", "y"])
    assert selector.selected == "x" and selector.is_first() and selector.agents == ["x", "y"]
    selector.next()
    assert selector.is_last() and selector.selected == "y"


def test_selector_add_and_remove_keep_the_selection():
    selector = AgentSelector(["p", "q"])
    selector.next()  # q
    selector.add_agent("r")
    selector.add_agent("r")  # no duplicate
    assert selector.agents == ["p", "q", "r"] and selector.selected == "q"
    selector.remove_agent("p")  # before the selection: q stays selected
    assert selector.selected == "q" and selector.agents == ["q", "r"]
    selector.remove_agent("missing")  # no-op
    selector.remove_agent("r")  # after the selection
    assert selector.selected == "q"
    selector.remove_agent("q")
    assert selector.selected is None and selector.agents == [] and selector.get_active_agents() == []
    selector.next()  # on an empty list: nothing to do
    assert selector.selected is None


@pytest.mark.parametrize("removed, expected_next", [("p", "q"), ("q", "r"), ("r", "p")])
def test_selector_removing_the_selected_agent_hands_the_turn_on(removed, expected_next):
    """What MultiAgentEnv.step does when the acting agent ends: remove it, then next().
    The first-agent case skipped "q" in gem-llm 0.1.0."""
    selector = AgentSelector(["p", "q", "r"])
    while selector.selected != removed:
        selector.next()
    selector.remove_agent(removed)
    selector.next()
    assert selector.selected == expected_next


def test_selector_unknown_mode():
    with pytest.raises(ValueError, match=r"Unknown mode: round_robin; AgentSelector mode must be one of \['sequential', 'parallel'\]"):
        AgentSelector(["p"], mode="round_robin")
    selector = AgentSelector(["p"])
    selector.mode = "both"  # reassigned later: caught where it is used
    with pytest.raises(InvalidArgument, match="Unknown mode: both"):
        selector.get_active_agents()


# --- MultiAgentEnv: episodes ------------------------------------------------------------------
def test_reset_returns_every_agent_and_fresh_books():
    env = Scoreboard()
    obs, infos = env.reset()
    assert obs == {"a": "a after 0 steps", "b": "b after 0 steps", "c": "c after 0 steps"}
    assert infos == {"a": {}, "b": {}, "c": {}} and infos["a"] is not env.infos["a"]
    assert env.agents == ["a", "b", "c"] and env.agents is not env.possible_agents
    assert env.terminations == env.truncations == {"a": False, "b": False, "c": False}
    assert env.rewards == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert env.shared_memory == [] and env.global_context == ""


def test_sequential_mode_takes_turns_and_rejects_out_of_turn_actions():
    env = Scoreboard()
    env.reset()
    assert _play_turns(env, 5) == ["a", "b", "c", "a", "b"]
    assert env.turns == [{"a": "x"}, {"b": "x"}, {"c": "x"}, {"a": "x"}, {"b": "x"}]
    with pytest.raises(ValueError, match=r"Agent a provided action but is not active; act only for the active agents \['c'\]"):
        env.step({"c": "x", "a": "x"})
    assert len(env.turns) == 5 and env.agent_selector.selected == "c"  # the bad step changed nothing


def test_parallel_mode_needs_every_active_agent():
    env = Scoreboard(mode="parallel")
    env.reset()
    obs, rewards, term, trunc, info = env.step({"a": "xy", "b": "x", "c": ""})
    assert set(obs) == {"a", "b", "c"} and rewards == {"a": 2.0, "b": 1.0, "c": 0.0}
    with pytest.raises(ValueError, match=r"Missing action for active agent b; step\(\) needs an action for each active agent \['a', 'b', 'c'\], got actions for \['a', 'c'\]"):
        env.step({"a": "x", "c": "x"})
    assert len(env.turns) == 1


def test_without_a_selector_every_agent_is_active():
    env = Scoreboard(mode=None)
    env.reset()
    assert set(env.get_active_states()) == {"a", "b", "c"}
    with pytest.raises(InvalidArgument, match=r"Missing action for active agent c"):
        env.step({"a": "x", "b": "x"})
    with pytest.raises(InvalidArgument, match=r"Agent z provided action but is not active.*\(env\.agents\)"):
        env.step({"a": "x", "b": "x", "c": "x", "z": "x"})
    env.step({"a": "x", "b": "x", "c": "quit"})
    assert env.agents == ["a", "b"]


def test_cumulative_rewards_add_up_per_agent_and_reset_clears_them():
    env = Scoreboard()
    env.reset()
    for action in ["abc", "", "zz", "a"]:  # a, b, c, a
        [agent] = env.agent_selector.get_active_agents()
        env.step({agent: action})
    assert [env.get_state(agent)[1] for agent in "abc"] == [4.0, 0.0, 2.0]
    obs, cumulative, terminated, truncated, info = env.get_state("a")
    assert obs == "a after 4 steps" and (terminated, truncated, info) == (False, False, {})
    env.reset()
    assert env.get_state("a")[1] == 0.0


def test_ended_agents_leave_at_once_and_the_turn_order_closes_up():
    env = Scoreboard()
    env.reset()
    _, rewards, term, _, _ = env.step({"a": "quit"})
    assert rewards == {"a": 4.0}
    assert env.agents == ["b", "c"] and "a" not in env.terminations and "a" not in term
    # gem-llm 0.1.0 gave the next turn to "c" here, skipping "b"
    assert _play_turns(env, 4) == ["b", "c", "b", "c"]
    with pytest.raises(ValueError, match=r"Agent a not in environment; the agents in this episode are \['b', 'c'\]"):
        env.get_state("a")
    env.reset()
    assert env.agents == ["a", "b", "c"] and env.agent_selector.selected == "a"


def test_truncation_empties_the_episode_in_parallel_mode():
    env = Scoreboard(mode="parallel", limit=3)
    env.reset()
    env.step({"a": "x", "b": "quit", "c": "x"})
    assert env.agents == ["a", "c"] and env.agent_selector.get_active_agents() == ["a", "c"]
    env.step({"a": "x", "c": "x"})
    _, _, _, trunc, _ = env.step({"a": "x", "c": "x"})
    assert env.agents == [] and env.get_active_states() == {} and trunc == {}
    assert env.agent_selector.get_active_agents() == []


def test_an_active_agent_already_ended_need_not_act():
    env = Scoreboard(mode="parallel")
    env.reset()
    env.truncations["b"] = True  # ended outside _process_actions, not yet removed
    env.step({"a": "x", "c": "x"})
    assert env.agents == ["a", "c"]


def test_get_active_states():
    env = Scoreboard()
    env.reset()
    assert env.get_active_states() == {"a": ("a after 0 steps", 0.0, False, False, {})}
    env.step({"a": "xx"})
    assert env.get_active_states() == {"b": ("b after 1 steps", 0.0, False, False, {})}
    assert env.get_state("a")[1] == 2.0


def test_add_and_remove_agent_mid_episode():
    env = Scoreboard()
    env.reset()
    env.add_agent("d")
    env.add_agent("d")
    assert env.agents == ["a", "b", "c", "d"] and env.get_state("d")[1:] == (0.0, False, False, {})
    assert _play_turns(env, 4) == ["a", "b", "c", "d"]
    env.remove_agent("d")
    env.remove_agent("d")  # no-op
    assert "d" not in env.rewards and "d" not in env.agent_selector.agents
    assert _play_turns(env, 2) == ["a", "b"]


# --- messages ----------------------------------------------------------------------------------
def test_send_and_broadcast_messages():
    env = Scoreboard()
    env.reset()
    env.send_message("a", "b", "hi")
    env.broadcast_message("c", "all")
    assert env.shared_memory == [
        {"from": "a", "to": "b", "message": "hi"},
        {"from": "c", "to": "a", "message": "all"},
        {"from": "c", "to": "b", "message": "all"},
    ]
    env.reset()
    assert env.shared_memory == []


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda env: env.send_message("a", "zz", "hi"), "Receiver zz not in environment"),
        (lambda env: env.send_message("zz", "a", "hi"), "Sender zz not in environment"),
        (lambda env: env.broadcast_message("zz", "hi"), "Sender zz not in environment"),
    ],
)
def test_message_to_or_from_an_unknown_agent(call, message):
    env = Scoreboard()
    env.reset()
    with pytest.raises(ValueError, match=message + r"; the agents in this episode are \['a', 'b', 'c'\]"):
        call(env)
    assert env.shared_memory == []


# --- errors and contract -------------------------------------------------------------------------
def test_step_needs_a_dict():
    env = Scoreboard()
    env.reset()
    with pytest.raises(ValueError, match=r"Actions must be a dict, got <class 'str'>; pass \{agent: action\} for the active agents \['a'\]"):
        env.step("x")
    assert env.turns == []


def test_observe_and_process_actions_are_abstract():
    class Incomplete(MultiAgentEnv):
        def observe(self, agent):
            return ""

    with pytest.raises(TypeError, match="_process_actions"):
        Incomplete()


# --- seeding ------------------------------------------------------------------------------------------
class Dice(Scoreboard):
    def observe(self, agent: str) -> str:
        return f"{agent} rolls {self.rng.randint(1, 10**9)}"


def test_seeded_reset_repeats_the_episode_and_leaves_global_random_alone():
    env = Dice()
    random.seed(5)
    before = random.random()
    random.seed(5)
    first, _ = env.reset(seed=3)
    again, _ = env.reset(seed=3)
    other, _ = env.reset(seed=4)
    assert first == again and first != other
    assert random.random() == before  # gem-llm 0.1.0 raised AttributeError on reset(seed=...)


def test_seed_global_rng_opt_in():
    class GlobalDice(Dice):
        seed_global_rng = True

    GlobalDice().reset(seed=11)
    drawn = random.random()
    random.seed(11)
    assert drawn == random.random()
