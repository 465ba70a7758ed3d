"""Isolated execution of untrusted Python: a pool of warm, sandboxed zygote processes.

``Sandbox(...).run(code, stdin=..., timeout=...) -> ExecResult``; see `Sandbox` for the
isolation levels (bubblewrap, network namespace, rlimits) and the limits; `Shell`
(`gem_core.sandbox.shell`) runs bash commands under the same isolation layer
(`gem_core.sandbox.isolation`).
"""

from __future__ import annotations

from gem_core.errors import ReducedIsolationWarning, SandboxClosed, SandboxError, SandboxUnavailable
from gem_core.sandbox.isolation import Isolation, detect_isolation
from gem_core.sandbox.pool import DEFAULT_PRELOAD, ExecResult, Sandbox
from gem_core.sandbox.seccomp import build_filter as build_seccomp_filter

__all__ = [
    "Sandbox",
    "ExecResult",
    "Isolation",
    "ReducedIsolationWarning",
    "DEFAULT_PRELOAD",
    "detect_isolation",
    "SandboxError",
    "SandboxUnavailable",
    "SandboxClosed",
    "build_seccomp_filter",
]
