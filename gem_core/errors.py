"""The one exception hierarchy of gem_core: every error it raises derives from `Error`, every
warning from `GemWarning`; `check_positive_int` and `check_positive_number` are the argument
checks that raise `InvalidArgument`; `import_optional` imports an optional dependency or raises
`DependencyNotInstalled`.

Errors of a subsystem live here too (`PolicyError`, `GraderUnavailable`, ...); the modules
that raise them re-export them, so ``from gem_core.rl.sampling import PolicyError`` still works.
An error about bad user input subclasses the built-in a caller would catch (`InvalidArgument`
is a ``ValueError``, `UnregisteredEnv` a ``KeyError``, `InvalidKwarg` and `InvalidArgumentType`
a ``TypeError``, `UsageError` a ``RuntimeError``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = [
    "Error",
    "RegistrationError",
    "UnregisteredEnv",
    "NameNotFound",
    "VersionNotFound",
    "InvalidKwarg",
    "EnvConstructionError",
    "DependencyNotInstalled",
    "install_command",
    "ResetNeeded",
    "ClosedEnvError",
    "InvalidArgument",
    "InvalidArgumentType",
    "UsageError",
    "EnvCheckError",
    "WorkerError",
    "WorkerTimeout",
    "AlreadyPendingCallError",
    "NoAsyncCallError",
    "SandboxError",
    "SandboxUnavailable",
    "SandboxClosed",
    "PlayRowError",
    "InvalidRow",
    "PolicyError",
    "ContextLengthExceeded",
    "GraderUnavailable",
    "SearchBackendError",
    "MCPConnectionError",
    "UserSimulatorError",
    "MultiAgentError",
    "RayConnectionError",
    "DatasetUnavailable",
    "IndexUnreachable",
    "ResolutionImpossible",
    "GemWarning",
    "ReducedIsolationWarning",
    "TemplateRewriteWarning",
    "check_positive_int",
    "check_positive_number",
    "import_optional",
]


class Error(Exception):
    """Base class of every error raised by gem_core."""


class RegistrationError(Error):
    """A `register` call is malformed (bad id, duplicate id, bad entry point)."""


class UnregisteredEnv(Error, KeyError):
    """An env id is not in the registry."""

    def __str__(self) -> str:  # KeyError would repr() the message; keep it readable.
        return str(self.args[0]) if self.args else ""


class NameNotFound(UnregisteredEnv):
    """No registered env has this name (in any version)."""


class VersionNotFound(UnregisteredEnv):
    """The env name exists, but not at the requested version."""


class InvalidKwarg(Error, TypeError):
    """`make` got a keyword argument that the env's constructor does not accept."""


class EnvConstructionError(Error):
    """An env constructor raised; the message names the env id and the kwargs."""


class DependencyNotInstalled(Error, ImportError):
    """An optional dependency is missing.

    Args:
        package: the import name that failed.
        extra: the `gem-core` extra that installs it, e.g. ``"math"``; the message gives the
            `install_command` for it (the clone form where gem-core was installed from one).
        purpose: what needs it, e.g. ``"math answer grading"``.
        fix: the install command, where neither an extra nor ``pip install PACKAGE`` is right.
    """

    def __init__(self, package: str, extra: str | None = None, purpose: str | None = None,
                 *, fix: str | None = None):
        self.package = package
        self.extra = extra
        need = f" for {purpose}" if purpose else ""
        fix = fix or (install_command(extra) if extra else f"pip install {package}")
        super().__init__(f"{package!r} is not installed{need}. Install it with: {fix}")


def install_command(extra: str) -> str:
    """The ``pip install`` command that adds gem-core's ``extra``, in the form this copy was installed.

    From a clone (``pip install -e .``, or gem_core imported from a source tree):
    ``pip install -e '/path/to/clone[extra]'``; from an index: ``pip install "gem-core[extra]"``.
    """
    source = _source_tree()
    if source is None:
        return f'pip install "gem-core[{extra}]"'
    editable, path = source
    return f"pip install {'-e ' if editable else ''}'{path}[{extra}]'"


def _source_tree() -> tuple[bool, str] | None:
    """``(editable, path)`` of the clone this gem_core comes from; ``None`` for an index install.

    gem_core imported from a clone (an editable install, or the clone on ``sys.path``): that
    clone. Installed into site-packages from a local directory (``pip install /path``): that
    directory, from the install's ``direct_url.json`` (PEP 610). Anything else: ``None``.
    """
    import json
    import os
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        with open(os.path.join(here, "pyproject.toml"), encoding="utf-8") as f:
            if 'name = "gem-core"' in f.read():
                return True, here
    except OSError:
        pass
    try:
        info = json.loads(metadata.distribution("gem-core").read_text("direct_url.json") or "null")
    except (metadata.PackageNotFoundError, ValueError):
        return None
    if not isinstance(info, dict) or "dir_info" not in info or not str(info.get("url")).startswith("file://"):
        return None  # an index, a URL or a local wheel/sdist file: the index form fits
    return bool(info["dir_info"].get("editable")), unquote(urlparse(info["url"]).path)


class ResetNeeded(Error, RuntimeError):
    """`step` was called before `reset`, or after the episode ended."""


class ClosedEnvError(Error, RuntimeError):
    """An operation was attempted on an env or vector env that is closed."""


class InvalidArgument(Error, ValueError):
    """An argument has the wrong value or shape (e.g. a seed list of the wrong length)."""


class InvalidArgumentType(Error, TypeError):
    """An argument has the wrong type (e.g. a tool that is not a `gem_core.tools.Tool`)."""


class UsageError(Error, RuntimeError):
    """A function was called where it cannot work (e.g. a synchronous entry point inside a
    running event loop); the message names the call to use instead."""


class EnvCheckError(Error, AssertionError):
    """An env failed a `gem_core.check_env` check.

    The message starts with the name of the failed check and names the likely bug.

    Attributes:
        check: the name of the failed check, e.g. ``"check_reset_determinism"``.
    """

    def __init__(self, message: str, *, check: str = ""):
        self.check = check
        super().__init__(f"{check}: {message}" if check else message)


class WorkerError(Error):
    """A sub-env raised inside a vector env, or its worker process died.

    Attributes:
        index: the sub-env index (``None`` when the whole worker failed).
        exc_type: the name of the remote exception type.
        remote_message: the remote exception message.
        remote_traceback: the formatted traceback from the worker process.
    """

    def __init__(
        self,
        message: str,
        *,
        index: int | None = None,
        exc_type: str = "",
        remote_message: str = "",
        remote_traceback: str = "",
    ):
        self.index = index
        self.exc_type = exc_type
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        text = message
        if remote_traceback:
            text = f"{message}\n\nRemote traceback:\n{remote_traceback.rstrip()}"
        super().__init__(text)


class WorkerTimeout(Error, TimeoutError):
    """A vector-env worker did not answer within the timeout."""


class AlreadyPendingCallError(Error, RuntimeError):
    """An async call was started while another one is still pending."""


class NoAsyncCallError(Error, RuntimeError):
    """A `*_wait` was called without a matching `*_async` call."""


class SandboxError(Error):
    """The code sandbox (`gem_core.sandbox`) failed: a worker could not start or broke down."""


class SandboxUnavailable(SandboxError):
    """The requested sandbox isolation level does not work on this machine."""


class SandboxClosed(SandboxError, RuntimeError):
    """A `gem_core.sandbox.Sandbox` was used after `close`."""


class PlayRowError(Error, RuntimeError):
    """`gem_core.rl.play_row` could not play a dataset row: a bad row, an env that could
    not be made, or an episode that failed (the policy or the env raised).

    Attributes:
        env_id: the row's env id (``None`` when the row names none).
        seed: the row's seed.
    """

    def __init__(self, message: str, *, env_id: str | None = None, seed: int | None = None):
        self.env_id = env_id
        self.seed = seed
        super().__init__(message)


class InvalidRow(PlayRowError, InvalidArgument):
    """A dataset row names no env id, or has a seed that is not an integer."""


class PolicyError(Error, RuntimeError):
    """A policy backend failed: transport error, timeout, or a malformed response.

    `run_episode` turns it (and any other exception from ``policy.generate``) into a
    flagged episode (``episode.error``); the other episodes go on.
    """


class ContextLengthExceeded(PolicyError):
    """The server refused a request because prompt plus ``max_tokens`` exceed its context.

    `run_chat_episode` ends the episode with ``end_reason="context"`` (a budget, not an
    error); `run_episode`, which checks the context itself, flags it like any `PolicyError`.
    """


class GraderUnavailable(Error, RuntimeError):
    """The grader is closed, or none of its worker processes could be started."""


class SearchBackendError(Error):
    """A search backend failed (unreadable index, unreachable server, bad response)."""


class MCPConnectionError(Error, RuntimeError):
    """The MCP server could not be reached (raised only where no observation can carry it,
    e.g. `MCPTool.list_tools`; `MCPTool.execute` reports it as an error observation)."""


class UserSimulatorError(Error, RuntimeError):
    """A user simulator could not produce a message (its endpoint failed, no script)."""


class MultiAgentError(Error, RuntimeError):
    """A multi-agent env or view was driven against its contract (wrong agent, no policy)."""


class RayConnectionError(Error, ConnectionError):
    """A Ray cluster address could not be reached (or did not answer as Ray) in time."""


class DatasetUnavailable(Error, FileNotFoundError):
    """A dataset-backed env found no local copy of its data and could not reach the hub."""


class IndexUnreachable(Error, RuntimeError):
    """The package index could not be reached: an install-resolution check cannot run here."""


class ResolutionImpossible(Error, RuntimeError):
    """pip's resolver found no set of packages that satisfies the requirements."""


# ----------------------------------------------------------------------------- warnings


class GemWarning(Warning):
    """Base class of every warning gem_core issues."""


class ReducedIsolationWarning(GemWarning, RuntimeWarning):
    """Bubblewrap is unavailable: sandboxed code and shell commands are bounded by rlimits
    (and a network namespace where permitted) but see the host's file system."""


class TemplateRewriteWarning(GemWarning, RuntimeWarning):
    """A chat template rendered earlier turns differently once a message was added."""


# ----------------------------------------------------------------------------- argument checks


def check_positive_int(
    name: str, value: object, *, allow_none: bool = False, error: type[Error] = InvalidArgument
) -> int | None:
    """``value`` if it is an ``int`` (not a ``bool``) greater than 0, else `InvalidArgument`.

    Args:
        name: how the caller names the argument in the message, e.g. ``"Sandbox(size=...)"``
            or ``"max_tokens"``.
        value: the argument.
        allow_none: ``None`` is accepted (and returned) too.
        error: the class raised instead of `InvalidArgument` (e.g. `RegistrationError` for a
            bad ``register`` call).

    Raises:
        InvalidArgument: ``"{name} must be a positive int, got {value!r}"`` (``"... or
        None"`` with ``allow_none``).
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        expected = "a positive int or None" if allow_none else "a positive int"
        raise error(f"{name} must be {expected}, got {value!r}")
    return value


def check_positive_number(name: str, value: object, *, allow_none: bool = False) -> float | int | None:
    """``value`` if it is a real number (``int`` or ``float``, not a ``bool``) greater than 0
    (so not NaN), else `InvalidArgument`; as `check_positive_int` otherwise."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        expected = "a positive number or None" if allow_none else "a positive number"
        raise InvalidArgument(f"{name} must be {expected}, got {value!r}")
    return value


# ----------------------------------------------------------------------------- optional dependencies


def import_optional(package: str, *, extra: str | None = None, purpose: str | None = None) -> ModuleType:
    """The module ``package``, imported; `DependencyNotInstalled` (naming the ``pip install``
    command) when it cannot be imported.

    Args:
        package: the import name, e.g. ``"ray"``.
        extra, purpose: as in `DependencyNotInstalled`.
    """
    try:
        return importlib.import_module(package)
    except ImportError as e:
        raise DependencyNotInstalled(package, extra=extra, purpose=purpose) from e
