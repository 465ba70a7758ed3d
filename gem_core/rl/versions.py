"""Trainer version and hook checks for the adapters: one wording, one place.

An adapter hooks a trainer at a few points; when the trainer changes one of them, the user
should get one sentence naming it and the tested version, at import, not a ``TypeError``
deep in a training step. `check_version` compares an installed version with the tested
range; `check_hook` compares a hooked function's parameters with the tested ones (for
trainers used from a source tree, which have no version to compare).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["check_version", "check_hook", "installed_version"]


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or ``None``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def check_version(
    adapter: str,
    package: str,
    found: str | None,
    *,
    minimum: str,
    below: str | None = None,
    why: str,
    install: str,
) -> str:
    """Raise ImportError unless ``minimum <= found < below``; returns ``found``.

    Args:
        adapter: the adapter's name (``"gem-roll"``).
        package: the trainer's name as users know it.
        found: its installed version (``None``: not installed).
        minimum, below: the tested range (``below=None``: no upper bound).
        why: what the adapter relies on (``"its AgenticPipeline hooks"``).
        install: the command that installs a tested version.
    """
    from packaging.version import Version

    wanted = f">={minimum}" + (f",<{below}" if below else "")
    if found is None:
        raise ImportError(f"{adapter} needs {package}{wanted}, which is not installed: {install}")
    v = Version(found)
    if v < Version(minimum) or (below is not None and v >= Version(below)):
        raise ImportError(f"{adapter} needs {package}{wanted} ({why}), found {package} {found}; {install}")
    return found


def check_hook(
    adapter: str,
    trainer: str,
    name: str,
    fn: Callable[..., Any] | None,
    params: Sequence[str],
    *,
    tested: str,
) -> None:
    """Raise ImportError unless ``fn`` exists and its leading parameters are ``params``.

    Args:
        adapter: the adapter's name.
        trainer: the trainer's name.
        name: the hooked function's dotted name, for the message.
        fn: the function (``None``: it is gone).
        params: the names of its first parameters as tested (``self`` included for methods).
        tested: the trainer version or commit the adapter is tested with.
    """
    if fn is None:
        raise ImportError(f"{trainer} changed {name}: it is gone ({adapter} hooks it; tested with {tested})")
    try:
        got = list(inspect.signature(fn).parameters)[: len(params)]
    except (TypeError, ValueError):  # pragma: no cover - builtins have no signature
        return
    if got != list(params):
        raise ImportError(
            f"{trainer} changed {name}: its parameters start ({', '.join(got)}), {adapter} expects "
            f"({', '.join(params)}) (tested with {tested}); use the tested {trainer} or an updated {adapter}"
        )
