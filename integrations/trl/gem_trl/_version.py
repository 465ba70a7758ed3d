"""The TRL versions gem-trl is tested with, and the runtime check."""

from __future__ import annotations

__all__ = ["TRL_MIN", "TRL_BELOW", "check_trl_version"]

#: Tested range: ``TRL_MIN <= trl < TRL_BELOW`` (the pyproject's ``trl>=1.16,<2``).
TRL_MIN = "1.16"
TRL_BELOW = "2"


def check_trl_version(version: str | None = None) -> str:
    """Raise ImportError unless TRL (or ``version``) lies in the tested range.

    Returns:
        The checked version.
    """
    from packaging.version import Version

    if version is None:
        import trl

        version = trl.__version__
    v = Version(version)
    if not (Version(TRL_MIN) <= v < Version(TRL_BELOW)):
        raise ImportError(
            f"gem-trl needs trl>={TRL_MIN},<{TRL_BELOW} (its rollout_func contract and "
            f"GRPOTrainer internals), found trl {version}; install a matching TRL: "
            f'pip install "trl>={TRL_MIN},<{TRL_BELOW}"'
        )
    return version
