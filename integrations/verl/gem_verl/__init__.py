"""gem-verl: GEM environments and ReBN inside verl (agent loop + advantage estimator).

Installing this package registers, through verl's ``verl.plugins`` entry point, the
``gem_agent`` agent loop (`gem_verl.agent_loop.GemAgentLoop`) and the ``rebn``
advantage estimator (`gem_verl.advantage.compute_rebn_advantage`) on every
``import verl``. Importing ``gem_verl`` itself imports neither verl nor torch.
"""

from __future__ import annotations

from gem_verl._version import VERL_BELOW, VERL_MIN, check_verl_version

__all__ = ["__version__", "AGENT_NAME", "REBN", "VERL_MIN", "VERL_BELOW", "check_verl_version"]

__version__ = "0.1.0"

#: The agent loop's registered name.
AGENT_NAME = "gem_agent"
#: The advantage estimator's registered name.
REBN = "rebn"
