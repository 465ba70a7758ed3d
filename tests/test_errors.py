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


# ----------------------------------------------------------------------------- one hierarchy

_errors = errors

_PACKAGE = Path(_errors.__file__).parent
# Not moved (yet): gem eval's own error (eval/ is edited elsewhere), the compat layer's
# reference-GEM names, and the env-internal control-flow errors that never leave a step.
_DEFINED_ELSEWHERE = {"EndpointUnreachable", "DuplicateEnvError", "UnknownWrapper", "ToolError",
                      "PolicyViolation", "ShopError", "JSONLimitError"}


def test_every_public_error_and_warning_class_is_defined_in_errors():
    stray = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == _PACKAGE:
            continue
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
            if node.name.endswith(("Error", "Warning", "Exceeded", "Unavailable")) or bases & {
                    "Exception", "Error", "RuntimeError", "ValueError", "Warning", "RuntimeWarning"}:
                if node.name not in _DEFINED_ELSEWHERE:
                    stray.append(f"{path.relative_to(_PACKAGE)}:{node.lineno} {node.name}")
    assert not stray, f"define these in gem_core/errors.py (re-export them where they were): {stray}"


@pytest.mark.parametrize(("module", "name"), [
    ("gem_core.rl.sampling", "PolicyError"), ("gem_core.rl.sampling", "ContextLengthExceeded"),
    ("gem_core.rl.chat", "TemplateRewriteWarning"), ("gem_core.grading.math", "GraderUnavailable"),
    ("gem_core.search.base", "SearchBackendError"), ("gem_core.tools.mcp", "MCPConnectionError"),
    ("gem_core.multiagent", "UserSimulatorError"), ("gem_core.multiagent", "MultiAgentError"),
    ("gem_core.distributed._ray", "RayConnectionError"), ("gem_core.data", "DatasetUnavailable"),
    ("gem_core.sandbox", "ReducedIsolationWarning"), ("gem_core.sandbox.pool", "ReducedIsolationWarning"),
])
def test_the_old_import_paths_give_the_same_class(module, name):
    assert getattr(importlib.import_module(module), name) is getattr(_errors, name)


def test_warnings_share_a_base_and_stay_runtime_warnings():
    for cls in (_errors.ReducedIsolationWarning, _errors.TemplateRewriteWarning):
        assert issubclass(cls, _errors.GemWarning) and issubclass(cls, RuntimeWarning)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3", None])
def test_check_positive_int_refuses_with_the_usual_message(bad):
    with pytest.raises(_errors.InvalidArgument, match=rf"^size must be a positive int, got {re.escape(repr(bad))}$"):
        _errors.check_positive_int("size", bad)
    with pytest.raises(ValueError):  # callers that catch the built-in still do
        _errors.check_positive_int("size", bad)


def test_check_positive_int_accepts_and_returns():
    assert _errors.check_positive_int("size", 3) == 3
    assert _errors.check_positive_int("size", None, allow_none=True) is None
    with pytest.raises(_errors.InvalidArgument, match=r"^n must be a positive int or None, got 0$"):
        _errors.check_positive_int("n", 0, allow_none=True)


@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), True, "1"])
def test_check_positive_number(bad):
    with pytest.raises(_errors.InvalidArgument, match=r"^t must be a positive number, got "):
        _errors.check_positive_number("t", bad)
    assert _errors.check_positive_number("t", 0.25) == 0.25



def test_check_positive_int_raises_the_callers_class():
    with pytest.raises(_errors.RegistrationError, match=r"^x: max_turns must be a positive int or None, got 0$"):
        _errors.check_positive_int("x: max_turns", 0, allow_none=True, error=_errors.RegistrationError)


def _collect_sync_in_a_loop():
    import asyncio

    from gem_core.rl import collect_episodes_sync

    async def main():
        collect_episodes_sync("test:Echo", None, None, seeds=[0])

    asyncio.run(main())


def _bad_jsonl(tmp_path):
    from gem_core.data import read_local

    path = tmp_path / "rows.jsonl"
    path.write_text("[1, 2]\n")
    read_local(path)


def _tool_wrapper_with_a_non_tool():
    from gem_core.envs.toy import EchoEnv
    from gem_core.tools.wrapper import ToolEnvWrapper

    ToolEnvWrapper(EchoEnv(), [object()])


def _mcp_tool_with_string_args():
    from gem_core.tools.mcp import MCPTool

    MCPTool(command="server", args="--flag")


def _seccomp_bad_errno():
    from gem_core.sandbox.seccomp import build_filter

    build_filter(errno=0)


def _echo_with_bool_length():
    from gem_core.envs.toy import EchoEnv

    EchoEnv(word_length=True)


def _code_tests_field_unrecognised():
    from gem_core.grading.code import parse_tests

    parse_tests(42)


def _qa_references_of_a_bad_type():
    from gem_core.grading.qa import as_references

    as_references({"a": 1})


@pytest.mark.parametrize(
    ("call", "cls", "builtin", "message"),
    [
        (_collect_sync_in_a_loop, _errors.UsageError, RuntimeError, "inside a running event loop"),
        (_bad_jsonl, _errors.InvalidArgument, ValueError, "expected one JSON object"),
        (_tool_wrapper_with_a_non_tool, _errors.InvalidArgumentType, TypeError, "expects gem_core.tools.Tool"),
        (_mcp_tool_with_string_args, _errors.InvalidArgumentType, TypeError, "args must be a list of strings"),
        (_seccomp_bad_errno, _errors.InvalidArgument, ValueError, r"errno=\.\.\.\) must be an errno"),
        (_echo_with_bool_length, _errors.InvalidArgument, ValueError, "word_length must be a positive int, got True"),
        (_code_tests_field_unrecognised, _errors.InvalidArgument, ValueError, "unrecognised tests field"),
        (_qa_references_of_a_bad_type, _errors.InvalidArgumentType, TypeError, "QA references must be"),
    ],
    ids=lambda v: getattr(v, "__name__", None) if callable(v) else None,
)
def test_bad_user_input_raises_the_hierarchys_class(call, cls, builtin, message, tmp_path):
    args = (tmp_path,) if call is _bad_jsonl else ()
    with pytest.raises(cls, match=message) as info:
        call(*args)
    assert isinstance(info.value, builtin)


def test_import_optional_returns_the_module_or_names_the_pip_extra(monkeypatch):
    import json

    assert _errors.import_optional("json") is json
    monkeypatch.setitem(__import__("sys").modules, "gem_core_absent_dep", None)
    with pytest.raises(_errors.DependencyNotInstalled, match=rf"for the tests\. Install it with: {re.escape(_errors.install_command('x'))}$") as info:
        _errors.import_optional("gem_core_absent_dep", extra="x", purpose="the tests")
    assert isinstance(info.value, ImportError) and isinstance(info.value.__cause__, ImportError)
