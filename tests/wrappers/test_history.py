"""Tests for gem_core.wrappers.history: the history formats, limits and safe action rendering."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gem_core
from gem_core.errors import InvalidArgument
from gem_core.wrappers import HISTORY_FORMATS, HistoryWrapper
from gem_core.wrappers.history import render_action
from tests.testing_env import GenericTestEnv


def _instr(env, seed, options):
    env.t = 0
    return "Solve the task.", {"level": 1}


class SummaryEnv(GenericTestEnv):
    """Reports its progress through `state_summary`."""

    def state_summary(self) -> str:
        return f"{self.t} step(s) taken"


def _env(fmt, max_history=None, env_cls=GenericTestEnv, episode_len=100, **kwargs):
    return HistoryWrapper(
        env_cls(reset_fn=_instr, episode_len=episode_len),
        format=fmt,
        max_history=max_history,
        **kwargs,
    )


def _play(env, actions):
    obs, info = env.reset(seed=0)
    for action in actions:
        obs = env.step(action)[0]
    return obs


def test_formats_are_the_fixed_names():
    assert HISTORY_FORMATS == ("last", "concat", "concat_with_action", "chat", "summary")


def test_last_is_the_identity_and_stores_nothing():
    marker = {"text": "board", "images": []}
    env = HistoryWrapper(
        GenericTestEnv(step_fn=lambda e, a: (marker, 0.0, False, False, {})), format="last"
    )
    env.reset()
    assert env.step("a")[0] is marker
    assert env.history == () and env.turn_count == 1


def test_reset_returns_the_instruction_and_passes_info_through():
    for fmt in HISTORY_FORMATS:
        obs, info = _env(fmt).reset(seed=0)
        assert info == {"level": 1}
        expected = {
            "chat": [{"role": "user", "content": "Solve the task."}],
            "concat_with_action": "[Environment]\nSolve the task.",
        }.get(fmt, "Solve the task.")
        assert obs == expected


def test_concat():
    assert _play(_env("concat"), ["x", "y"]) == "Solve the task.\n\nobs 1\n\nobs 2"


def test_concat_with_action():
    assert _play(_env("concat_with_action"), ["x", None]) == (
        "[Environment]\nSolve the task.\n\n"
        "[Agent]\nx\n\n[Environment]\nobs 1\n\n"
        "[Agent]\nNone\n\n[Environment]\nobs 2"
    )


def test_chat():
    env = _env("chat")
    messages = _play(env, ["x", b"y"])
    assert messages == [
        {"role": "user", "content": "Solve the task."},
        {"role": "assistant", "content": "x"},
        {"role": "user", "content": "obs 1"},
        {"role": "assistant", "content": "b'y'"},
        {"role": "user", "content": "obs 2"},
    ]
    messages.append({"role": "assistant", "content": "mutated"})
    assert len(env.step("z")[0]) == 7, "the returned list must be a fresh copy"


def test_summary_uses_the_env_summary():
    env = _env("summary", env_cls=SummaryEnv)
    assert _play(env, ["x", "y"]) == (
        "Solve the task.\n\n[Summary of the episode so far]\n2 step(s) taken\n\n[Latest observation]\nobs 2"
    )


def test_summary_is_forwarded_through_the_make_stack():
    env = HistoryWrapper(
        gem_core.make(gem_core.EnvSpec("test:Summary-v0", entry_point=SummaryEnv, max_turns=9)),
        format="summary",
    )
    env.reset(seed=0)
    assert "[Summary of the episode so far]\n1 step(s) taken" in env.step("a")[0]


def test_summary_falls_back_to_the_last_turns():
    env = _env("summary")
    assert _play(env, ["a1", "a2", "a3", "a4", "a5"]) == (
        "Solve the task.\n\n[Recent turns]\n[... 2 earlier turns omitted ...]\n\n"
        "[Agent]\na3\n\n[Environment]\nobs 3\n\n"
        "[Agent]\na4\n\n[Environment]\nobs 4\n\n"
        "[Agent]\na5\n\n[Environment]\nobs 5"
    )
    assert (
        _play(_env("summary", max_history=1), ["a1"])
        == "Solve the task.\n\n[Recent turns]\n[Agent]\na1\n\n[Environment]\nobs 1"
    )


def test_summary_rejects_a_non_str_summary():
    class BadSummary(GenericTestEnv):
        def state_summary(self):
            return ["not", "text"]

    env = _env("summary", env_cls=BadSummary)
    env.reset()
    with pytest.raises(TypeError, match=r"state_summary\(\) returned list; expected str or None"):
        env.step("a")


def test_max_history_keeps_the_instruction():
    assert _play(_env("concat", max_history=2), ["a", "b", "c", "d"]) == (
        "Solve the task.\n\n[... 2 earlier turns omitted ...]\n\nobs 3\n\nobs 4"
    )
    assert _play(_env("concat_with_action", max_history=1), ["a", "b"]) == (
        "[Environment]\nSolve the task.\n\n[... 1 earlier turn omitted ...]\n\n[Agent]\nb\n\n[Environment]\nobs 2"
    )
    assert _play(_env("chat", max_history=1), ["a", "b", "c"]) == [
        {"role": "user", "content": "Solve the task."},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": "obs 3"},
    ]


def test_reset_clears_the_history():
    env = _env("concat")
    _play(env, ["a", "b"])
    assert env.reset()[0] == "Solve the task." and env.history == () and env.turn_count == 0
    assert env.step("c")[0] == "Solve the task.\n\nobs 1"
    assert env.history == (("c", "obs 1"),) and env.instruction == "Solve the task."


def test_dict_observations_render_their_text():
    step = lambda e, a: ({"text": "see image", "images": [b"png"]}, 0.0, False, False, {})  # noqa: E731
    env = HistoryWrapper(GenericTestEnv(reset_fn=_instr, step_fn=step), format="concat")
    assert _play(env, ["a"]) == "Solve the task.\n\nsee image"


class _HostileRepr:
    def __repr__(self):
        raise RuntimeError("no repr for you")


@pytest.mark.parametrize(
    ("action", "shown"),
    [
        (None, "None"),
        (123, "123"),
        (b"bytes", "b'bytes'"),
        ({}, "{}"),
        ([1] * 1000, ("[" + "1, " * 100)[:197] + "..."),
        (_HostileRepr(), "<_HostileRepr object with a failing repr>"),
        ("\ud800 surrogate", "\ud800 surrogate"),
        ("", ""),
    ],
)
def test_non_str_actions_render_safely(action, shown):
    assert render_action(action) == shown
    assert len(render_action(action)) <= 200
    for fmt in HISTORY_FORMATS:
        _play(_env(fmt), [action, action])  # never raises
    assert _play(_env("chat"), [action])[1]["content"] == shown


def test_action_repr_chars_cuts_the_repr():
    assert (
        _play(_env("concat_with_action", action_repr_chars=10), [list(range(100))]).count(
            "[0, 1, ..."
        )
        == 1
    )


def test_unknown_format_names_the_valid_ones():
    with pytest.raises(InvalidArgument) as info:
        HistoryWrapper(GenericTestEnv(), format="concat_with_actions")
    assert str(info.value) == (
        "unknown history format 'concat_with_actions'; valid formats: 'last', 'concat', "
        "'concat_with_action', 'chat', 'summary'. Did you mean 'concat_with_action'?"
    )
    with pytest.raises(
        InvalidArgument, match=r"^unknown history format None; valid formats: 'last'"
    ):
        HistoryWrapper(GenericTestEnv(), format=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "3"])
def test_bad_max_history(bad):
    with pytest.raises(
        InvalidArgument, match=f"max_history must be a positive int or None, got {bad!r}"
    ):
        HistoryWrapper(GenericTestEnv(), format="concat", max_history=bad)


def test_bad_action_repr_chars():
    with pytest.raises(InvalidArgument, match="action_repr_chars must be a positive int, got 0"):
        HistoryWrapper(GenericTestEnv(), action_repr_chars=0)


@pytest.mark.parametrize("fmt", HISTORY_FORMATS)
def test_every_format_passes_check_env(fmt):
    gem_core.check_env(
        HistoryWrapper(gem_core.make("toy:Echo-v0"), format=fmt, max_history=3), warn=False
    )


@settings(max_examples=60, deadline=None)
@given(
    actions=st.lists(
        st.one_of(st.text(max_size=20), st.none(), st.integers(), st.binary(max_size=5)),
        max_size=12,
    ),
    max_history=st.one_of(st.none(), st.integers(min_value=1, max_value=5)),
)
def test_chat_history_shape(actions, max_history):
    messages = _play(_env("chat", max_history=max_history), actions)
    kept = len(actions) if max_history is None else min(len(actions), max_history)
    assert len(messages) == 1 + 2 * kept
    assert messages[0] == {"role": "user", "content": "Solve the task."}
    assert [m["role"] for m in messages] == ["user"] + ["assistant", "user"] * kept
    assert all(isinstance(m["content"], str) for m in messages)
    if kept:
        assert messages[-1]["content"] == f"obs {len(actions)}"
        assert messages[-2]["content"] == render_action(actions[-1])
    text = _play(_env("concat_with_action", max_history=max_history), actions)
    assert text.startswith("[Environment]\nSolve the task.")
    assert ("earlier turn" in text) == (kept < len(actions))


def test_summary_format_on_a_registered_game():
    env_id = "game:GuessTheNumber-v0-easy"
    if env_id not in gem_core.registry:
        pytest.skip(f"{env_id} is not registered in this checkout")
    env = HistoryWrapper(gem_core.make(env_id), format="summary")
    instruction, _ = env.reset(seed=0)
    obs = env.step(env.sample_random_action())[0]
    assert obs.startswith(instruction + "\n\n[Summary of the episode so far]\n")
    assert obs.count("[Latest observation]") == 1
