"""The turn-based multi-agent env contract (PettingZoo's agent-iteration API) and agent policies."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from gem_core import seeding
from gem_core.errors import InvalidArgument, MultiAgentError

__all__ = [
    "MultiAgentEnv",
    "AgentPolicy",
    "MultiAgentError",
    "as_policy",
    "derive_agent_seed",
]


@runtime_checkable
class AgentPolicy(Protocol):
    """What plays an agent that is not being trained (a user simulator, a fixed opponent).

    ``act(observation, info)`` returns the agent's action (text); ``reset(seed=...)``, when
    present, is called at the start of every episode; ``close()``, when present, by the
    view's `close`.
    """

    def act(self, observation: Any, info: dict[str, Any]) -> Any: ...


class _CallablePolicy:
    """A plain ``fn(observation, info) -> action`` as an `AgentPolicy`."""

    def __init__(self, fn: Callable[[Any, dict[str, Any]], Any]):
        self.fn = fn

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        return self.fn(observation, info)

    def __repr__(self) -> str:
        return f"<policy {getattr(self.fn, '__qualname__', self.fn)!s}>"


def as_policy(policy: Any, *, agent: str = "?") -> AgentPolicy:
    """``policy`` itself when it has ``act``; a callable ``(observation, info) -> action``
    wrapped as one.

    Raises:
        InvalidArgument: neither (the message names ``agent``).
    """
    if callable(getattr(policy, "act", None)):
        return policy
    if callable(policy):
        return _CallablePolicy(policy)
    raise InvalidArgument(
        f"the policy for agent {agent!r} must have an act(observation, info) method or be a "
        f"callable (observation, info) -> action; got {type(policy).__name__}"
    )


def derive_agent_seed(seed: int | None, agent: str) -> int | None:
    """The seed agent ``agent``'s policy is reset with in an episode seeded ``seed``."""
    if seed is None:
        return None
    digest = hashlib.blake2b(repr((seed, "agent", agent)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class MultiAgentEnv:
    """A turn-based env of several LLM agents, with PettingZoo's agent-iteration API.

    One agent acts at a time: `agent_selection`. A subclass sets ``possible_agents`` and
    implements `reset` (calling ``super().reset(seed=seed)`` first, which seeds
    ``self.rng``/``self.np_random`` and sets `agents` and the per-agent dicts) and `step`
    (the action of `agent_selection`), and may override `observe` and `close`.

    Per-agent state, as in PettingZoo (each a dict keyed by agent name):
        - ``observations``: what each agent sees now (`observe` returns it);
        - ``rewards``: the rewards of the last step;
        - ``terminations`` / ``truncations``: the agent's episode ended (the task ended /
          a budget outside the task ran out; never merged);
        - ``infos``: facts about the agent's situation (``success`` on the final step,
          as in `gem_core.Env`);
        - ``_cumulative_rewards``: what the agent earned since it last acted; `last`
          returns it for the selected agent. A subclass's `step` zeroes the acting
          agent's entry first and calls `_accumulate_rewards` after setting ``rewards``.

    Episode end follows PettingZoo: a terminated or truncated agent stays in `agents`
    until it is stepped once more with ``None`` (the "dead step", `_was_dead_step`),
    which removes it; the episode is over when `agents` is empty. `agent_iter` yields
    the selected agent until then.

    Seeding: ``reset(seed=s)`` re-seeds the env's generators (same seed, same episode);
    the global ``random``/``numpy`` state is never touched.
    """

    metadata: dict[str, Any] = {}
    possible_agents: list[str] = []

    _rng: random.Random | None = None

    def __init__(self) -> None:
        self.agents: list[str] = []
        self.agent_selection: str = ""
        self.observations: dict[str, Any] = {}
        self.rewards: dict[str, float] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.infos: dict[str, dict[str, Any]] = {}

    # --- the API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode: seed the generators and clear the per-agent dicts.

        Subclasses call this first, then set the observations and `agent_selection`.
        """
        if seed is not None:
            self._rng = seeding.py_random(seed)
            self._np_random = None
            self._np_random_seed = seeding.check_seed(seed)
        self.agents = list(self.possible_agents)
        self.observations = {a: None for a in self.agents}
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}

    def step(self, action: Any) -> None:
        """Apply ``action`` as the move of `agent_selection`."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def observe(self, agent: str) -> Any:
        """What ``agent`` sees now."""
        return self.observations.get(agent)

    def last(self, observe: bool = True) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """``(observation, cumulative reward, terminated, truncated, info)`` of the selected agent."""
        agent = self.agent_selection
        if agent not in self.terminations:
            raise MultiAgentError(f"{self}.last() called before reset(); call env.reset() first")
        return (
            self.observe(agent) if observe else None,
            self._cumulative_rewards[agent],
            self.terminations[agent],
            self.truncations[agent],
            self.infos[agent],
        )

    def agent_iter(self, max_iter: int = 2**63) -> Iterator[str]:
        """Yield `agent_selection` until every agent is done (or ``max_iter`` times)."""
        for _ in range(max_iter):
            if not self.agents:
                return
            yield self.agent_selection

    def done(self, agent: str) -> bool:
        """Whether ``agent``'s episode ended (terminated or truncated)."""
        return bool(self.terminations.get(agent) or self.truncations.get(agent))

    def close(self) -> None:
        """Release resources. Safe to call twice."""

    # --- helpers for subclasses ---------------------------------------------------------
    def _accumulate_rewards(self) -> None:
        for agent, reward in self.rewards.items():
            self._cumulative_rewards[agent] = self._cumulative_rewards.get(agent, 0.0) + reward

    def _was_dead_step(self, action: Any) -> bool:
        """Handle the step of a done `agent_selection` (PettingZoo's dead step).

        Returns ``True`` when the selected agent was done: it is removed from `agents`
        and the selection moves to another done agent, or the first remaining one.
        ``action`` must be ``None`` then.
        """
        agent = self.agent_selection
        if not self.done(agent):
            return False
        if action is not None:
            raise MultiAgentError(
                f"agent {agent!r} is done (terminated or truncated); step it with None to "
                f"remove it, got {type(action).__name__}"
            )
        if agent in self.agents:
            self.agents.remove(agent)
        self._cumulative_rewards[agent] = 0.0
        pending = [a for a in self.agents if self.done(a)]
        if pending:
            self.agent_selection = pending[0]
        elif self.agents:
            self.agent_selection = self.agents[0]
        return True

    # --- seeding --------------------------------------------------------------------------
    @property
    def rng(self) -> random.Random:
        """The env's `random.Random` (seeded by ``reset(seed=...)``)."""
        if self._rng is None:
            self._rng = seeding.py_random(None)
        return self._rng

    @property
    def np_random(self) -> Any:
        """The env's numpy generator (seeded by ``reset(seed=...)``, built on first use)."""
        if getattr(self, "_np_random", None) is None:
            self._np_random, self._np_random_seed = seeding.np_random(
                getattr(self, "_np_random_seed", None)
            )
        return self._np_random

    def __str__(self) -> str:
        return f"<{type(self).__name__} agents={self.possible_agents}>"

    __repr__ = __str__
