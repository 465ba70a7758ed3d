"""`Closing`: the context-manager protocol of every gem_core object that owns resources and a
``close()`` (sandboxes, shells, vector envs, pools, tools, graders, search indexes)."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["Closing"]

_T = TypeVar("_T", bound="Closing")


class Closing:
    """A mixin: ``with obj:`` gives ``obj`` and calls ``obj.close()`` on the way out, on an
    exception too (which then propagates)."""

    __slots__ = ()

    def close(self) -> Any:  # pragma: no cover - every subclass defines its own
        raise NotImplementedError

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
