"""`as_single_agent`: one agent of a multi-agent env as a `gem_core.Env`, the others played by policies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gem_core.core import Env
from gem_core.errors import InvalidArgument, ResetNeeded
from gem_core.multiagent.api import (
    AgentPolicy,
    MultiAgentEnv,
    MultiAgentError,
    as_policy,
    derive_agent_seed,
)

__all__ = ["SingleAgentView", "as_single_agent", "MAX_OTHER_STEPS"]

MAX_OTHER_STEPS = 10_000
"""Moves of the other agents between two moves of the viewed agent before the view gives up
(a multi-agent env whose own turn budget does not bound them has a bug)."""


class SingleAgentView(Env[Any, Any]):
    """One agent of a `MultiAgentEnv` as a single-agent `gem_core.Env`.

    The other agents are played by the given policies: after `reset`, and after each
    `step` of the viewed agent, the view steps the multi-agent env with the other
    agents' moves (``policy.act(env.observe(agent), env.infos[agent])``; a done agent
    gets its dead step, ``None``) until it is the viewed agent's turn again or its
    episode ended. So every trainer adapter, `gem_core.check_env`, the vector envs and
    ``gem eval`` see an ordinary env.

    Observation: ``env.observe(agent)`` when it is the viewed agent's turn (or its
    episode ended). Action: the viewed agent's move, passed to the env unchanged (the
    env handles bad actions). Reward: what the agent earned since its previous move
    (PettingZoo's cumulative reward: rewards given on the other agents' moves count
    too; those given before its first move count on its first step).
    ``terminated``/``truncated``/``info``: the agent's entries of the env's dicts.

    Seeding: ``reset(seed=s)`` resets the env with ``s`` and each policy that has a
    ``reset`` method with ``derive_agent_seed(s, name)``; with ``seed=None`` they go on
    from their state. An episode that ends before the viewed agent's first move (another
    agent ended it) gives the final result on the first `step`, whatever the action.
    A policy that raises (a user simulator's endpoint is down) raises out of `step`
    and `reset`: the episode measured nothing and is reported as an error, never as a
    failure of the agent.

    Args:
        env: the multi-agent env (the view owns it: `close` closes it).
        agent: the viewed agent (one of ``env.possible_agents``).
        others: a policy per other agent: an object with ``act(observation, info)``
            (optional ``reset(seed=...)`` and ``close()``) or a callable
            ``(observation, info) -> action``.
        close_others: `close` also closes the policies that have a ``close`` method.
    """

    def __init__(
        self,
        env: MultiAgentEnv,
        agent: str = "assistant",
        others: Mapping[str, Any] | None = None,
        *,
        close_others: bool = True,
    ):
        if not isinstance(env, MultiAgentEnv):
            raise InvalidArgument(
                f"as_single_agent expects a gem_core.multiagent.MultiAgentEnv, got {type(env).__name__}"
            )
        possible = list(env.possible_agents)
        if agent not in possible:
            raise InvalidArgument(
                f"agent {agent!r} is not an agent of {env}; expected one of {possible}"
            )
        others = dict(others or {})
        unknown = sorted(set(others) - set(possible))
        if unknown:
            raise InvalidArgument(
                f"others names agents {unknown} that {env} does not have; its agents are {possible}"
            )
        if agent in others:
            raise InvalidArgument(
                f"others has a policy for {agent!r}, the agent this view trains; drop it"
            )
        missing = [a for a in possible if a != agent and a not in others]
        if missing:
            raise InvalidArgument(
                f"no policy for agent(s) {missing}; pass others={{{missing[0]!r}: policy, ...}} "
                "(an object with act(observation, info), or a callable)"
            )
        self.env = env
        self.agent = agent
        self.others: dict[str, AgentPolicy] = {
            name: as_policy(policy, agent=name) for name, policy in others.items()
        }
        self.close_others = close_others
        self.metadata = dict(getattr(env, "metadata", {}) or {})
        self._live = False
        self._ended_early = False
        self._carry = 0.0
        self._closed = False

    # --- the Env API ----------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.env.reset(seed=seed, options=options)
        for name, policy in self.others.items():
            reset = getattr(policy, "reset", None)
            if callable(reset):
                reset(seed=derive_agent_seed(seed, name))
        self._live = False
        self._advance()
        self._live = True
        self._ended_early = self.env.done(self.agent)
        # Rewards given before the agent's first move count on its first step.
        self._carry = float(self.env._cumulative_rewards.get(self.agent, 0.0))
        self.env._cumulative_rewards[self.agent] = 0.0
        return self.env.observe(self.agent), dict(self.env.infos.get(self.agent, {}))

    def step(self, action: Any):
        if not self._live:
            raise ResetNeeded(
                f"{self}.step() called before reset or after the episode ended; call env.reset() first"
            )
        if self._ended_early:
            self._ended_early = False
        else:
            if self.env.agent_selection != self.agent:
                raise MultiAgentError(
                    f"{self.env} selected {self.env.agent_selection!r}, not the viewed agent "
                    f"{self.agent!r}, after the others moved; its agent order is inconsistent"
                )
            self.env.step(action)
            self._advance()
        agent = self.agent
        terminated = bool(self.env.terminations.get(agent, False))
        truncated = bool(self.env.truncations.get(agent, False))
        reward = self._carry + float(self.env._cumulative_rewards.get(agent, 0.0))
        self._carry = 0.0
        self.env._cumulative_rewards[agent] = 0.0
        if terminated or truncated:
            self._live = False
        return self.env.observe(agent), reward, terminated, truncated, dict(self.env.infos.get(agent, {}))

    def close(self) -> None:
        """Close the env and (with ``close_others``) the policies. Safe to call twice."""
        self._live = False
        if self._closed:
            return
        self._closed = True
        try:
            self.env.close()
        finally:
            for policy in self.others.values() if self.close_others else ():
                close = getattr(policy, "close", None)
                if callable(close):
                    close()

    def sample_random_action(self) -> Any:
        sampler = getattr(self.env, "sample_random_action", None)
        if not callable(sampler):
            raise NotImplementedError(f"{type(self.env).__name__} has no sample_random_action")
        return sampler(self.agent)

    def state_summary(self) -> str | None:
        summary = getattr(self.env, "state_summary", None)
        return summary(self.agent) if callable(summary) else None

    # --- internals ----------------------------------------------------------------------
    def _advance(self) -> None:
        """Play the other agents until it is the viewed agent's turn or its episode ended."""
        env = self.env
        for _ in range(MAX_OTHER_STEPS):
            if not env.agents or env.done(self.agent):
                return
            current = env.agent_selection
            if current == self.agent:
                return
            if env.done(current):
                env.step(None)
                continue
            policy = self.others.get(current)
            if policy is None:
                raise MultiAgentError(
                    f"{env} selected agent {current!r}, which has no policy in this view"
                )
            env.step(policy.act(env.observe(current), env.infos.get(current, {})))
        raise MultiAgentError(
            f"the other agents of {env} moved {MAX_OTHER_STEPS} times without giving "
            f"{self.agent!r} a turn; the env's turn budget does not bound them"
        )

    def __str__(self) -> str:
        return f"<SingleAgentView {self.agent!r} of {self.env}>"

    __repr__ = __str__


def as_single_agent(
    env: MultiAgentEnv,
    agent: str = "assistant",
    others: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> SingleAgentView:
    """View agent ``agent`` of ``env`` as a single-agent env; ``others`` play the rest.

    >>> from gem_core.envs.tau import RetailEnv
    >>> from gem_core.multiagent import ScriptedUser
    >>> view = as_single_agent(RetailEnv(), "assistant", {"user": ScriptedUser()})

    See `SingleAgentView` for the semantics and arguments.
    """
    return SingleAgentView(env, agent, others, **kwargs)
