"""Reference ``gem.tools.search_engine``: the reference's search servers (not ported; see gem_core.search)."""

from __future__ import annotations
