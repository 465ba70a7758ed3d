"""The verl versions gem-verl is tested with, and the runtime check."""

from __future__ import annotations

__all__ = ["VERL_MIN", "VERL_BELOW", "check_verl_version"]

#: Tested range: ``VERL_MIN <= verl < VERL_BELOW`` (the pyproject's ``verl>=0.9.1,<0.10``).
VERL_MIN = "0.9.1"
VERL_BELOW = "0.10"


def check_verl_version(version: str | None = None) -> str:
    """Raise ImportError unless verl (or ``version``) lies in the tested range.

    Returns:
        The checked version.
    """
    from packaging.version import Version

    if version is None:
        import verl

        version = verl.__version__
    v = Version(version)
    if not (Version(VERL_MIN) <= v < Version(VERL_BELOW)):
        raise ImportError(
            f"gem-verl needs verl>={VERL_MIN},<{VERL_BELOW} (its agent-loop and estimator "
            f"interfaces), found verl {version}; install a matching verl: "
            f'pip install "verl>={VERL_MIN},<{VERL_BELOW}"'
        )
    return version
