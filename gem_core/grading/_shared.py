"""The process-wide grader of a grading module (`get_grader`, `get_scorer`) and the environment
variables that size it."""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from gem_core.errors import InvalidArgument

__all__ = ["ProcessShared", "env_number", "sized_by_environment"]


class _Closable(Protocol):
    closed: bool
    _pid: int

    def close(self) -> None: ...


T = TypeVar("T", bound=_Closable)


def env_number(name: str, default: float, cast: type) -> Any:
    """``cast($name)``, or ``default`` when the variable is unset or blank.

    Raises:
        InvalidArgument: the value does not parse as ``cast`` (the message names the variable).
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return cast(raw)
    except ValueError:
        raise InvalidArgument(
            f"${name} must be a {cast.__name__}, got {raw!r}; unset it for the default {default}"
        ) from None


def sized_by_environment(
    cls: Callable[..., T], prefix: str, *, workers: int, timeout: float, memory_mb: int
) -> Callable[[], T]:
    """A factory ``cls(workers, timeout, memory_mb=...)`` sized by ``$<prefix>_WORKERS``,
    ``$<prefix>_TIMEOUT`` and ``$<prefix>_MEMORY_MB`` (each the given default when unset), read
    when it is called."""

    def make() -> T:
        return cls(
            env_number(f"{prefix}_WORKERS", workers, int),
            env_number(f"{prefix}_TIMEOUT", timeout, float),
            memory_mb=env_number(f"{prefix}_MEMORY_MB", memory_mb, int),
        )

    return make


class ProcessShared(Generic[T]):
    """One instance per process, made by ``make`` on the first `get`.

    A closed instance, or one inherited across a fork (its ``_pid`` is the parent's), is
    replaced on the next `get`; a forked child starts with none (the parent's is left to the
    parent); the live one is closed at interpreter exit.

    Attributes:
        value: the current instance (``None`` before the first `get` and in a fresh child).
    """

    def __init__(self, make: Callable[[], T]):
        self._make = make
        self.value: T | None = None
        self._lock = threading.Lock()
        self._atexit_registered = False
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork_in_child)

    def get(self) -> T:
        """The live instance, made now if there is none."""
        with self._lock:
            value = self.value
            if value is None or value.closed or value._pid != os.getpid():
                value = self.value = self._make()
                if not self._atexit_registered:
                    atexit.register(self._close)
                    self._atexit_registered = True
            return value

    def _close(self) -> None:
        value = self.value
        if value is not None:
            value.close()

    def _after_fork_in_child(self) -> None:
        self.value = None
        self._lock = threading.Lock()
