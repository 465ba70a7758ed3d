"""Reference ``gem.__about__``: the gem-llm version whose API `gem_core.compat` follows."""

from __future__ import annotations

__version__ = "0.1.0"
