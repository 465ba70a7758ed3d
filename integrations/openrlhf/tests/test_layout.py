"""The package around the trainer: the version check, the import stand-ins, test discovery."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("openrlhf", reason="gem-openrlhf's tests need openrlhf (make test-openrlhf builds its venv)")

from gem_openrlhf import OPENRLHF_BELOW, OPENRLHF_MIN, check_openrlhf_version  # noqa: E402


def test_version_check():
    assert check_openrlhf_version() == "0.11.2"
    assert check_openrlhf_version(OPENRLHF_MIN) == OPENRLHF_MIN
    for bad in ("0.11.1", OPENRLHF_BELOW, "1.0.0"):
        with pytest.raises(ImportError, match=rf"needs OpenRLHF>=0.11.2,<0.12 .*found openrlhf {bad}; pip install --no-deps"):
            check_openrlhf_version(bad)


def test_the_import_stand_ins_raise_when_used():
    import vllm  # noqa: F401  (the stand-in on this CPU machine)
    from gem_openrlhf.testing import STUBBED_MODULES

    for name, symbols in STUBBED_MODULES.items():
        module = sys.modules[name]
        assert "stand-in" in (module.__doc__ or ""), f"{name} is the real package: the stubs must not replace it"
        for symbol in symbols:
            with pytest.raises(RuntimeError, match="import stand-in of gem-openrlhf's tests"):
                getattr(module, symbol)()


def test_openrlhfs_tests_package_does_not_shadow_these_tests():
    here = Path(__file__).resolve().parent
    assert not (here / "__init__.py").exists(), "a tests/__init__.py would collide with openrlhf's top-level `tests`"
    assert Path(sys.modules[__name__].__file__).resolve().parent == here
    import tests  # the openrlhf wheel's package, untouched

    assert "site-packages" in str(Path(tests.__file__).resolve())
