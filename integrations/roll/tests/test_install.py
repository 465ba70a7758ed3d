"""The README's install lines resolve: ``pip install -e gem -e gem/integrations/roll`` on this
Python, alone and next to ROLL's GPU stack (``requirements_torch280_vllm.txt`` of the ROLL
tree in ``GEM_ROLL_SRC``; skipped, with the reason, where it is not set).

pip's own resolver, in a throwaway venv, on the package index (`gem_core.testing.installs`):
nothing is installed; skipped, with the reason, where the index cannot be reached.
flash-attn, which ROLL's stack names, compiles CUDA code to build even its metadata, so it
is taken as installed (as on the CUDA node a user trains on) and everything else is
resolved, ROLL's own ``./mcore_adapter`` included (pip runs in the ROLL tree, as the README
does).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gem_core.testing.installs import check_install_line

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parents[1]

pytestmark = pytest.mark.timeout(1500)


def test_gem_core_and_gem_roll_resolve(tmp_path):
    check_install_line([ROOT, HERE], workdir=tmp_path,
                       expect={"gem-roll": None, "gem-core": None, "numpy": None, "pyyaml": None})


def test_gem_core_and_gem_roll_resolve_next_to_rolls_gpu_stack(tmp_path):
    src = os.environ.get("GEM_ROLL_SRC", "")
    stack = Path(src) / "requirements_torch280_vllm.txt"
    if not src or not stack.is_file():
        pytest.skip("ROLL is not on PyPI: set GEM_ROLL_SRC to a ROLL source tree to check its stack beside gem-roll")
    check_install_line(["-r", stack.name, ROOT, HERE], workdir=tmp_path, cwd=src,
                       assume_installed={"flash-attn": "2.8.3"},
                       expect={"gem-roll": None, "gem-core": None, "vllm": None, "torch": "2.8.0", "mcore-adapter": None})
