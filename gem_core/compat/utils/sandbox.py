"""Reference ``gem.utils.sandbox``: `run_python` in gem_core's sandbox.

``run_python(code, sandbox_type, stdin=None, timeout=10) -> (success, stdout, stderr)`` runs
in `gem_core.sandbox` (the process-wide pool the code graders use,
`gem_core.grading.code.shared_sandbox`: namespaces, seccomp, resource limits, no network), whatever ``sandbox_type`` says: the reference's ``"none"`` ran model code on the
host. ``success`` is exit code 0 within the timeout; a timeout or sandbox failure puts
`ERROR_MSG_PREFIX` and the reason in ``stderr``. The reference's import filter
(`check_forbidden_imports`) and raw `subprocess_run` are not ported: the sandbox isolates
the code instead of screening it.
"""

from __future__ import annotations

from gem_core.compat._not_ported import placeholders

__all__ = ["run_python", "DEFAULT_TIMEOUT", "CLI_ARG_SIZE_LIMIT", "ERROR_MSG_PREFIX", "check_forbidden_imports", "subprocess_run"]

DEFAULT_TIMEOUT = 10
CLI_ARG_SIZE_LIMIT = 1024 * 3
ERROR_MSG_PREFIX = "Failed to execute program: "

(check_forbidden_imports, subprocess_run) = placeholders(
    __name__,
    ("check_forbidden_imports", "subprocess_run"),
    instead="gem_core.compat.utils.sandbox.run_python or gem_core.sandbox.Sandbox.run (isolated, so no import screening is needed)",
    why="the reference screens imports and runs the code as a host subprocess",
)


def run_python(code: str, sandbox_type: str = "none", stdin: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> tuple[bool, str, str]:
    """Run ``code`` (stdin ``stdin``) in gem_core's sandbox; ``(success, stdout, stderr)``.

    ``sandbox_type`` is accepted for the reference's signature and ignored.
    """
    if not isinstance(code, str):
        return False, "", f"{ERROR_MSG_PREFIX}code must be a str, got {type(code).__name__}"
    from gem_core.grading.code import shared_sandbox

    result = shared_sandbox().run(code, stdin=stdin, timeout=timeout)
    stderr = result.stderr
    if result.timed_out:
        stderr = f"{ERROR_MSG_PREFIX}timed out after {timeout} s\n{stderr}".rstrip("\n")
    elif result.sandbox_error:
        stderr = f"{ERROR_MSG_PREFIX}{result.sandbox_error}\n{stderr}".rstrip("\n")
    return result.ok, result.stdout, stderr
