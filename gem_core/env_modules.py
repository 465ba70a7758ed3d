"""Env modules: a user's own env module imported in every process that builds envs.

Trainers build envs outside the script that launches them — in Ray actors (verl,
OpenRLHF, ROLL), launchpad nodes (oat), torchrun ranks (RL2) — so an env registered only
by the driver script is unknown where the episodes run. Two ways reach every process:

- an installed package with a ``gem_core.envs`` entry point (`docs/plugins.md`): the
  recommended way, nothing to pass anywhere;
- ``GEM_ENV_MODULES``: module names (``my_envs``, ``pkg.envs``) or ``.py`` paths, comma
  separated, that gem-core imports on its first registry lookup in each process, beside the
  entry points. `use_env_modules` imports them in the calling process (a module that cannot
  be imported fails there, at once) and sets the variable — and ``PYTHONPATH`` for a module
  found outside the installed packages — so that child processes inherit it; it returns
  those variables for a launcher that does not pass the environment on (a Ray cluster
  started elsewhere: ``runtime_env={"env_vars": ...}``, see `ray_runtime_env`).

Every adapter's recipe takes ``--env-module MOD`` (repeatable) and calls `use_env_modules`.
"""

from __future__ import annotations

import importlib
import os
import sys
import sysconfig
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gem_core.errors import InvalidArgument

__all__ = ["ENV_MODULES_VAR", "use_env_modules", "ray_runtime_env", "env_module_vars", "describe_process"]

ENV_MODULES_VAR = "GEM_ENV_MODULES"
"""The environment variable naming the env modules every process imports."""

# What importing ``GEM_ENV_MODULES`` in this process did: entry -> error text (None: imported).
_imported: dict[str, str | None] = {}


def _entries(value: str | None) -> list[str]:
    return [e.strip() for e in (value or "").split(",") if e.strip()]


def _is_path(entry: str) -> bool:
    return entry.endswith(".py") or os.sep in entry


def _import(entry: str) -> None:
    """Import one entry (a module name, or a ``.py`` path: its directory goes on ``sys.path``)."""
    if _is_path(entry):
        path = Path(entry).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        folder = str(path.resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        importlib.import_module(path.stem)
    else:
        importlib.import_module(entry)


def _root(entry: str) -> str | None:
    """The folder to put on ``PYTHONPATH`` so that a fresh interpreter anywhere imports
    ``entry``; ``None`` when the installed packages already hold it."""
    if _is_path(entry):
        return str(Path(entry).expanduser().resolve().parent)
    module = sys.modules.get(entry)
    origin = getattr(getattr(module, "__spec__", None), "origin", None)
    if not origin or not os.path.isabs(origin):
        return None
    root = Path(origin).resolve().parent
    if Path(origin).name == "__init__.py":
        root = root.parent
    for _ in range(entry.count(".")):
        root = root.parent
    installed = {str(Path(p).resolve()) for k in ("purelib", "platlib", "stdlib", "platstdlib") if (p := sysconfig.get_paths().get(k))}
    if any(str(root).startswith(p) for p in installed):
        return None
    return str(root)


def import_from_environ() -> None:
    """Import what ``GEM_ENV_MODULES`` names (once per entry per process); a failure is a
    warning here and is named in the error of a lookup that then finds no env."""
    for entry in _entries(os.environ.get(ENV_MODULES_VAR)):
        if entry in _imported:
            continue
        try:
            _import(entry)
        except Exception as exc:  # noqa: BLE001 - reported, and named on a failed lookup
            _imported[entry] = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"gem_core: {ENV_MODULES_VAR} names {entry!r}, which cannot be imported in this "
                f"process ({describe_process()}): {_imported[entry]}",
                RuntimeWarning,
                stacklevel=3,
            )
        else:
            _imported[entry] = None


def use_env_modules(modules: Iterable[str]) -> dict[str, str]:
    """Import ``modules`` here and make every process started from here import them too.

    Args:
        modules: module names (``"my_envs"``, ``"pkg.envs"``) or paths of ``.py`` files
            that register envs when imported.

    Returns:
        The environment variables set (``GEM_ENV_MODULES``, and ``PYTHONPATH`` when a
        module lies outside the installed packages), for launchers that do not pass this
        process's environment on (see `ray_runtime_env`).

    Raises:
        InvalidArgument: a module cannot be imported here.
    """
    wanted = [m.strip() for m in modules if m and m.strip()]
    for entry in wanted:
        if "," in entry:
            raise InvalidArgument(f"env module {entry!r}: one module or path per entry (no commas)")
        try:
            _import(entry)
        except Exception as exc:
            raise InvalidArgument(
                f"env module {entry!r} cannot be imported: {type(exc).__name__}: {exc}. Give a "
                "module importable from here (e.g. my_envs, pkg.envs) or the path of a .py file"
            ) from exc
        _imported[entry] = None
    if not wanted:
        return env_module_vars()
    listed = _entries(os.environ.get(ENV_MODULES_VAR))
    absolute = [str(Path(e).expanduser().resolve()) if _is_path(e) else e for e in wanted]
    os.environ[ENV_MODULES_VAR] = ",".join(dict.fromkeys(listed + absolute))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    roots = [r for e in wanted if (r := _root(e)) is not None]
    if roots:
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(roots + paths))
    return env_module_vars()


def env_module_vars() -> dict[str, str]:
    """The environment variables that carry the env modules to another process."""
    return {k: os.environ[k] for k in (ENV_MODULES_VAR, "PYTHONPATH") if os.environ.get(k)}


def ray_runtime_env(runtime_env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``runtime_env`` with the env modules' variables added to its ``env_vars`` (for
    ``ray.init(runtime_env=...)`` or an actor's options; the given values win)."""
    merged = dict(runtime_env or {})
    merged["env_vars"] = {**env_module_vars(), **dict(merged.get("env_vars") or {})}
    return merged


def describe_process() -> str:
    """Which process this is, for error messages: pid, program, and a Ray worker's role."""
    what = f"pid {os.getpid()}, {Path(sys.argv[0]).name if sys.argv and sys.argv[0] else 'python'}"
    ray = sys.modules.get("ray")
    if ray is not None:
        try:
            worker = ray._private.worker.global_worker  # noqa: SLF001 - read-only probe
            if worker.connected and worker.mode == ray.WORKER_MODE:
                what += ", a Ray worker"
        except Exception:  # noqa: BLE001 - only a description
            pass
    for var in ("RANK", "LOCAL_RANK"):
        if os.environ.get(var):
            what += f", {var}={os.environ[var]}"
            break
    return what


def not_found_hint() -> str:
    """What an unknown-id error adds: where the lookup ran, and the two ways to reach it."""
    failed = {e: err for e, err in _imported.items() if err is not None}
    listed = os.environ.get(ENV_MODULES_VAR)
    where = f"Looked up in {describe_process()}"
    where += f"; {ENV_MODULES_VAR}={listed}" if listed else f"; {ENV_MODULES_VAR} is not set"
    if failed:
        where += "; importing " + "; ".join(f"{e!r} failed here: {err}" for e, err in failed.items())
    return (
        f"{where}. An env registered by your own code in one process (e.g. the driver script) is "
        "unknown in the others (trainer workers, Ray actors, ranks): install it as a package with a "
        "'gem_core.envs' entry point (docs/plugins.md), or name its module with "
        f"gem_core.use_env_modules([...]) / {ENV_MODULES_VAR}=module / a recipe's --env-module, which "
        "every process imports."
    )
