"""Reference ``gem.envs.mcpmark``: not ported (MCPMark tasks need their own services and a model API key).

Every public name imports; using one raises `NotPorted`, naming gem_core.envs.mcp_tasks.MCPTaskEnv (gem_core.make('mcp:...')).
"""

from __future__ import annotations

from gem_core.compat._not_ported import placeholders

_WHY = 'MCPMark tasks need their own services and a model API key'
_INSTEAD = "gem_core.envs.mcp_tasks.MCPTaskEnv (gem_core.make('mcp:...'))"

__all__ = ['MCPMarkEnv']

(MCPMarkEnv,) = placeholders(
    __name__, ('MCPMarkEnv',), instead=_INSTEAD, why=_WHY
)
