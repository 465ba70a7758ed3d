"""Reference-GEM tools (``gem.tools``) on gem_core's tools; modules load lazily."""

from __future__ import annotations

from gem_core import _lazy

__all__, __getattr__, __dir__ = _lazy.lazy_package(
    __name__,
    {
        "BaseTool": "gem_core.compat.tools.base_tool",
        "PythonCodeTool": "gem_core.compat.tools.python_code_tool",
        "SearchTool": "gem_core.compat.tools.search_tool",
        "ToolEnvWrapper": "gem_core.compat.tools.tool_env_wrapper",
    },
)
