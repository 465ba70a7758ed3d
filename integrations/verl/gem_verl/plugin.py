"""verl plugin entry point: registers the ``gem_agent`` agent loop and the ``rebn`` estimator.

verl (>= 0.9) loads every ``verl.plugins`` entry point at the end of ``import verl``
(unless ``VERL_USE_EXTERNAL_PLUGINS=none``), in the driver and in every Ray worker, so
installing gem-verl is enough: no import in user code, no config path. This module is
that entry point (see ``pyproject.toml``). verl swallows plugin errors at debug level,
so a failure here is logged as a warning with the fix.
"""

from __future__ import annotations

import logging

from gem_verl import REBN

__all__ = ["REBN", "register_all"]

logger = logging.getLogger(__name__)


def register_all() -> None:
    """Register the agent loop and the estimator with verl (idempotent)."""
    from verl.trainer.ppo import core_algos

    from gem_verl._version import check_verl_version
    from gem_verl.advantage import compute_rebn_advantage

    check_verl_version()
    import gem_verl.agent_loop  # noqa: F401  (its @register(AGENT_NAME) runs on import)

    registered = core_algos.ADV_ESTIMATOR_REGISTRY.get(REBN)
    if registered is None:
        core_algos.register_adv_est(REBN)(compute_rebn_advantage)
    elif registered is not compute_rebn_advantage:
        name = f"{registered.__module__}.{registered.__qualname__}"
        if name != "gem_verl.advantage.compute_rebn_advantage":
            raise RuntimeError(
                f"verl already has an advantage estimator named {REBN!r} ({name}); gem-verl's "
                "ReBN cannot be registered under it: uninstall the other plugin or "
                "set VERL_USE_EXTERNAL_PLUGINS to the one you want"
            )
        core_algos.ADV_ESTIMATOR_REGISTRY[REBN] = compute_rebn_advantage


try:
    register_all()
except Exception as exc:  # verl would hide this at debug level
    logger.warning(
        "gem-verl could not register the gem_agent loop / rebn estimator: %s: %s "
        "(check `pip show verl gem-core gem-verl` versions)",
        type(exc).__name__,
        exc,
    )
    raise
