"""Tests for gem_core.errors: one hierarchy, readable messages, the right builtin bases."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from gem_core import errors

REPO = str(Path(__file__).resolve().parents[1])


def test_every_public_error_derives_from_error():
    for name in errors.__all__:
        cls = getattr(errors, name)
        if name in ("check_positive_int", "check_positive_number", "import_optional", "install_command"):
            assert callable(cls)
        elif issubclass(cls, Warning):
            assert issubclass(cls, errors.GemWarning), f"{name} does not derive from gem_core.errors.GemWarning"
        else:
            assert issubclass(cls, errors.Error), f"{name} does not derive from gem_core.errors.Error"


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (errors.UnregisteredEnv, KeyError),
        (errors.NameNotFound, KeyError),
        (errors.VersionNotFound, KeyError),
        (errors.InvalidKwarg, TypeError),
        (errors.DependencyNotInstalled, ImportError),
        (errors.ResetNeeded, RuntimeError),
        (errors.ClosedEnvError, RuntimeError),
        (errors.InvalidArgument, ValueError),
        (errors.InvalidArgumentType, TypeError),
        (errors.UsageError, RuntimeError),
        (errors.EnvCheckError, AssertionError),
        (errors.WorkerTimeout, TimeoutError),
    ],
)
def test_errors_are_also_the_builtin_callers_expect(cls, builtin):
    assert issubclass(cls, builtin)


def test_unregistered_env_str_is_the_message_not_a_quoted_key():
    err = errors.NameNotFound("no env registered with id 'x'")
    assert str(err) == "no env registered with id 'x'"
    assert str(errors.UnregisteredEnv()) == ""


def test_dependency_not_installed_names_the_pip_extra():
    err = errors.DependencyNotInstalled("math_verify", extra="math", purpose="math answer grading")
    # The test venv installs gem-core from this clone (pip install -e): the hint is the clone form.
    assert str(err) == (
        "'math_verify' is not installed for math answer grading. "
        f"Install it with: pip install -e '{REPO}[math]'"
    )
    assert err.package == "math_verify" and err.extra == "math"
    custom = errors.DependencyNotInstalled("gem", purpose="the bridge", fix="pip install --no-deps gem-llm")
    assert str(custom) == "'gem' is not installed for the bridge. Install it with: pip install --no-deps gem-llm"


class _Dist:
    def __init__(self, direct_url):
        self.direct_url = direct_url

    def read_text(self, name):
        assert name == "direct_url.json"
        return self.direct_url


@pytest.mark.parametrize(
    "direct_url, expected",
    [
        (None, 'pip install "gem-core[math]"'),  # from an index
        ('{"url": "https://example.org/gem_core-0.1.0.whl", "archive_info": {}}', 'pip install "gem-core[math]"'),
        ('{"url": "file:///opt/wheels/gem_core-0.1.0.whl", "archive_info": {}}', 'pip install "gem-core[math]"'),
        ('{"url": "file:///src/my%20gem", "dir_info": {"editable": true}}', "pip install -e '/src/my gem[math]'"),
        ('{"url": "file:///src/gem", "dir_info": {}}', "pip install '/src/gem[math]'"),
        ("not json", 'pip install "gem-core[math]"'),
    ],
)
def test_install_command_fits_how_gem_core_was_installed(monkeypatch, tmp_path, direct_url, expected):
    """gem_core installed into site-packages (no clone around it), from the place direct_url names."""
    from importlib import metadata

    monkeypatch.setattr(errors, "__file__", str(tmp_path / "site-packages" / "gem_core" / "errors.py"))
    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(direct_url))
    assert errors.install_command("math") == expected


def test_install_command_from_a_clone_ignores_the_metadata(monkeypatch):
    """gem_core imported from this clone (the tests' editable install, or the clone on the path)."""
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    assert errors.install_command("rl") == f"pip install -e '{REPO}[rl]'"
