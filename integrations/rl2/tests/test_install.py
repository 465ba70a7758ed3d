"""The README's install line resolves: ``pip install gem-core gem-rl2[rl2]`` with the tested ``rl-square`` on this Python.

pip's own resolver, in a throwaway venv, on the package index (`gem_core.testing.installs`):
nothing is installed; skipped, with the reason, where the index cannot be reached.
flash-attn, which rl-square pins, compiles CUDA code to build even its metadata, so it is taken
as installed at the pinned version (as on the CUDA node a user trains on) and everything
else (torch 2.8, SGLang) is resolved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gem_core.testing.installs import check_install_line, pinned_version

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parents[1]

pytestmark = pytest.mark.timeout(1500)


def test_gem_core_gem_rl2_and_the_tested_rl_square_resolve_together(tmp_path):
    rl2 = pinned_version(HERE / "requirements-nodeps.txt", "rl-square")
    check_install_line([ROOT, f"{HERE}[rl2]", f"rl-square=={rl2}"], workdir=tmp_path,
                       assume_installed={"flash-attn": "2.8.3"},
                       expect={"rl-square": rl2, "gem-rl2": None, "gem-core": None, "sglang": None})
