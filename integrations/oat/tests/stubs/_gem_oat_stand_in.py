"""Shared helper of the import-only stand-ins (see integrations/oat/STUBS.md)."""

from __future__ import annotations

from typing import Any


def unavailable(qualname: str, why: str) -> type:
    """A class whose construction raises: the stand-in for an uninstallable package's class."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"{qualname} is an import-only stand-in in gem-oat's tests ({why}); it cannot "
            "run here. Install the real package on a GPU machine (see integrations/oat/README.md)."
        )

    module, _, name = qualname.rpartition(".")
    return type(name, (), {"__init__": __init__, "__module__": module})


def unavailable_function(qualname: str, why: str) -> Any:
    """A function that raises when called."""

    def fn(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"{qualname} is an import-only stand-in in gem-oat's tests ({why}); it cannot run here"
        )

    fn.__name__ = fn.__qualname__ = qualname.rpartition(".")[2]
    return fn
