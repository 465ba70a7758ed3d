"""``import gem`` without gem-llm: the ``gem`` import name served by `gem_core.compat`.

`install_as_gem` puts a finder first on ``sys.meta_path`` that answers ``gem`` and every
``gem.X.Y`` with the module ``gem_core.compat.X.Y`` itself (the same object: ``gem.make is
gem_core.compat.make``). A path the compat layer does not have fails as it would without
the finder (``ModuleNotFoundError`` naming the ``gem`` path and the compat module it looked
for). It refuses to shadow an installed gem-llm: with the real reference importable,
``import gem`` must stay the reference (use `gem_core.compat.gem_llm.register_gem_core_envs`
to put gem_core's envs into it instead).

The finder lives in the process that installs it: a ``fork``-ed worker inherits it; a
spawned one, a Ray worker or a torchrun rank must call `install_as_gem` before its first
``import gem`` (e.g. in a module named by ``--env-module`` / ``gem_core.use_env_modules``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from typing import Any

from gem_core.errors import UsageError

__all__ = ["install_as_gem", "uninstall_as_gem", "GemAliasFinder"]

_TARGET = "gem_core.compat"


def _target(fullname: str) -> str | None:
    if fullname == "gem":
        return _TARGET
    if fullname.startswith("gem."):
        return _TARGET + fullname[3:]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return importlib.import_module(self.target)  # the compat module itself, not a copy

    def exec_module(self, module: Any) -> None:
        pass  # executed once, as gem_core.compat.X


class GemAliasFinder(importlib.abc.MetaPathFinder):
    """``gem[.X.Y]`` -> ``gem_core.compat[.X.Y]`` (see the module docs)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        name = _target(fullname)
        if name is None:
            return None
        try:
            found = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: gem_core.compat (serving `import gem`) has no {name!r}; "
                "see MIGRATING.md for the gem_core equivalent",
                name=fullname,
            )
        return importlib.util.spec_from_loader(
            fullname, _AliasLoader(name), is_package=found.submodule_search_locations is not None
        )


def _real_gem() -> str | None:
    """Where an importable ``gem`` that is not ours lives (gem-llm), or None. Called while
    our finder is not installed, so ``find_spec`` asks only the other finders."""
    module = sys.modules.get("gem")
    if module is not None:
        return None if getattr(module, "__name__", None) == _TARGET else str(getattr(module, "__file__", None) or module)
    try:
        spec = importlib.util.find_spec("gem")
    except ModuleNotFoundError:
        return None  # something hides it on purpose
    return None if spec is None else str(spec.origin or spec.submodule_search_locations or spec.name)


def install_as_gem() -> GemAliasFinder:
    """Make ``import gem`` (and ``gem.X.Y``) resolve to `gem_core.compat`; idempotent.

    Returns:
        The installed finder (first on ``sys.meta_path``).

    Raises:
        UsageError: gem-llm (or another ``gem``) is importable or already imported: the
            message names where, and the two ways on.
    """
    for finder in sys.meta_path:
        if isinstance(finder, GemAliasFinder):
            return finder
    where = _real_gem()
    if where is not None:
        raise UsageError(
            f"install_as_gem: a real `gem` package is importable ({where}), most likely gem-llm; "
            "`import gem` stays the reference. Either uninstall it (pip uninstall gem-llm) to "
            "serve `import gem` from gem_core.compat, or keep it and put gem_core's envs into its "
            "registry with gem_core.compat.gem_llm.register_gem_core_envs()"
        )
    finder = GemAliasFinder()
    sys.meta_path.insert(0, finder)
    return finder


def uninstall_as_gem() -> None:
    """Remove the finder and forget the ``gem`` modules it served (``gem_core.compat`` stays)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, GemAliasFinder)]
    for name in [n for n in sys.modules if n == "gem" or n.startswith("gem.")]:
        module = sys.modules[name]
        if getattr(module, "__name__", "").startswith(_TARGET):
            del sys.modules[name]
