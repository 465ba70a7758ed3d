"""Reference-GEM multi-agent envs: `MultiAgentEnv` (one ``step`` for all actors) and `AgentSelector`.

Mirrors ``gem.multiagent.multi_agent_env`` (gem-llm 0.1.0; ``gem.envs.multiagent`` at
the reference head). Unlike gem_core's native `gem_core.multiagent.MultiAgentEnv`
(PettingZoo's agent iteration: one ``step(action)`` per selected agent, a dead step to
remove an agent), the reference's env takes every active agent's action in one
``step({agent: action})``, returns per-agent dicts, and removes an agent as soon as its
episode ends. A subclass sets ``possible_agents`` (and usually an `AgentSelector`) and
implements ``observe(agent)`` and ``_process_actions(actions)``.

Where this layer differs from gem-llm 0.1.0 (both are bugs there):

- ``reset(seed=s)`` seeds the env's own ``self.rng`` / ``self.np_random`` (the
  reference raises ``AttributeError`` on any seed); the global ``random`` / ``numpy``
  state is seeded too only when the class sets ``seed_global_rng = True``.
- in sequential mode, when the agent at the front of the selector's list is removed
  while selected (it ended in its own turn), the turn passes to the agent after it;
  the reference skips that agent.

Errors are gem_core's `InvalidArgument` (a ``ValueError``, as the reference raises),
with the reference's message first and the fix after it.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from typing import Any

from gem_core.compat.core import Env
from gem_core.errors import InvalidArgument

__all__ = ["MultiAgentEnv", "AgentSelector", "SELECTOR_MODES"]

SELECTOR_MODES: tuple[str, ...] = ("sequential", "parallel")
"""`AgentSelector` modes: one agent acts per step, in turn; or every agent acts each step."""

# (observation, cumulative reward, terminated, truncated, info) of one agent
_AgentState = tuple[Any, float, bool, bool, dict]


def _check_mode(mode: Any) -> str:
    if mode not in SELECTOR_MODES:
        raise InvalidArgument(
            f"Unknown mode: {mode}; AgentSelector mode must be one of {list(SELECTOR_MODES)}"
        )
    return mode


class AgentSelector:
    """Which agents act in the next `MultiAgentEnv.step`.

    - ``"sequential"``: one agent, `selected`; `next` passes the turn to the following
      agent (cycling back to the first).
    - ``"parallel"``: every agent in the list; `next` changes nothing.

    Removing the selected agent moves the selection back one place, so that the `next`
    that ends the step hands the turn to the agent that followed the removed one.

    Args:
        agents: the agents in turn order (copied).
        mode: ``"sequential"`` (default) or ``"parallel"``.

    Attributes:
        mode: the mode (checked again by `get_active_agents`, so it may be reassigned).
        selected: the agent whose turn it is (sequential), the one at the current
            position (parallel), or ``None`` when the list is empty.

    Raises:
        InvalidArgument: an unknown ``mode`` (the reference raises only when
            `get_active_agents` is called).
    """

    def __init__(self, agents: Iterable[str], mode: str = "sequential"):
        self.mode = _check_mode(mode)
        self.reinit(agents)

    @property
    def agents(self) -> list[str]:
        """The agents in turn order (a copy)."""
        return list(self._agents)

    def reinit(self, agents: Iterable[str]) -> None:
        """Start over with ``agents`` (copied): the first one is selected."""
        self._agents: list[str] = list(agents)
        self._current_idx = 0
        self._select()

    def get_active_agents(self) -> list[str]:
        """The agents that act in the next step (a new list)."""
        if _check_mode(self.mode) == "parallel":
            return list(self._agents)
        return [] if self.selected is None else [self.selected]

    def next(self) -> None:
        """Pass the turn to the following agent (sequential); no-op in parallel mode."""
        if self.mode == "sequential" and self._agents:
            self._current_idx = (self._current_idx + 1) % len(self._agents)
            self._select()

    def is_first(self) -> bool:
        """Whether the current position is the first agent's."""
        return self._current_idx == 0

    def is_last(self) -> bool:
        """Whether the current position is the last agent's."""
        return self._current_idx == len(self._agents) - 1

    def add_agent(self, agent: str) -> None:
        """Append ``agent`` to the turn order (no-op when it is there)."""
        if agent not in self._agents:
            self._agents.append(agent)

    def remove_agent(self, agent: str) -> None:
        """Drop ``agent`` from the turn order (no-op when it is not there).

        An agent before the current position shifts the position back with the list, so
        the selection stays on the same agent. Removing the selected agent selects the one
        before it (cyclically), whose `next` is the agent that followed the removed one.
        """
        if agent not in self._agents:
            return
        idx = self._agents.index(agent)
        del self._agents[idx]
        if not self._agents:
            self._current_idx = 0
        elif idx <= self._current_idx:
            self._current_idx = (self._current_idx - 1) % len(self._agents)
        else:
            self._current_idx %= len(self._agents)
        self._select()

    def _select(self) -> None:
        self.selected = self._agents[self._current_idx] if self._agents else None

    def __repr__(self) -> str:
        return f"AgentSelector({self._agents!r}, mode={self.mode!r}, selected={self.selected!r})"


class MultiAgentEnv(Env, metaclass=abc.ABCMeta):
    """Base class for reference-style multi-agent envs (``gem.multiagent.MultiAgentEnv``).

    Observation format: ``{agent: observation}`` (text, from `observe`).
    Action format: ``{agent: action}``, one entry for every active agent that has not ended
    (`AgentSelector.get_active_agents`, or all of `agents` without a selector), and none
    for an inactive agent.
    Rewards: ``{agent: reward}`` as `_process_actions` returns them; each living agent's
    reward is added to its cumulative reward (`get_state`).
    Episode end: `_process_actions` sets ``self.terminations[agent]`` /
    ``self.truncations[agent]``; such an agent is removed from `agents` (and the
    selector) at the end of that step. The episode is over when `agents` is empty.

    A subclass calls ``super().__init__()``, then sets ``possible_agents`` and (usually)
    ``agent_selector``, and implements `observe` and `_process_actions`. Its ``reset``
    override calls ``super().reset(seed=seed)`` and may change the returned dicts.

    Attributes:
        possible_agents: every agent an episode starts with.
        agents: the agents still in the episode.
        terminations, truncations, rewards, infos: per-agent dicts, reset by `reset`.
        agent_selector: the `AgentSelector`, or ``None`` (all agents act every step).
        shared_memory: messages (``{"from", "to", "message"}``) sent this episode.
        global_context: free text for the subclass; reset to ``""``.

    Version history:
        gem-llm 0.1.0: ``gem.multiagent``; the reference head: ``gem.envs.multiagent``
        (both served by this class).
    """

    seed_global_rng: bool = False

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents: list[str] = []
        self.agents: list[str] = []
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.rewards: dict[str, float] = {}
        self.infos: dict[str, dict] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.agent_selector: AgentSelector | None = None
        self.shared_memory: list[dict[str, str]] = []
        self.global_context = ""

    # --- what a subclass implements ------------------------------------------------------
    @abc.abstractmethod
    def observe(self, agent: str) -> str:
        """What ``agent`` sees now."""

    @abc.abstractmethod
    def _process_actions(
        self, actions: dict[str, str]
    ) -> tuple[dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict]]:
        """Apply the validated ``actions``; mark ended agents in ``self.terminations`` /
        ``self.truncations``. Returns ``(observations, rewards, terminations, truncations,
        infos)``, which `step` returns as they are."""

    # --- the API ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[dict[str, Any], dict[str, dict]]:  # type: ignore[override]
        """Start an episode with every agent of ``possible_agents``.

        Args:
            seed: re-seeds ``self.rng`` / ``self.np_random`` (and the global generators
                when ``seed_global_rng`` is set); ``None`` continues them.

        Returns:
            ``({agent: observe(agent)}, {agent: {}})``.
        """
        Env.reset(self, seed)
        self.agents = list(self.possible_agents)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.infos = {agent: {} for agent in self.agents}
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.shared_memory = []
        self.global_context = ""
        if self.agent_selector is not None:
            self.agent_selector.reinit(self.agents)
        observations = {agent: self.observe(agent) for agent in self.agents}
        return observations, {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, str]):  # type: ignore[override]
        """Act for the active agents, add up rewards, remove ended agents, pass the turn.

        Args:
            actions: ``{agent: action}`` for every active agent that has not ended.

        Returns:
            What `_process_actions` returned: ``(observations, rewards, terminations,
            truncations, infos)``, each keyed by agent.

        Raises:
            InvalidArgument: ``actions`` is not a dict, lacks an active agent, or names an
                agent that is not active; the env is unchanged.
        """
        if not isinstance(actions, dict):
            raise InvalidArgument(
                f"Actions must be a dict, got {type(actions)}; pass {{agent: action}} for the "
                f"active agents {self._active_agents()}"
            )
        self._validate_actions(actions, self._active_agents())
        result = self._process_actions(actions)
        rewards = result[1]
        for agent in self.agents:
            if agent in rewards:
                total = self._cumulative_rewards.get(agent, 0.0)
                self._cumulative_rewards[agent] = total + rewards[agent]
        self._remove_dead_agents()
        if self.agent_selector is not None:
            self.agent_selector.next()
        return result

    def get_state(self, agent: str) -> _AgentState:
        """``(observe(agent), cumulative reward, terminated, truncated, info)``.

        Raises:
            InvalidArgument: ``agent`` is not in `agents` (never was, or was removed).
        """
        self._check_present(agent, "Agent")
        return (
            self.observe(agent),
            self._cumulative_rewards.get(agent, 0.0),
            self.terminations.get(agent, False),
            self.truncations.get(agent, False),
            self.infos.get(agent, {}),
        )

    def get_active_states(self) -> dict[str, _AgentState]:
        """`get_state` of every active agent still in the episode."""
        active = [agent for agent in self._active_agents() if agent in self.agents]
        return {agent: self.get_state(agent) for agent in active}

    def add_agent(self, agent_id: str) -> None:
        """Bring ``agent_id`` into the episode (and the selector) with fresh state; no-op
        when it is in `agents`."""
        if agent_id in self.agents:
            return
        self.agents.append(agent_id)
        self.terminations[agent_id] = False
        self.truncations[agent_id] = False
        self.rewards[agent_id] = 0.0
        self.infos[agent_id] = {}
        self._cumulative_rewards[agent_id] = 0.0
        if self.agent_selector is not None:
            self.agent_selector.add_agent(agent_id)

    def remove_agent(self, agent_id: str) -> None:
        """Take ``agent_id`` out of the episode, its state and the selector; no-op when it
        is not in `agents`."""
        if agent_id not in self.agents:
            return
        self.agents.remove(agent_id)
        for books in (self.terminations, self.truncations, self.rewards, self.infos):
            books.pop(agent_id, None)
        self._cumulative_rewards.pop(agent_id, None)
        if self.agent_selector is not None:
            self.agent_selector.remove_agent(agent_id)

    def send_message(self, from_agent: str, to_agent: str, message: str) -> None:
        """Append a message from ``from_agent`` to ``to_agent`` to `shared_memory`.

        Raises:
            InvalidArgument: either agent is not in `agents`.
        """
        self._check_present(from_agent, "Sender")
        self._check_present(to_agent, "Receiver")
        self.shared_memory.append({"from": from_agent, "to": to_agent, "message": message})

    def broadcast_message(self, from_agent: str, message: str) -> None:
        """`send_message` from ``from_agent`` to every other agent in `agents`.

        Raises:
            InvalidArgument: ``from_agent`` is not in `agents`.
        """
        self._check_present(from_agent, "Sender")
        for agent in list(self.agents):
            if agent != from_agent:
                self.shared_memory.append({"from": from_agent, "to": agent, "message": message})

    # --- helpers -----------------------------------------------------------------------------
    def _active_agents(self) -> list[str]:
        if self.agent_selector is not None:
            return self.agent_selector.get_active_agents()
        return list(self.agents)

    def _validate_actions(self, actions: Mapping[str, Any], active_agents: list[str]) -> None:
        """An action for every active agent whose flags say it is still playing, none for
        an agent that is not active."""
        for agent in active_agents:
            ended = self.terminations.get(agent, True) or self.truncations.get(agent, True)
            if not ended and agent not in actions:
                raise InvalidArgument(
                    f"Missing action for active agent {agent}; step() needs an action for each "
                    f"active agent {active_agents}, got actions for {list(actions)}"
                )
        for agent in actions:
            if agent not in active_agents:
                source = "env.agents"
                if self.agent_selector is not None:
                    source = "env.agent_selector.get_active_agents()"
                raise InvalidArgument(
                    f"Agent {agent} provided action but is not active; act only for the active "
                    f"agents {active_agents} ({source})"
                )

    def _remove_dead_agents(self) -> None:
        dead = [a for a in self.agents if self.terminations.get(a) or self.truncations.get(a)]
        for agent in dead:
            self.remove_agent(agent)

    def _check_present(self, agent: str, role: str) -> None:
        if agent not in self.agents:
            raise InvalidArgument(
                f"{role} {agent} not in environment; the agents in this episode are {self.agents}"
                " (an agent leaves when its episode ends; env.reset() brings back possible_agents)"
            )

    def __str__(self) -> str:
        return f"<{type(self).__name__} agents={self.agents}>"

    __repr__ = __str__
