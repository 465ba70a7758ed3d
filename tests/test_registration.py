"""Tests for gem_core.registration: ids, register/make, the make stack, errors and plugins."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import gem_core
from gem_core import registration
from gem_core.checker import PassiveEnvChecker
from gem_core.core import Wrapper
from gem_core.errors import (
    DependencyNotInstalled,
    EnvConstructionError,
    InvalidArgument,
    InvalidKwarg,
    NameNotFound,
    RegistrationError,
    ResetNeeded,
    VersionNotFound,
    install_command,
)
from gem_core.registration import EnvSpec, WrapperSpec, parse_env_id
from gem_core.wrappers import OrderEnforcing, TimeLimit
from tests.testing_env import GenericTestEnv

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def temp_ids() -> Iterator[list[str]]:
    """Ids registered by a test; removed from the registry afterwards."""
    ids: list[str] = []
    yield ids
    for env_id in ids:
        dict.pop(gem_core.registry, env_id, None)


def _register(ids: list[str], env_id: str, entry_point=GenericTestEnv, **kwargs) -> EnvSpec:
    spec = gem_core.register(env_id, entry_point, **kwargs)
    ids.append(env_id)
    return spec


class _Outer(Wrapper):
    pass


class _Outermost(Wrapper):
    pass


def _layers(env) -> list[type]:
    out = []
    while True:
        out.append(type(env))
        if not isinstance(env, Wrapper):
            return out
        env = env.env


# --- ids -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("env_id", "parts"),
    [
        ("rg:letter_counting", ("rg", "letter_counting", None, None)),
        ("logic:RuleTaker-d0", ("logic", "RuleTaker-d0", None, None)),
        ("game:GuessTheNumber-v0-easy", ("game", "GuessTheNumber", 0, "easy")),
        ("game:GuessTheNumber-v0", ("game", "GuessTheNumber", 0, None)),
        ("math:GSM8K", ("math", "GSM8K", None, None)),
        ("toy:Echo-v12", ("toy", "Echo", 12, None)),
        ("game:Sudoku-v0-4x4-hard", ("game", "Sudoku", 0, "4x4-hard")),
        ("NoCategory-v1", (None, "NoCategory", 1, None)),
        ("qa:HotpotQA.dev", ("qa", "HotpotQA.dev", None, None)),
    ],
)
def test_parse_env_id(env_id, parts):
    assert parse_env_id(env_id) == parts


@pytest.mark.parametrize(
    "env_id",
    [
        "",
        "game:",
        ":Name-v0",
        "bad id",
        "a:b:c",
        "game:Name-v0-",
        "game:-v0",
        "game:Name-",
        "game:A--B",
        "game:Name-v0--x",
    ],
)
def test_parse_env_id_rejects_malformed_ids(env_id):
    with pytest.raises(
        RegistrationError, match=r"malformed env id .*expected 'category:Name-vN\[-variant\]'"
    ):
        parse_env_id(env_id)


def test_parse_env_id_rejects_overlong_ids_fast():
    with pytest.raises(RegistrationError, match="is 25001 characters long; ids have at most 200"):
        parse_env_id("a-v1-" * 5000 + "-")  # would backtrack quadratically in the regex


def test_parse_env_id_rejects_non_str():
    with pytest.raises(RegistrationError, match="env id must be a str, got int"):
        parse_env_id(3)  # type: ignore[arg-type]


# --- register ------------------------------------------------------------------------
def test_register_then_make(temp_ids):
    spec = _register(
        temp_ids, "test:Generic-v0", kwargs={"episode_len": 2}, description="a test env"
    )
    assert gem_core.spec("test:Generic-v0") is spec and gem_core.registry["test:Generic-v0"] is spec
    env = gem_core.make("test:Generic-v0")
    assert env.unwrapped.episode_len == 2
    assert env.spec.id == "test:Generic-v0" and env.spec.kwargs == {"episode_len": 2}


def test_register_with_a_string_entry_point_imports_lazily(temp_ids):
    _register(temp_ids, "test:Lazy-v0", "tests.testing_env:GenericTestEnv")
    assert isinstance(gem_core.make("test:Lazy-v0").unwrapped, GenericTestEnv)


def test_duplicate_register_raises_and_override_replaces(temp_ids):
    _register(temp_ids, "test:Dup-v0")
    with pytest.raises(
        RegistrationError, match=r"env id 'test:Dup-v0' is already registered; pass override=True"
    ):
        gem_core.register("test:Dup-v0", GenericTestEnv)
    spec = gem_core.register("test:Dup-v0", GenericTestEnv, max_turns=3, override=True)
    assert gem_core.spec("test:Dup-v0") is spec and spec.max_turns == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"entry_point": "no_colon"},
            "entry point 'no_colon' is malformed: expected 'package.module:Attr'",
        ),
        ({"entry_point": 3}, "entry_point must be 'module:Attr' or a callable, got int"),
        ({"max_turns": 0}, "max_turns must be a positive int or None, got 0"),
        ({"max_turns": True}, "max_turns must be a positive int or None, got True"),
        ({"id": "bad id"}, "malformed env id 'bad id'"),
    ],
)
def test_register_rejects_bad_specs(temp_ids, kwargs, message):
    args = {"id": "test:Bad-v0", "entry_point": GenericTestEnv, **kwargs}
    with pytest.raises(RegistrationError, match=message):
        gem_core.register(args.pop("id"), args.pop("entry_point"), **args)
    assert "test:Bad-v0" not in gem_core.registry


def test_spec_parts_are_parsed(temp_ids):
    spec = _register(temp_ids, "test:Parts-v3-hard")
    assert (spec.category, spec.name, spec.version, spec.variant, spec.family) == (
        "test",
        "Parts",
        3,
        "hard",
        "test",
    )


# --- unknown ids ---------------------------------------------------------------------
def test_unknown_name_suggests_close_ids():
    with pytest.raises(NameNotFound) as info:
        gem_core.make("toy:Ecoh-v0")
    assert str(info.value).startswith(
        "no env registered with id 'toy:Ecoh-v0'. Did you mean: toy:Echo-v0? "
        "Run `gem list` or gem_core.pprint_registry() to see every id. Looked up in pid "
    )


def test_unknown_name_without_close_ids_has_no_hint():
    with pytest.raises(
        NameNotFound, match=r"^no env registered with id 'zzz:Qqqqq-v9'\. Run `gem list`"
    ):
        gem_core.spec("zzz:Qqqqq-v9")


def test_unknown_version_lists_the_versions(temp_ids):
    _register(temp_ids, "test:Ver-v0")
    _register(temp_ids, "test:Ver-v2")
    with pytest.raises(VersionNotFound) as info:
        gem_core.make("test:Ver-v1")
    assert str(info.value) == (
        "env 'test:Ver-v1' has no version 1; available versions of test:Ver: [0, 2]. "
        "Registered: test:Ver-v0, test:Ver-v2."
    )


def test_unknown_variant_of_a_known_version_is_not_a_version_error(temp_ids):
    _register(temp_ids, "test:Var-v0-easy")
    _register(temp_ids, "test:Var-v0-hard")
    with pytest.raises(NameNotFound) as info:
        gem_core.make("test:Var-v0-medium")
    assert not isinstance(info.value, VersionNotFound)
    assert str(info.value) == (
        "env 'test:Var-v0-medium' is not registered: test:Var-v0 has no variant 'medium'. "
        "Registered: test:Var-v0-easy, test:Var-v0-hard."
    )
    with pytest.raises(
        NameNotFound, match="test:Var-v0 has no plain \\(variant-less\\) registration"
    ):
        gem_core.make("test:Var-v0")


def test_unknown_id_is_a_key_error():
    with pytest.raises(KeyError):
        gem_core.spec("toy:Nope-v0")


def test_spec_rejects_non_str():
    with pytest.raises(NameNotFound, match="env id must be a str, got int: 5"):
        gem_core.spec(5)  # type: ignore[arg-type]


# --- make errors ---------------------------------------------------------------------
def test_invalid_kwarg_names_env_and_kwarg():
    with pytest.raises(InvalidKwarg) as info:
        gem_core.make("toy:Echo-v0", word_lenght=3)
    assert str(info.value) == (
        "env 'toy:Echo-v0' got unknown keyword argument(s) 'word_lenght'. "
        "It accepts: format_penalty, word_length (and make()'s max_turns, disable_env_checker, "
        "wrappers). did you mean 'word_length' for 'word_lenght'?"
    )


@pytest.mark.parametrize(
    ("env_id", "kwarg", "hint"),
    [
        # make()'s own argument, for an env whose constructor does not take it
        ("toy:Echo-v0", "max_turn", "did you mean 'max_turns' for 'max_turn'?"),
        # a constructor taking **kwargs up to a base class that refuses the name
        ("game:GuessTheNumber-v0-easy", "max_turn", "did you mean 'max_turns' for 'max_turn'?"),
        ("game:GuessTheNumber-v0-easy", "min_numbr", "did you mean 'min_number' for 'min_numbr'?"),
    ],
)
def test_unknown_kwargs_get_did_you_mean(env_id, kwarg, hint):
    with pytest.raises(InvalidKwarg, match=f"got unknown keyword argument.*'{kwarg}'") as info:
        gem_core.make(env_id, **{kwarg: 3})
    assert hint in str(info.value) and env_id in str(info.value)


def test_a_type_error_inside_a_constructor_is_not_taken_for_a_bad_kwarg(temp_ids):
    def factory(**kwargs):
        return dict(**{"x": 1}, x=2)  # TypeError, but not about the caller's kwargs

    _register(temp_ids, "test:TypeErr-v0", factory)
    with pytest.raises(EnvConstructionError, match="TypeError"):
        gem_core.make("test:TypeErr-v0", y=1)


@pytest.mark.parametrize(
    ("env_id", "message"),
    [
        ("NoCategory-v1", "has no category: register ids as 'category:Name-vN\\[-variant\\]'"),
        ("Plain", "has no category"),
        ("test:Zero-v01", "the version must be written without leading zeros \\(-v1\\)"),
        ("test:Zero-v00-easy", "without leading zeros \\(-v0\\)"),
        ("test:bad id-v0", "malformed env id"),
    ],
)
def test_register_validates_ids_as_documented(temp_ids, env_id, message):
    with pytest.raises(RegistrationError, match=message):
        gem_core.register(env_id, GenericTestEnv)
    assert env_id not in gem_core.registry
    # Lookup still parses such ids (and says they are not registered).
    with pytest.raises(NameNotFound):
        gem_core.spec(env_id)


def test_register_accepts_the_documented_forms(temp_ids):
    for env_id in ("test:Form-v0", "test:Form-v10-hard-x", "test:no_version", "test:Form-d0"):
        _register(temp_ids, env_id)


def test_failing_constructor_names_id_and_kwargs_and_chains_the_cause(temp_ids):
    def fails(word_length: int = 5):
        raise ValueError(f"word_length must be a positive int, got {word_length!r}")

    _register(temp_ids, "test:Fails-v0", fails)
    with pytest.raises(EnvConstructionError) as info:
        gem_core.make("test:Fails-v0", word_length=0)
    assert str(info.value) == (
        "constructing env 'test:Fails-v0' with kwargs {'word_length': 0} failed: "
        "ValueError: word_length must be a positive int, got 0"
    )
    assert isinstance(info.value.__cause__, ValueError)


def test_a_builtin_env_refusing_an_argument_raises_invalid_argument_with_a_note():
    with pytest.raises(InvalidArgument, match=r"^word_length must be a positive int, got 0\n") as info:
        gem_core.make("toy:Echo-v0", word_length=0)
    assert info.value.__notes__ == ["(while making env 'toy:Echo-v0' with kwargs {'word_length': 0})"]


def test_gem_errors_from_a_constructor_pass_through_with_a_note(temp_ids):
    def needs_extra(**kwargs):
        raise DependencyNotInstalled("sympy", extra="math")

    _register(temp_ids, "test:NeedsExtra-v0", needs_extra, kwargs={"level": 1})
    with pytest.raises(DependencyNotInstalled, match=re.escape(install_command("math"))) as info:
        gem_core.make("test:NeedsExtra-v0")
    assert info.value.__notes__ == [
        "(while making env 'test:NeedsExtra-v0' with kwargs {'level': 1})"
    ]


def test_unimportable_entry_point_is_a_construction_error(temp_ids):
    _register(temp_ids, "test:Missing-v0", "gem_core_no_such_module:Env")
    with pytest.raises(
        EnvConstructionError,
        match=r"could not import 'gem_core_no_such_module:Env' for env 'test:Missing-v0'",
    ) as info:
        gem_core.make("test:Missing-v0")
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_entry_point_without_the_attribute(temp_ids):
    _register(temp_ids, "test:NoAttr-v0", "tests.testing_env:NoSuchEnv")
    with pytest.raises(
        RegistrationError, match="module 'tests.testing_env' has no attribute 'NoSuchEnv'"
    ):
        gem_core.make("test:NoAttr-v0")


def test_entry_point_returning_a_non_env(temp_ids):
    _register(temp_ids, "test:NotEnv-v0", lambda: object())
    with pytest.raises(
        EnvConstructionError,
        match="entry point of 'test:NotEnv-v0' returned object, not a gem_core.Env",
    ):
        gem_core.make("test:NotEnv-v0")


# --- the make stack ------------------------------------------------------------------
def test_make_stack_order_is_exact(temp_ids):
    _register(temp_ids, "test:Stack-v0", max_turns=5, wrappers=[WrapperSpec(_Outer)])
    env = gem_core.make("test:Stack-v0", wrappers=[_Outermost])
    assert _layers(env) == [
        _Outermost,
        _Outer,
        TimeLimit,
        OrderEnforcing,
        PassiveEnvChecker,
        GenericTestEnv,
    ]


def test_make_stack_without_optional_layers(temp_ids):
    _register(temp_ids, "test:Plain-v0", order_enforce=False, disable_env_checker=True)
    assert _layers(gem_core.make("test:Plain-v0")) == [GenericTestEnv]
    assert _layers(gem_core.make("test:Plain-v0", disable_env_checker=False)) == [
        PassiveEnvChecker,
        GenericTestEnv,
    ]


def test_spec_wrapper_kwargs_and_string_entry_points(temp_ids):
    _register(
        temp_ids,
        "test:Wrapped-v0",
        wrappers=[("gem_core.wrappers:HistoryWrapper", {"format": "chat"})],
    )
    env = gem_core.make("test:Wrapped-v0")
    obs, _ = env.reset(seed=0)
    assert type(env).__name__ == "HistoryWrapper" and obs[0]["role"] == "user"


def test_max_turns_truncates(temp_ids):
    _register(temp_ids, "test:Long-v0", kwargs={"episode_len": 100}, max_turns=3)
    env = gem_core.make("test:Long-v0")
    env.reset(seed=0)
    flags = [env.step("a")[2:5] for _ in range(3)]
    assert [(t, tr, info["turn"]) for t, tr, info in flags] == [
        (False, False, 1),
        (False, False, 2),
        (False, True, 3),
    ]
    with pytest.raises(ResetNeeded, match="step\\(\\) called after the episode of .* ended"):
        env.step("a")


def test_make_max_turns_overrides_the_spec(temp_ids):
    _register(temp_ids, "test:Over-v0", kwargs={"episode_len": 100}, max_turns=50)
    env = gem_core.make("test:Over-v0", max_turns=1)
    assert env.spec.max_turns == 1 and gem_core.spec("test:Over-v0").max_turns == 50
    env.reset()
    assert env.step("a")[3] is True


def test_step_before_reset_raises_reset_needed():
    env = gem_core.make("toy:Echo-v0")
    with pytest.raises(
        ResetNeeded, match=r"step\(\) called before reset\(\) on .*; call env.reset\(\) first"
    ):
        env.step("a")


def test_make_copies_spec_kwargs(temp_ids):
    _register(
        temp_ids,
        "test:Kw-v0",
        lambda cfg: GenericTestEnv(episode_len=cfg["n"]),
        kwargs={"cfg": {"n": 2}},
    )
    env = gem_core.make("test:Kw-v0")
    env.spec.kwargs["cfg"]["n"] = 99
    assert gem_core.spec("test:Kw-v0").kwargs == {"cfg": {"n": 2}}
    assert gem_core.make("test:Kw-v0", cfg={"n": 4}).unwrapped.episode_len == 4


def test_make_accepts_a_spec():
    spec = EnvSpec("test:Unregistered-v0", entry_point=GenericTestEnv, max_turns=2)
    env = gem_core.make(spec)
    assert _layers(env)[0] is TimeLimit and env.spec.id == "test:Unregistered-v0"
    assert isinstance(spec.make(), TimeLimit)


# --- listing -------------------------------------------------------------------------
def test_pprint_registry_groups_by_category(temp_ids, capsys):
    _register(temp_ids, "test:Listed-v0", description="listed here")
    text = gem_core.pprint_registry(print_output=False)
    assert "===== test =====" in text and "===== toy =====" in text
    assert any(
        line.startswith("test:Listed-v0") and line.endswith("listed here")
        for line in text.splitlines()
    )
    assert gem_core.pprint_registry(pattern="LISTED", print_output=False) == (
        "===== test =====\n" + f"{'test:Listed-v0':<44} listed here\n"
    )
    assert (
        gem_core.pprint_registry(pattern="no-such-env-anywhere", print_output=False)
        == "(no env matches)\n"
    )
    assert gem_core.pprint_registry(pattern="Listed") is None
    assert capsys.readouterr().out.startswith("===== test =====\ntest:Listed-v0")


# --- plugins and import cost (fresh processes) --------------------------------------
def _run(code: str, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), str(REPO_ROOT)])
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _write_dist(root: Path, name: str, entry_points: str) -> None:
    dist = root / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(entry_points)


def test_plugins_register_envs_and_a_broken_plugin_is_skipped_with_a_warning(tmp_path):
    (tmp_path / "goodplug.py").write_text(
        textwrap.dedent(
            """
            from gem_core import Env, register

            class GoodEnv(Env):
                def reset(self, *, seed=None, options=None):
                    super().reset(seed=seed)
                    return "good", {}

                def step(self, action):
                    return "done", 1.0, True, False, {"success": True}

            def register_envs():
                register("plug:Good-v0", "goodplug:GoodEnv", max_turns=2)
            """
        )
    )
    (tmp_path / "brokenplug.py").write_text(
        "def register_envs():\n    raise RuntimeError('plugin exploded')\n"
    )
    _write_dist(tmp_path, "goodplug", "[gem_core.envs]\ngood = goodplug:register_envs\n")
    _write_dist(
        tmp_path,
        "brokenplug",
        "[gem_core.envs]\nbroken = brokenplug:register_envs\nmissing = no_such_plugin_module:register\n",
    )
    result = _run(
        """
        import warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            import gem_core
            env = gem_core.make("plug:Good-v0")
        print(env.reset(seed=0)[0], env.step("x")[1])
        for w in caught:
            print(w.category.__name__, "|", w.message)
        """,
        extra_path=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "good 1.0"
    assert (
        "RuntimeWarning | gem_core: skipped env plugin 'broken' (brokenplug:register_envs) from "
        "brokenplug: RuntimeError: plugin exploded"
    ) in lines
    assert any(
        line.startswith(
            "RuntimeWarning | gem_core: skipped env plugin 'missing' (no_such_plugin_module:register) from brokenplug: ModuleNotFoundError"
        )
        for line in lines
    ), lines


def test_import_gem_core_does_not_import_numpy_or_heavy_packages():
    result = _run(
        """
        import sys
        import gem_core
        gem_core.registry["toy:Echo-v0"]
        heavy = sorted(m for m in ("numpy", "torch", "transformers", "reasoning_gym") if m in sys.modules)
        print(heavy)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", f"import gem_core imported {result.stdout.strip()}"


def test_registry_is_a_mapping_of_specs():
    assert "toy:Echo-v0" in gem_core.registry
    assert all(isinstance(s, EnvSpec) and s.id == i for i, s in gem_core.registry.items())
    assert registration.PLUGIN_GROUP == "gem_core.envs"


def _doc_block(text: str, caption: str) -> str:
    """The fenced block right after the line ``caption`` in a Markdown document."""
    at = text.index(f"\n{caption}\n")
    start = text.index("```", at)
    start = text.index("\n", start) + 1
    return text[start : text.index("\n```", start) + 1]


def test_the_plugin_how_to_example_builds_installs_and_registers(tmp_path):
    """docs/plugins.md's pyproject and module, built into a wheel and installed, give working ids."""
    doc = (REPO_ROOT / "docs" / "plugins.md").read_text()
    project = tmp_path / "gem-countdown"
    project.mkdir()
    (project / "pyproject.toml").write_text(_doc_block(doc, "`pyproject.toml`:"))
    (project / "gem_countdown.py").write_text(_doc_block(doc, "`gem_countdown.py`:"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"),
                            str(project)], capture_output=True, text=True, timeout=240)
    assert build.returncode == 0, build.stderr
    (wheel,) = (tmp_path / "dist").glob("gem_countdown-0.1.0-*.whl")
    site = tmp_path / "site"
    install = subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
                             capture_output=True, text=True, timeout=240)
    assert install.returncode == 0, install.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_ROOT)])}
    listed = subprocess.run([sys.executable, "-m", "gem_core.cli", "list", "countdown:*"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "countdown:Countdown-v0 " in listed.stdout and "countdown:Countdown-v0-long" in listed.stdout
    script = textwrap.dedent(
        """
        import gem_core
        env = gem_core.make("countdown:Countdown-v0")
        gem_core.check_env(env.unwrapped)
        obs, _ = env.reset(seed=1)
        n = env.unwrapped.current
        for k in range(n - 1, -1, -1):
            obs, reward, terminated, truncated, info = env.step(str(k))
        assert terminated and info["success"] and reward == 1.0, (obs, info)
        print("ok", gem_core.make("countdown:Countdown-v0-long").unwrapped.start_max)
        """
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert ran.returncode == 0 and ran.stdout.split() == ["ok", "9"], ran.stderr


class _BudgetEnv(GenericTestEnv):
    """An env that owns its turn budget (states it in its instructions)."""

    def __init__(self, max_turns: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.max_turns = max_turns


def test_pass_max_turns_states_the_limit_once(temp_ids):
    spec = _register(temp_ids, "test:Budget-v0", _BudgetEnv, max_turns=5, pass_max_turns=True,
                     kwargs={"episode_len": 9})
    assert spec.kwargs == {"episode_len": 9, "max_turns": 5} and spec.max_turns == 5
    env = gem_core.make("test:Budget-v0")
    assert env.unwrapped.max_turns == 5 and env.spec.max_turns == 5
    env = gem_core.make("test:Budget-v0", max_turns=2)  # both the TimeLimit and the constructor
    assert env.unwrapped.max_turns == 2 and env.spec.max_turns == 2
    assert env.unwrapped.spec.kwargs == {"episode_len": 9, "max_turns": 2}


def test_pass_max_turns_refuses_a_second_source(temp_ids):
    with pytest.raises(RegistrationError,
                       match=r"test:Budget2-v0: pass_max_turns=True takes the constructor's max_turns "
                             r"from register's max_turns, but kwargs also set it to 3; remove it from kwargs"):
        gem_core.register("test:Budget2-v0", _BudgetEnv, max_turns=5, pass_max_turns=True,
                          kwargs={"max_turns": 3})
    assert "test:Budget2-v0" not in gem_core.registry
