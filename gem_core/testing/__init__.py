"""Test support shared by gem_core and the trainer adapters: conformance scenarios, the adapter suite, a fake server.

`gem_core.testing.conformance` holds the scenarios every adapter runs through its
trainer's real code path (fixed envs and seeds, scripted policies, reference values
computed by `gem_core.rl`); `gem_core.testing.adapter_suite` is the pytest base class
every adapter's tests subclass (it imports pytest); `gem_core.testing.openai_server` is
the local OpenAI-compatible server the HTTP tests talk to, built like the other local test
servers on `gem_core.testing.http_server.ScriptedHTTPServer`; `gem_core.testing.ray_cluster`
starts a multi-node Ray cluster on 127.0.0.1 that keeps all its files in its own temp dir;
`gem_core.testing.ranks` runs a trainer's data-parallel ranks as spawned CPU processes.
Importing this package imports neither torch nor transformers; the tiny offline models live
in `gem_core.rl.testing`.
"""

from __future__ import annotations

from gem_core import _lazy

__all__ = ["conformance", "adapter_suite", "openai_server", "http_server", "ray_cluster", "ranks"]

# Lazy: the submodule on first access.
__getattr__, __dir__ = _lazy.lazy_attributes(
    __name__, {name: f"{__name__}.{name}" for name in __all__}
)
