"""Reference-GEM ``gem.envs.multiagent.multi_agent_env``, re-exported from `gem_core.compat.multiagent`.

The reference head's path of gem-llm 0.1.0's ``gem.multiagent.multi_agent_env``; the
objects are the same (``is``-identical).
"""

from __future__ import annotations

from gem_core.compat.multiagent.multi_agent_env import SELECTOR_MODES, AgentSelector, MultiAgentEnv

__all__ = ["MultiAgentEnv", "AgentSelector", "SELECTOR_MODES"]
