"""Reference-GEM ``gem.multiagent`` (gem-llm 0.1.0): `MultiAgentEnv` and `AgentSelector`.

See `gem_core.compat.multiagent.multi_agent_env`; the reference head's path
``gem.envs.multiagent`` is `gem_core.compat.envs.multiagent` (the same objects).
"""

from __future__ import annotations

from gem_core.compat.multiagent.multi_agent_env import SELECTOR_MODES, AgentSelector, MultiAgentEnv

__all__ = ["MultiAgentEnv", "AgentSelector", "SELECTOR_MODES"]
