"""The one exception hierarchy of gem_core: every error it raises derives from `Error`."""

from __future__ import annotations

__all__ = [
    "Error",
    "RegistrationError",
    "UnregisteredEnv",
    "NameNotFound",
    "VersionNotFound",
    "InvalidKwarg",
    "EnvConstructionError",
    "DependencyNotInstalled",
    "ResetNeeded",
    "ClosedEnvError",
    "InvalidArgument",
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
    "ReducedIsolationWarning",
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
        extra: the `gem-core` extra that installs it, e.g. ``"math"``.
        purpose: what needs it, e.g. ``"math answer grading"``.
    """

    def __init__(self, package: str, extra: str | None = None, purpose: str | None = None):
        self.package = package
        self.extra = extra
        need = f" for {purpose}" if purpose else ""
        if extra:
            fix = f'pip install "gem-core[{extra}]"'
        else:
            fix = f"pip install {package}"
        super().__init__(f"{package!r} is not installed{need}. Install it with: {fix}")


class ResetNeeded(Error, RuntimeError):
    """`step` was called before `reset`, or after the episode ended."""


class ClosedEnvError(Error, RuntimeError):
    """An operation was attempted on an env or vector env that is closed."""


class InvalidArgument(Error, ValueError):
    """An argument has the wrong value or shape (e.g. a seed list of the wrong length)."""


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


class ReducedIsolationWarning(RuntimeWarning):
    """Bubblewrap is unavailable: sandboxed code and shell commands are bounded by rlimits
    (and a network namespace where permitted) but see the host's file system."""
