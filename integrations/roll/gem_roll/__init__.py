"""gem-roll: ROLL's agentic pipeline on gem_core envs, with exact ReBN.

- `gem_roll.envs.register_envs`: gem_core ids in gem-llm's registry (what ROLL's env
  managers ``gem.make``);
- `gem_roll.env_manager`: ``GemStepEnvManager`` / ``GemTrajEnvManager`` (``custom_envs.<tag>.
  env_manager_cls``), which end an episode on ``truncated`` and play the conversation token
  exactly as `gem_core.rl` does;
- `gem_roll.pipeline.GemAgenticPipeline` (``pipeline_cls``): ROLL's step_reinforce with the
  population std, i.e. ReBN exactly;
- `gem_roll.config`: the YAML of a run (`recipes/roll_rebn.py`).

Importing ``gem_roll`` imports neither ROLL nor torch; `gem_roll.env_manager` and
`gem_roll.pipeline` need ROLL's source on ``PYTHONPATH``.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
