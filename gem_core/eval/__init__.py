"""Evaluation toolkit: `evaluate` served models on envs, record episodes, summarize and report runs.

The Python face of ``gem eval`` and ``gem report``. Names load lazily, so importing this
package stays cheap (transformers and matplotlib load only when a run or a plot needs
them).
"""

from __future__ import annotations

from gem_core import _lazy

__all__, __getattr__, __dir__ = _lazy.lazy_package(
    __name__,
    {
        "evaluate": "gem_core.eval.runner",
        "EvalConfig": "gem_core.eval.config",
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
    },
)
