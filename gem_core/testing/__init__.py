"""Test support shared by gem_core and the trainer adapters: the conformance scenario.

`gem_core.testing.conformance` holds the one scenario every adapter runs through its
trainer's real code path (fixed env and seeds, a scripted policy, reference ReBN values
computed by `gem_core.rl`). Importing this package imports neither torch nor
transformers; the tiny offline models live in `gem_core.rl.testing`.
"""

from __future__ import annotations

__all__ = ["conformance"]


def __getattr__(name: str):  # lazy: `gem_core.testing.conformance` on first access
    if name == "conformance":
        import importlib

        return importlib.import_module("gem_core.testing.conformance")
    raise AttributeError(f"module 'gem_core.testing' has no attribute {name!r}")
