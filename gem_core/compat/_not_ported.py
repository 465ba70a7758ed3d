"""`NotPorted`: a reference-GEM name that the compat layer keeps importable but does not run.

Every module path of the reference (``gem.X.Y``) imports through `gem_core.compat`, and
every public name it defines is there. A name without a port is a placeholder:

- a class or function becomes a placeholder class: ``from gem.envs.webshop.webshop import
  WebshopEnv`` works (a module that imports it but uses it only on one code path loads),
  and calling it, instantiating it or a subclass, or reading one of its attributes raises
  `NotPorted`;
- a constant (``BASE_DIR``, ``app`` ...) raises `NotPorted` when it is read, from the
  module's ``__getattr__``.

The message names the reference path, why there is no port, and the gem_core equivalent
to use instead (or says there is none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gem_core.errors import UsageError

__all__ = ["NotPorted", "placeholders", "missing_values", "is_placeholder"]


class NotPorted(UsageError, NotImplementedError):
    """A reference-GEM name the compat layer does not port; the message names what to use instead.

    Attributes:
        reference: the reference's dotted name (``gem.envs.webshop.webshop.WebshopEnv``).
        instead: the gem_core equivalent (a dotted path, or a short recipe), or None when
            gem_core has none.
    """

    def __init__(self, reference: str, instead: str | None, why: str):
        self.reference = reference
        self.instead = instead
        self.why = why
        use = f"use {instead} instead" if instead else "gem_core has no equivalent"
        super().__init__(f"{reference} is not ported to gem_core.compat ({why}); {use}")


def _reference_name(module: str, name: str) -> str:
    prefix = "gem_core.compat"
    return "gem" + module[len(prefix):] + "." + name if module.startswith(prefix) else f"{module}.{name}"


class _PlaceholderMeta(type):
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise cls._gem_not_ported()

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise cls._gem_not_ported()

    def __repr__(cls) -> str:
        return f"<not ported: {cls._gem_reference}>"


class _Placeholder(metaclass=_PlaceholderMeta):
    _gem_reference = ""
    _gem_instead: str | None = None
    _gem_why = ""

    @classmethod
    def _gem_not_ported(cls) -> NotPorted:
        return NotPorted(cls._gem_reference, cls._gem_instead, cls._gem_why)


def is_placeholder(obj: Any) -> bool:
    """Whether ``obj`` is a not-ported placeholder (or a subclass of one)."""
    return isinstance(obj, type) and issubclass(obj, _Placeholder)


def placeholders(module: str, names: tuple[str, ...], *, instead: str | None, why: str) -> tuple[Any, ...]:
    """One placeholder class per reference class or function of ``module`` (see the module docs).

    Args:
        module: the compat module's ``__name__``.
        names: the reference names, in the order they are unpacked.
        instead: the gem_core equivalent to name, or None.
        why: why there is no port (a clause).
    """
    made = []
    for name in names:
        made.append(
            _PlaceholderMeta(
                name,
                (_Placeholder,),
                {
                    "__module__": module,
                    "__doc__": f"Not ported: {why}. " + (f"Use {instead}." if instead else ""),
                    "_gem_reference": _reference_name(module, name),
                    "_gem_instead": instead,
                    "_gem_why": why,
                },
            )
        )
    return tuple(made)


def missing_values(
    module: str, names: tuple[str, ...], *, instead: str | None, why: str, fallback: Callable[[str], Any] | None = None
) -> Callable[[str], Any]:
    """A module ``__getattr__`` raising `NotPorted` for the reference constants ``names``.

    Args:
        module: the compat module's ``__name__``.
        names: the reference constants without a port.
        instead: the gem_core equivalent to name, or None.
        why: why there is no port.
        fallback: the module's previous ``__getattr__`` for other names (lazy packages).
    """
    wanted = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name in wanted:
            raise NotPorted(_reference_name(module, name), instead, why)
        if fallback is not None:
            return fallback(name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    __getattr__.names = wanted  # type: ignore[attr-defined]
    return __getattr__
