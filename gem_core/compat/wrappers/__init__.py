"""Reference-GEM wrappers (``gem.wrappers``) on gem_core's wrappers."""

from __future__ import annotations
