"""Turn-based multi-agent envs (PettingZoo's agent-iteration API), a single-agent view, user simulators.

- `MultiAgentEnv`: the contract (``agents``, ``agent_selection``, per-agent observations,
  rewards, terminations/truncations, infos; ``last()``, ``agent_iter()``);
- `as_single_agent` / `SingleAgentView`: one agent as a `gem_core.Env`, the others played
  by given policies, so trainers, `check_env`, vector envs and ``gem eval`` use it as is;
- `ScriptedUser`, `LLMUser`, `make_user`: user simulators for customer-service envs
  (``tau:Retail-v0``).

Importing this package imports no HTTP client; `LLMUser` loads it when built.
"""

from __future__ import annotations

from gem_core.multiagent.api import (
    AgentPolicy,
    MultiAgentEnv,
    MultiAgentError,
    as_policy,
    derive_agent_seed,
)
from gem_core.multiagent.single_agent import MAX_OTHER_STEPS, SingleAgentView, as_single_agent
from gem_core.multiagent.users import (
    STOP_TOKEN,
    LLMUser,
    ScriptedUser,
    UserScript,
    UserSimulatorError,
    llm_user_system_prompt,
    make_user,
)

__all__ = [
    "MultiAgentEnv",
    "AgentPolicy",
    "MultiAgentError",
    "as_policy",
    "derive_agent_seed",
    "SingleAgentView",
    "as_single_agent",
    "MAX_OTHER_STEPS",
    "STOP_TOKEN",
    "UserScript",
    "ScriptedUser",
    "LLMUser",
    "UserSimulatorError",
    "make_user",
    "llm_user_system_prompt",
]
