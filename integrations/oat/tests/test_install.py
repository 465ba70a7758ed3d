"""The README's install line resolves on Python 3.10: ``pip install gem-core gem-oat`` (oat-llm==<tested>).

pip's own resolver, in a throwaway venv, on the package index (`gem_core.testing.installs`):
nothing is installed; skipped, with the reason, where the index cannot be reached.
oat-llm declares ``Requires-Python <3.11``: the check needs a Python 3.10 interpreter on the
machine (``python3.10`` or pyenv's) and is skipped, with the reason, where there is none; on
3.11 the same line fails, as the README says (the second test). flash-attn, which oat pins,
compiles CUDA code to build even its metadata, so it is taken as installed at the pinned
version (as on the CUDA node a user trains on).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gem_core.testing.installs import (
    ResolutionImpossible,
    check_install_line,
    find_python,
    pinned_version,
    resolve_install,
)

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parents[1]

pytestmark = pytest.mark.timeout(1500)


def test_gem_core_and_gem_oat_resolve_on_python_3_10(tmp_path):
    python = find_python("3.10")
    if python is None:
        pytest.skip("no Python 3.10 interpreter on this machine (oat-llm requires Python < 3.11)")
    oat = pinned_version(HERE / "requirements-oat.txt", "oat-llm")
    res = check_install_line([ROOT, HERE], workdir=tmp_path, python=python,
                             assume_installed={"flash-attn": "2.7.4.post1"},
                             expect={"oat-llm": oat, "gem-oat": None, "gem-core": None, "vllm": None})
    assert res.python.startswith("3.10.")


def test_on_python_3_11_pip_refuses_oat_as_the_readme_says(tmp_path):
    """The README sends 3.11 users to the --no-deps --ignore-requires-python install: pip's
    resolver indeed refuses the plain line there."""
    import sys

    if sys.version_info[:2] != (3, 11):
        pytest.skip("checks Python 3.11's refusal")
    oat = pinned_version(HERE / "requirements-oat.txt", "oat-llm")
    try:
        resolve_install([f"oat-llm=={oat}"], workdir=tmp_path)
    except ResolutionImpossible as e:
        assert "oat-llm" in str(e)
    else:
        pytest.fail(f"pip resolved oat-llm=={oat} on Python 3.11: the README's 3.11 instructions are out of date")
