"""Shared by the import stand-ins (see ../../STUBS.md): a callable that refuses to run."""

from __future__ import annotations


def unavailable(name: str):
    """A placeholder for ``name`` that raises when called or built."""

    def _raise(*args, **kwargs):
        raise RuntimeError(
            f"{name} is an import stand-in in gem-rl2's tests (SGLang and flash-attn need CUDA "
            "and cannot be installed on this CPU-only platform; see integrations/rl2/STUBS.md)"
        )

    _raise.__name__ = name.rsplit(".", 1)[-1]
    _raise.__qualname__ = _raise.__name__
    return _raise
