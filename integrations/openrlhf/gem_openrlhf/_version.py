"""The OpenRLHF versions gem-openrlhf is tested with, and the runtime check."""

from __future__ import annotations

__all__ = ["OPENRLHF_MIN", "OPENRLHF_BELOW", "check_openrlhf_version"]

#: Tested range: ``OPENRLHF_MIN <= openrlhf < OPENRLHF_BELOW`` (the pyproject's ``openrlhf>=0.11.2,<0.12``).
OPENRLHF_MIN = "0.11.2"
OPENRLHF_BELOW = "0.12"

_FIX = (
    f'pip install --no-deps "openrlhf>={OPENRLHF_MIN},<{OPENRLHF_BELOW}" (on a CUDA machine '
    f'`pip install "openrlhf[vllm]>={OPENRLHF_MIN},<{OPENRLHF_BELOW}"` also installs its dependencies)'
)


def check_openrlhf_version(version: str | None = None) -> str:
    """Raise ImportError unless OpenRLHF (or ``version``) lies in the tested range.

    The installed version is read from the distribution's metadata, so the check
    imports neither OpenRLHF nor torch.

    Args:
        version: a version string to check instead of the installed one.

    Returns:
        The checked version.

    Raises:
        ImportError: OpenRLHF is not installed, or its version is outside the range.
    """
    from importlib import metadata

    from packaging.version import Version

    if version is None:
        try:
            version = metadata.version("openrlhf")
        except metadata.PackageNotFoundError:
            raise ImportError(
                f"gem-openrlhf needs OpenRLHF>={OPENRLHF_MIN},<{OPENRLHF_BELOW}, which is not "
                f"installed; {_FIX}"
            ) from None
    if not (Version(OPENRLHF_MIN) <= Version(version) < Version(OPENRLHF_BELOW)):
        raise ImportError(
            f"gem-openrlhf needs OpenRLHF>={OPENRLHF_MIN},<{OPENRLHF_BELOW} (its agent-executor, "
            f"experience-maker and trainer interfaces), found openrlhf {version}; {_FIX}"
        )
    return version
