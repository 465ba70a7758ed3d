"""rg:* ids against the installed reasoning-gym: the version label and a clear error for missing datasets."""

from __future__ import annotations

import pytest

rg = pytest.importorskip("reasoning_gym", reason="reasoning-gym is not installed (pip install 'gem-core[reasoning]')")

import gem_core  # noqa: E402
from gem_core.envs import reasoning_gym as rg_env  # noqa: E402
from gem_core.errors import EnvConstructionError  # noqa: E402


def test_supported_version_matches_the_name_list():
    # DATASET_NAMES equals the DATASETS of 0.1.25 (0.1.23 lacks coin_flip and path_star)
    assert rg_env.SUPPORTED_VERSION == "0.1.25"
    assert {"coin_flip", "path_star", "kakurasu", "survo"} <= set(rg_env.DATASET_NAMES)
    if rg_env._installed_version(rg) == rg_env.SUPPORTED_VERSION:
        assert tuple(sorted(rg.factory.DATASETS)) == rg_env.DATASET_NAMES


def test_id_missing_from_the_installed_package_names_the_version(monkeypatch):
    # What reasoning-gym 0.1.23 (gem-llm's pin) does with rg:coin_flip.
    monkeypatch.delitem(rg.factory.DATASETS, "coin_flip")
    monkeypatch.setattr(rg_env, "_installed_version", lambda _rg: "0.1.23")
    rg_env.clear_dataset_cache()
    with pytest.raises(EnvConstructionError) as e:
        gem_core.make("rg:coin_flip", size=3)
    message = str(e.value)
    assert "reasoning-gym 0.1.23 has no dataset 'coin_flip'" in message
    assert "pip install 'reasoning-gym>=0.1.25'" in message
