"""gem_core.compat.wrappers: get_wrapper_fns chains and the reference history layouts."""

from __future__ import annotations

import pytest

import gem_core.compat as gem
from gem_core.compat.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
from gem_core.compat.wrappers.observation_wrapper import ObservationWrapper
from gem_core.compat.wrappers.wrapper_factory import (
    TOKENIZER_REQUIRED,
    WRAPPER_FACTORY,
    UnknownWrapper,
    get_wrapper_fns,
)
from gem_core.errors import InvalidArgument

GUESS = "game:GuessTheNumber-v0-easy"


class FakeTokenizer:
    """apply_chat_template as 'role: content' lines plus a generation prompt."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        assert tokenize is False
        text = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")


def wrapped(names, **make_kwargs):
    env = gem.make(GUESS, seed=0, **make_kwargs)
    for fn in get_wrapper_fns(names, tokenizer=FakeTokenizer()):
        env = fn(env)
    return env


def test_reference_names_exist():
    for name in ("concat", "concat_with_action", "concat_chat", "concat_chat_on_reset",
                 "python_tool", "search_tool", "episode_tracking"):
        assert name in WRAPPER_FACTORY
    assert TOKENIZER_REQUIRED == ["concat_chat", "concat_chat_on_reset"]
    assert get_wrapper_fns("") == [] and get_wrapper_fns(None) == []


def test_concat_layout_and_forwarded_attributes():
    env = wrapped("concat")
    assert env.max_turns == 4 and "boxed" in env.get_task_suffix()  # attributes reach the env
    first, info = env.reset()
    assert first.endswith(info["suffix"])
    obs, _, _, _, info = env.step("\\boxed{3}")
    instruction = first[: -len(info["suffix"])]
    assert obs.startswith(instruction) and obs.endswith("\n" + info["suffix"])
    assert "\\boxed{3}" not in obs  # no actions in "concat"


def test_concat_with_action_interleaves_actions():
    env = wrapped("concat_with_action")
    env.reset()
    obs, *_ = env.step("\\boxed{3}")
    assert "\\boxed{3}\nTurn 1: you guessed 3" in obs


def test_concat_chat_renders_the_chat_template():
    env = wrapped("python_tool,concat_chat")
    obs, _ = env.reset()
    assert obs.startswith("<user>You are playing") and "<assistant>" in obs
    obs, *_ = env.step("compute <python>print(6*7)</python> and more")
    # the tool result is a "tool" message; the recorded action is cut at the end of the call
    assert "<assistant>compute <python>print(6*7)</python></assistant>" in obs
    assert "<tool>Code execution result: 42" in obs
    env.close()


def test_concat_chat_on_reset_templates_only_the_first_observation():
    env = wrapped("concat_chat_on_reset")
    obs, _ = env.reset()
    assert obs.startswith("<user>") and "<assistant>" in obs
    obs, *_ = env.step("\\boxed{2}")
    assert obs.startswith("<user>") and "\\boxed{2}\n" in obs


def test_max_history_length_keeps_the_instruction():
    env = ObservationWrapper(gem.make(GUESS, seed=0, max_turns=4), include_action=True,
                             include_chat_template=False, max_history_length=1)
    first, _ = env.reset()
    env.step("\\boxed{1}")
    obs, *_ = env.step("\\boxed{2}")
    assert obs.startswith(first[:40]) and "\\boxed{1}" not in obs and "\\boxed{2}" in obs


def test_episode_tracking_info_keys():
    env = wrapped("concat,episode_tracking")
    assert isinstance(env, EpisodeTrackingWrapper)
    _, info = env.reset()
    assert info["step_counter"] == 0 and info["prev_ep_step_counter"] == 0
    total = 0.0
    for k in range(1, 3):
        _, reward, *_, info = env.step("\\boxed{1}")
        total += reward
        assert info["step_counter"] == k and info["cumulative_rewards"] == pytest.approx(total)
    _, info = env.reset(1)  # the reference calls reset(seed) positionally
    assert info["prev_ep_step_counter"] == 2 and info["prev_ep_cumulative_rewards"] == pytest.approx(total)
    assert env.step_counter == 0


def test_bad_names_and_missing_tokenizer():
    with pytest.raises(UnknownWrapper) as e:
        get_wrapper_fns("concat,concat_chatt", tokenizer=FakeTokenizer())
    assert isinstance(e.value, KeyError) and "Did you mean 'concat_chat'" in str(e.value)
    with pytest.raises(InvalidArgument, match="needs tokenizer"):
        get_wrapper_fns("concat_chat")
    with pytest.raises(InvalidArgument, match="cannot both be True"):
        ObservationWrapper(gem.make(GUESS), include_chat_template=True,
                           apply_chat_template_on_reset=True, tokenizer=FakeTokenizer())
    with pytest.raises(InvalidArgument, match="needs include_action"):
        ObservationWrapper(gem.make(GUESS), include_action=False, tokenizer=FakeTokenizer())
