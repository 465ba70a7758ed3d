"""The install line resolves: ``pip install gem-core gem-openrlhf openrlhf==<tested>`` on this Python.

pip's own resolver, in a throwaway venv, on the package index (`gem_core.testing.installs`):
nothing is installed; skipped, with the reason, where the index cannot be reached.
flash-attn, which OpenRLHF pins, compiles CUDA code to build even its metadata, so it is taken
as installed at the pinned version (as on the CUDA node a user trains on) and everything
else is resolved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gem_core.testing.installs import check_install_line, pinned_version

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parents[1]

pytestmark = pytest.mark.timeout(1500)


def test_gem_core_gem_openrlhf_and_the_tested_openrlhf_resolve_together(tmp_path):
    openrlhf = pinned_version(HERE / "requirements-nodeps.txt", "openrlhf")
    check_install_line([ROOT, HERE, f"openrlhf=={openrlhf}"], workdir=tmp_path,
                       assume_installed={"flash-attn": "2.8.3"},
                       expect={"openrlhf": openrlhf, "gem-openrlhf": None, "gem-core": None, "deepspeed": None})
