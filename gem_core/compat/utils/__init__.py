"""Reference-GEM helpers user code imports (``gem.utils``): parsing and constants."""

from __future__ import annotations
