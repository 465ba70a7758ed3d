"""Evaluation toolkit: `evaluate` served models on envs, record episodes, summarize and report runs.

The Python face of ``gem eval`` and ``gem report``. Names load lazily, so importing this
package stays cheap (transformers and matplotlib load only when a run or a plot needs
them).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "evaluate",
    "EvalResult",
    "EndpointUnreachable",
    "check_endpoint",
    "build_env",
    "episode_record",
    "load_run",
    "read_records",
    "summarize",
    "wilson_interval",
    "summary_table",
    "summary_markdown",
    "report",
]

_LAZY = {
    "evaluate": "gem_core.eval.runner",
    "EvalResult": "gem_core.eval.runner",
    "EndpointUnreachable": "gem_core.eval.runner",
    "check_endpoint": "gem_core.eval.runner",
    "build_env": "gem_core.eval.runner",
    "episode_record": "gem_core.eval.records",
    "load_run": "gem_core.eval.records",
    "read_records": "gem_core.eval.records",
    "summarize": "gem_core.eval.stats",
    "wilson_interval": "gem_core.eval.stats",
    "summary_table": "gem_core.eval.stats",
    "summary_markdown": "gem_core.eval.stats",
    "report": "gem_core.eval.report",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gem_core.eval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
