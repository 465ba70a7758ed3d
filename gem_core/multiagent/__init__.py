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

from gem_core import _lazy

# Public name -> the module that defines it; each loads on first access.
__all__, __getattr__, __dir__ = _lazy.lazy_package(
    __name__,
    {
        "MultiAgentEnv": "gem_core.multiagent.api",
        "AgentPolicy": "gem_core.multiagent.api",
        "MultiAgentError": "gem_core.multiagent.api",
        "as_policy": "gem_core.multiagent.api",
        "derive_agent_seed": "gem_core.multiagent.api",
        "SingleAgentView": "gem_core.multiagent.single_agent",
        "as_single_agent": "gem_core.multiagent.single_agent",
        "MAX_OTHER_STEPS": "gem_core.multiagent.single_agent",
        "STOP_TOKEN": "gem_core.multiagent.users",
        "UserScript": "gem_core.multiagent.users",
        "ScriptedUser": "gem_core.multiagent.users",
        "LLMUser": "gem_core.multiagent.users",
        "UserSimulatorError": "gem_core.multiagent.users",
        "make_user": "gem_core.multiagent.users",
        "llm_user_system_prompt": "gem_core.multiagent.users",
    },
)
