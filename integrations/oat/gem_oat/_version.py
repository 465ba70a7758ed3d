"""The oat version gem-oat is tested with, and the runtime check."""

from __future__ import annotations

__all__ = ["OAT_TESTED", "check_oat_version"]

#: The oat-llm release gem-oat is tested with (the pyproject's ``oat-llm==0.2.4``).
OAT_TESTED = "0.2.4"


def check_oat_version(version: str | None = None) -> str:
    """Raise ImportError unless oat-llm (or ``version``) is the tested release.

    Returns:
        The checked version.
    """
    if version is None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as dist_version

        try:
            version = dist_version("oat-llm")
        except PackageNotFoundError:
            raise ImportError(
                f"gem-oat needs oat-llm=={OAT_TESTED}, which is not installed; on Python 3.10: "
                f'pip install "oat-llm=={OAT_TESTED}" (see integrations/oat/README.md for 3.11)'
            ) from None
    if version != OAT_TESTED:
        raise ImportError(
            f"gem-oat needs oat-llm=={OAT_TESTED} (its PPOMultiTurnActor/Learner interfaces), "
            f'found oat-llm {version}; install the tested release: pip install "oat-llm=={OAT_TESTED}"'
        )
    return version
