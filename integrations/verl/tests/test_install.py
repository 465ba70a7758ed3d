"""The README's install line resolves: ``pip install gem-core gem-verl verl==<tested>`` on this Python.

pip's own resolver, in a throwaway venv, on the package index (`gem_core.testing.installs`):
nothing is installed; skipped, with the reason, where the index cannot be reached.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gem_core.testing.installs import check_install_line, pinned_version

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parents[1]

pytestmark = pytest.mark.timeout(1500)


def test_gem_core_gem_verl_and_the_tested_verl_resolve_together(tmp_path):
    verl = pinned_version(HERE / "requirements-test.txt", "verl")
    check_install_line([ROOT, HERE, f"verl=={verl}"], workdir=tmp_path,
                       expect={"verl": verl, "gem-verl": None, "gem-core": None, "transformers": None})
