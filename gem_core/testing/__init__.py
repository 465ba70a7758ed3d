"""Test support shared by gem_core and the trainer adapters: conformance scenarios and the adapter suite.

`gem_core.testing.conformance` holds the scenarios every adapter runs through its
trainer's real code path (fixed envs and seeds, scripted policies, reference values
computed by `gem_core.rl`); `gem_core.testing.adapter_suite` is the pytest base class
every adapter's tests subclass (it imports pytest). Importing this package imports neither torch nor
transformers; the tiny offline models live in `gem_core.rl.testing`.
"""

from __future__ import annotations

__all__ = ["conformance", "adapter_suite"]


def __getattr__(name: str):  # lazy: the submodule on first access
    if name in __all__:
        import importlib

        return importlib.import_module(f"gem_core.testing.{name}")
    raise AttributeError(f"module 'gem_core.testing' has no attribute {name!r}")
