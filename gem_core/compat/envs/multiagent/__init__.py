"""Reference-GEM ``gem.envs.multiagent`` (the reference head's path of ``gem.multiagent``).

The same objects as `gem_core.compat.multiagent`. The reference head exports only
``MultiAgentEnv`` here; `AgentSelector` is exported too, so ``from gem.envs.multiagent
import AgentSelector, MultiAgentEnv`` works on both layouts.
"""

from __future__ import annotations

from gem_core.compat.multiagent.multi_agent_env import SELECTOR_MODES, AgentSelector, MultiAgentEnv

__all__ = ["MultiAgentEnv", "AgentSelector", "SELECTOR_MODES"]
