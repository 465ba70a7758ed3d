"""`gem_core.testing.installs`: the pins it reads and the venv it resolves for (the adapters'
tests resolve their install lines with it on the package index)."""

from __future__ import annotations

import pytest

from gem_core.testing.installs import InstallResolution, canonical_name, pinned_version


def test_pinned_version_reads_the_pin_of_the_named_package_only(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text("# tested\ntorch==2.13.0\nrl_square[extra] == 0.0.2 ; python_version>'3'  # comment\nverl>=0.9\n")
    assert pinned_version(req, "rl-square") == "0.0.2"
    assert pinned_version(req, "Torch") == "2.13.0"
    with pytest.raises(LookupError, match="pins no verl"):
        pinned_version(req, "verl")  # a range is not a pin


def test_a_resolution_answers_by_canonical_name_and_names_what_it_holds():
    res = InstallResolution(versions={"flash-attn": "2.8.3", "gem-core": "0.1.0"}, python="3.11.7")
    assert "Flash_Attn" in res and res.version("GEM.core") == "0.1.0"
    assert canonical_name("Rl_Square") == "rl-square"
    with pytest.raises(KeyError, match="torch is not in the resolution .*gem-core"):
        res.version("torch")
