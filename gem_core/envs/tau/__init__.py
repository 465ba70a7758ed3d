"""TAU-bench-style customer-service envs (``tau:*``): an assistant and a simulated user over a shop database.

- ``data.py``: the retail database (schema and rows written for gem_core);
- ``domain.py``: the assistant's tools (look-ups, cancel, modify, return, exchange, transfer);
- ``policy.py``: the written policy the assistant must follow;
- ``tasks.py``: 37 authored tasks (goal, user script, expected writes and outputs, near miss);
- ``env.py``: `RetailEnv` (a `gem_core.multiagent.MultiAgentEnv`) and `make_retail_env`,
  the assistant's single-agent view that ``tau:Retail-v0`` registers.

Names load lazily.
"""

from __future__ import annotations

from gem_core import _lazy

__all__, __getattr__, __dir__ = _lazy.lazy_package(
    __name__,
    {
        "RetailEnv": "gem_core.envs.tau.env",
        "make_retail_env": "gem_core.envs.tau.env",
        "TASKS": "gem_core.envs.tau.tasks",
        "TASK_NAMES": "gem_core.envs.tau.tasks",
        "RetailTask": "gem_core.envs.tau.tasks",
        "reference_script": "gem_core.envs.tau.tasks",
        "POLICY": "gem_core.envs.tau.policy",
    },
)
