"""gem-verl: GEM environments and ReBN inside verl (agent loop + advantage estimator).

Installing this package registers, through verl's ``verl.plugins`` entry point, the
``gem_agent`` agent loop (`gem_verl.agent_loop.GemAgentLoop`) and the ``rebn``
advantage estimator (`gem_verl.advantage.compute_rebn_advantage`) on every
``import verl``. Importing ``gem_verl`` itself imports neither verl nor torch.
"""

from __future__ import annotations

from gem_verl._version import VERL_BELOW, VERL_MIN, check_verl_version

__all__ = [
    "__version__",
    "AGENT_LOOP_TARGET",
    "AGENT_NAME",
    "REBN",
    "REWARD_STYLE",
    "VERL_MIN",
    "VERL_BELOW",
    "check_verl_version",
]

__version__ = "0.1.0"

# The names gem-verl registers with verl and the values its dataset rows and agent loop
# config carry; `gem_verl.agent_loop`, `gem_verl.plugin` and recipes/verl_rebn.py use these.

#: The agent loop's registered name: rows' ``agent_name`` column,
#: ``actor_rollout_ref.rollout.agent.default_agent_loop`` and the agent loop YAML's ``name``.
AGENT_NAME = "gem_agent"
#: The agent loop class, as the agent loop YAML's ``_target_`` names it.
AGENT_LOOP_TARGET = "gem_verl.agent_loop.GemAgentLoop"
#: The advantage estimator's registered name (``algorithm.adv_estimator``).
REBN = "rebn"
#: The ``reward_model.style`` of gem rows: the rewards come from the env, through the
#: agent loop's per-token ``rm_scores``, not from a reward model.
REWARD_STYLE = "gem_env"
