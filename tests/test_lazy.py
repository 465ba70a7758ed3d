"""gem_core._lazy: the packages' lazy attributes load on first access, are listed by dir(), and
every public name of every lazy package imports."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

from gem_core._lazy import lazy_attributes, lazy_package

LAZY_PACKAGES = (
    "gem_core",
    "gem_core.distributed",
    "gem_core.eval",
    "gem_core.envs.mcp_tasks",
    "gem_core.envs.tau",
    "gem_core.tools",
    "gem_core.compat.tools",
    "gem_core.wrappers",
    "gem_core.testing",
    "gem_core.multiagent",
    "gem_core.search",
    "gem_core.rl",
    "gem_core.rl.rollout",
)


@pytest.fixture
def package(monkeypatch):
    """A fresh package ``lazy_pkg`` whose ``value`` comes from ``lazy_pkg.impl`` and whose
    ``impl`` is that submodule."""
    pkg = types.ModuleType("lazy_pkg")
    pkg.__path__ = []
    impl = types.ModuleType("lazy_pkg.impl")
    impl.value = object()
    monkeypatch.setitem(sys.modules, "lazy_pkg", pkg)
    monkeypatch.setitem(sys.modules, "lazy_pkg.impl", impl)
    pkg.__getattr__, pkg.__dir__ = lazy_attributes(
        "lazy_pkg", {"value": "lazy_pkg.impl", "impl": "lazy_pkg.impl"}
    )
    return pkg, impl


def test_a_lazy_name_loads_once_and_is_then_a_plain_attribute(package):
    pkg, impl = package
    assert "value" not in vars(pkg)
    assert pkg.value is impl.value
    assert vars(pkg)["value"] is impl.value  # stored: __getattr__ is not called again


def test_a_name_equal_to_its_submodule_is_the_submodule(package):
    pkg, impl = package
    assert pkg.impl is impl


def test_an_unknown_name_raises_attribute_error_naming_the_package(package):
    pkg, _ = package
    with pytest.raises(AttributeError, match=r"module 'lazy_pkg' has no attribute 'nope'"):
        _ = pkg.nope
    assert getattr(pkg, "nope", None) is None


def test_dir_lists_lazy_names_before_they_load(package):
    pkg, _ = package
    listing = dir(pkg)
    assert {"value", "impl", "__getattr__", "__dir__"} <= set(listing)
    assert listing == sorted(listing)


def test_lazy_package_states_all_from_its_table_in_order(monkeypatch):
    pkg = types.ModuleType("lazy_pkg2")
    monkeypatch.setitem(sys.modules, "lazy_pkg2", pkg)
    names, getattr_, dir_ = lazy_package("lazy_pkg2", {"b": "json", "a": "json", "dumps": "json"})
    assert names == ["b", "a", "dumps"]
    pkg.__getattr__, pkg.__dir__ = getattr_, dir_
    import json

    assert pkg.dumps is json.dumps
    with pytest.raises(AttributeError, match="module 'json' has no attribute 'b'"):
        _ = pkg.b  # a table entry the module lacks fails like a plain attribute access


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_public_name_of_a_lazy_package_imports_and_is_listed(name):
    module = importlib.import_module(name)
    listing = dir(module)
    missing = [n for n in module.__all__ if n not in listing]
    assert not missing, f"{name}: dir() lacks {missing}"
    for attr in module.__all__:
        assert getattr(module, attr) is not None, f"{name}.{attr}"
    namespace: dict = {}
    exec(f"from {name} import *", namespace)
    assert set(module.__all__) <= set(namespace)


def test_import_gem_core_loads_no_lazy_module():
    code = (
        "import sys, gem_core\n"
        "lazy = ('gem_core.vector', 'gem_core.checker', 'gem_core.tools', 'gem_core.eval')\n"
        "loaded = [m for m in sys.modules if m.startswith(lazy)]\n"
        "assert not loaded, loaded\n"
        "assert 'make_vec' in dir(gem_core) and 'check_env' in dir(gem_core)\n"
        "from gem_core.vector import make_vec\n"
        "assert gem_core.make_vec is make_vec\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
