"""Reference-GEM tools (``gem.tools``) on gem_core's tools; modules load lazily."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["BaseTool", "PythonCodeTool", "SearchTool", "ToolEnvWrapper"]

_LAZY = {
    "BaseTool": "gem_core.compat.tools.base_tool",
    "PythonCodeTool": "gem_core.compat.tools.python_code_tool",
    "SearchTool": "gem_core.compat.tools.search_tool",
    "ToolEnvWrapper": "gem_core.compat.tools.tool_env_wrapper",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gem_core.compat.tools' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
