"""gem_core.rl.versions: the adapters' version and hook checks name what changed."""

from __future__ import annotations

import pytest

from gem_core.rl.versions import check_hook, check_version, installed_version


def test_check_version_range_and_messages():
    assert check_version("gem-x", "x", "1.5", minimum="1.2", below="2", why="its hooks", install="pip install x") == "1.5"
    with pytest.raises(ImportError, match=r"gem-x needs x>=1.2,<2 \(its hooks\), found x 2.0; pip install x"):
        check_version("gem-x", "x", "2.0", minimum="1.2", below="2", why="its hooks", install="pip install x")
    with pytest.raises(ImportError, match="needs x>=1.2, which is not installed"):
        check_version("gem-x", "x", None, minimum="1.2", why="w", install="pip install x")
    assert installed_version("pytest") is not None and installed_version("no-such-dist-xyz") is None


def test_check_hook_names_the_changed_function():
    def hooked(batch, reward_normalization, extra=None):
        return batch

    check_hook("gem-x", "X", "x.hooked", hooked, ("batch", "reward_normalization"), tested="abc123")

    def renamed(data, reward_normalization):
        return data

    with pytest.raises(ImportError, match=r"X changed x.hooked: its parameters start \(data, reward_normalization\), "
                                          r"gem-x expects \(batch, reward_normalization\) \(tested with abc123\)"):
        check_hook("gem-x", "X", "x.hooked", renamed, ("batch", "reward_normalization"), tested="abc123")
    with pytest.raises(ImportError, match="X changed x.gone: it is gone"):
        check_hook("gem-x", "X", "x.gone", None, ("a",), tested="abc123")
