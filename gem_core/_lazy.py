"""Lazy package attributes (PEP 562): the ``__getattr__`` and ``__dir__`` every package uses
to load a name from its submodule on first access, so importing the package stays cheap.

A package whose public names all load lazily states each name once, in its `lazy_package`
table; one that also exports eagerly imported names lists them all in a literal ``__all__`` and
its lazy ones in `lazy_attributes`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes", "lazy_package"]


def lazy_attributes(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for attributes that load lazily.

    Use at the end of a package's ``__init__.py``::

        __getattr__, __dir__ = lazy_attributes(__name__, {"make_vec": "gem_core.vector"})

    Args:
        package: the package's ``__name__`` (it must be importing: the functions read and
            write its namespace).
        names: attribute name -> the module that defines it. A value equal to
            ``f"{package}.{name}"`` names the submodule itself, which is the attribute.

    Returns:
        ``(__getattr__, __dir__)``: ``__getattr__`` imports the module on first access and
        stores the value in the package's namespace (later accesses do not call it); an
        unknown name raises ``AttributeError`` as for a plain module. ``__dir__`` lists the
        package's namespace and the lazy names, loaded or not.
    """
    namespace = sys.modules[package].__dict__
    table = dict(names)

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        loaded = importlib.import_module(module)
        value = loaded if module == f"{package}.{name}" else getattr(loaded, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__


def lazy_package(
    package: str, names: Mapping[str, str]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` of a package whose public names all load lazily.

    Use in place of the package's ``__all__``::

        __all__, __getattr__, __dir__ = lazy_package(__name__, {"RayVectorEnv": "gem_core.distributed.vector"})

    Args:
        package: as in `lazy_attributes`.
        names: as in `lazy_attributes`; its keys, in order, are the package's ``__all__``.
    """
    return [*names], *lazy_attributes(package, names)
