"""`ChatFormatter`: extra chat-template arguments (``template_kwargs``)."""

from __future__ import annotations

import asyncio

import pytest

import gem_core.rl as rl
from gem_core.errors import InvalidArgument
from gem_core.rl.testing import ScriptedPolicy
from tests.testing_env import GenericTestEnv

# ChatML whose generation prompt opens an empty <think> block when the caller passes
# enable_thinking=False (what Qwen3-style templates do).
THINK_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}"
    "{{ '<think>\n\n</think>\n\n' }}{% endif %}{% endif %}"
)

HELLO = [{"role": "user", "content": "hello"}]


def test_template_kwargs_reach_the_chat_template(tiny_tokenizer):
    plain = rl.ChatFormatter(tiny_tokenizer, chat_template=THINK_TEMPLATE)
    kwargs = {"enable_thinking": False}
    quiet = rl.ChatFormatter(tiny_tokenizer, chat_template=THINK_TEMPLATE, template_kwargs=kwargs)
    kwargs["enable_thinking"] = True  # the formatter keeps its own copy
    assert "<think>" not in plain.render(HELLO, add_generation_prompt=True)
    assert quiet.render(HELLO, add_generation_prompt=True).endswith(
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert quiet.template_kwargs == {"enable_thinking": False}
    assert plain.template_kwargs == {}
    # Without the generation prompt the template ignores it: history renders unchanged.
    assert quiet.render(HELLO, add_generation_prompt=False) == plain.render(
        HELLO, add_generation_prompt=False
    )


def test_template_kwargs_shape_every_prompt_of_an_episode(tiny_tokenizer):
    formatter = rl.ChatFormatter(
        tiny_tokenizer, chat_template=THINK_TEMPLATE, template_kwargs={"enable_thinking": False}
    )
    prompts = []
    eos = tiny_tokenizer.eos_token_id

    def respond(prompt_ids, sampling):
        prompts.append(tiny_tokenizer.decode(prompt_ids))
        return tiny_tokenizer("ok", add_special_tokens=False)["input_ids"] + [eos]

    env = GenericTestEnv(episode_len=2)
    policy = ScriptedPolicy(respond, stop_token_ids=(eos,))
    # per_turn: this template's history has no <think> block where the generation prompt
    # had one, which the packed layout would (rightly) flag as a template rewrite.
    ep = asyncio.run(rl.run_episode(env, policy, formatter, layout="per_turn"))
    assert ep.error is None and ep.num_turns == 2
    assert all(p.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n") for p in prompts)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (["enable_thinking"], "template_kwargs must be a mapping of str keys, got list"),
        ({1: True}, "template_kwargs must be a mapping of str keys, got a key 1"),
        (
            {"tokenize": True},
            "template_kwargs may not set 'tokenize'.*ChatFormatter sets it itself",
        ),
        (
            {"chat_template": "x"},
            "template_kwargs may not set 'chat_template'.*pass chat_template=",
        ),
    ],
)
def test_bad_template_kwargs_are_refused(tiny_tokenizer, kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        rl.ChatFormatter(tiny_tokenizer, template_kwargs=kwargs)
