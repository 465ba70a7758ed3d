"""Test-wide settings: no test reaches the Hugging Face hub (CI has no network but PyPI)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
