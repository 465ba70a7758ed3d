"""Tests for gem_core.errors: one hierarchy, readable messages, the right builtin bases."""

from __future__ import annotations

import pytest

from gem_core import errors


def test_every_public_error_derives_from_error():
    for name in errors.__all__:
        cls = getattr(errors, name)
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
    assert str(err) == (
        "'math_verify' is not installed for math answer grading. "
        'Install it with: pip install "gem-core[math]"'
    )
    assert err.package == "math_verify" and err.extra == "math"


def test_dependency_not_installed_without_extra_names_the_package():
    assert str(errors.DependencyNotInstalled("foo")).endswith("Install it with: pip install foo")


def test_env_check_error_names_the_check():
    err = errors.EnvCheckError("reset() is not deterministic", check="check_reset_determinism")
    assert str(err) == "check_reset_determinism: reset() is not deterministic"
    assert err.check == "check_reset_determinism"
    assert str(errors.EnvCheckError("plain")) == "plain"


def test_worker_error_carries_the_remote_traceback():
    err = errors.WorkerError(
        "sub-env 3 raised ValueError",
        index=3,
        exc_type="ValueError",
        remote_message="bad",
        remote_traceback="Traceback (most recent call last):\n  ...\nValueError: bad\n",
    )
    assert err.index == 3 and err.exc_type == "ValueError" and err.remote_message == "bad"
    assert str(err) == (
        "sub-env 3 raised ValueError\n\nRemote traceback:\n"
        "Traceback (most recent call last):\n  ...\nValueError: bad"
    )
    assert str(errors.WorkerError("plain")) == "plain"
