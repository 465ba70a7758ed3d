"""The one episode loop: `run_episode` (token ids, both layouts) and `run_chat_episode` (chat
text) play the same env with the same scripted answers to the same outcome.

Each scenario is played three ways — token ids in the packed and in the per-turn layout,
and chat messages — by two policies that read one script (the text of each answer and
whether it was cut at the token limit, or a failure). The turn count, rewards, flags,
actions, end reason, error site, per-turn sampling seeds and env calls must agree: a
change to the shared loop (turn limit, seeds, timeouts, truncation, error flagging)
that reaches only one of the two entry points fails here.
"""

from __future__ import annotations

import asyncio

import pytest

import gem_core.rl as rl
from tests.testing_env import GenericTestEnv

LOOPS = ("packed", "per_turn", "chat")


class Script:
    """One answer per call, in order (the last one repeats).

    An item is the answer's text (a finished answer), ``("length", text)`` (cut at the
    token limit), ``("raise", message)`` (the backend fails), ``"hang"`` (never answers)
    or ``"malformed"`` (a result of the wrong shape).
    """

    def __init__(self, items):
        self.items = list(items)
        self.seeds: list[int | None] = []
        self.prompts: list[int] = []  # prompt length in tokens of each request

    def next(self, sampling):
        self.seeds.append(sampling.seed)
        item = self.items[min(len(self.seeds) - 1, len(self.items) - 1)]
        return ("stop", item) if isinstance(item, str) and item not in ("hang", "malformed") else item


class TokenScript(Script):
    """The script as a token-level `Policy` (the answer tokenized, EOS when finished)."""

    def __init__(self, tokenizer, items):
        super().__init__(items)
        self.tok = tokenizer

    async def generate(self, prompt_ids, sampling):
        item = self.next(sampling)
        self.prompts.append(len(prompt_ids))
        if item == "hang":
            await asyncio.sleep(30)
        if item == "malformed":
            return rl.GenerationResult([1, 2], [0.0], "stop")
        kind, text = item
        if kind == "raise":
            raise rl.PolicyError(text)
        ids = list(self.tok(text, add_special_tokens=False)["input_ids"])
        if kind == "stop":
            ids.append(self.tok.eos_token_id)
        return rl.GenerationResult(ids, [0.0] * len(ids), kind)


class ChatScript(Script):
    """The script as a `ChatPolicy` that acts like a server with a context of ``max_context``
    tokens: it counts the prompt with ``formatter`` (the same template the token loop
    uses), refuses a request that does not fit (`ContextLengthExceeded`) and reports usage."""

    def __init__(self, formatter, items):
        super().__init__(items)
        self.f = formatter

    async def chat(self, messages, sampling):
        item = self.next(sampling)
        prompt = len(self.f.encode(self.f.render(messages, add_generation_prompt=True)))
        self.prompts.append(prompt)
        if prompt + sampling.max_new_tokens > self.f.max_context:
            raise rl.ContextLengthExceeded(f"HTTP 400: {prompt} tokens do not fit")
        if item == "hang":
            await asyncio.sleep(30)
        if item == "malformed":
            return rl.ChatResult(None, "stop")
        kind, text = item
        if kind == "raise":
            raise rl.PolicyError(text)
        completion = len(self.f.encode(text)) + (kind == "stop")
        return rl.ChatResult(text, kind, prompt, completion)


def scripted_env(*, length=3, truncate_at=None, format_error_at=None, reset_error=False):
    """``start <seed>``, then ``obs <t>`` with reward ``t``; ends after ``length`` steps,
    truncates at step ``truncate_at``; the action ``boom`` raises in ``step``."""
    calls = []

    def reset(env, seed, options):
        calls.append(("reset", seed, options))
        if reset_error:
            raise OSError("no data")
        env.t = 0
        return f"start {seed}", {}

    def step(env, action):
        calls.append(("step", action))
        if action == "boom":
            raise ValueError("env exploded")
        env.t += 1
        done = env.t >= length
        info = {"format_error": env.t == format_error_at, "success": done}
        return f"obs {env.t}", float(env.t), done, env.t == truncate_at, info

    env = GenericTestEnv(reset_fn=reset, step_fn=step)
    env.calls = calls
    return env


def play(loop, tokenizer, items, *, env_kwargs=None, max_context=4096, **kwargs):
    """``(episode, policy, env)`` of one episode of `scripted_env` played by ``loop``."""
    env = scripted_env(**(env_kwargs or {}))
    formatter = rl.ChatFormatter(tokenizer, max_context=max_context, system_prompt="Be brief.")
    kwargs.setdefault("seed", 3)
    if loop == "chat":
        policy = ChatScript(formatter, items)
        coro = rl.run_chat_episode(
            env, policy, system_prompt=formatter.system_prompt, max_context=max_context, **kwargs
        )
    else:
        policy = TokenScript(tokenizer, items)
        coro = rl.run_episode(env, policy, formatter, layout=loop, **kwargs)
    return asyncio.run(coro), policy, env


def outcome(ep):
    """What the two loops must agree on (the error up to its site and exception type)."""
    return {
        "turns": ep.num_turns,
        "rewards": [t.reward for t in ep.turns],
        "response_truncated": [t.response_truncated for t in ep.turns],
        "format_error": [t.format_error for t in ep.turns],
        "observations": [t.observation for t in ep.turns],
        "actions": [t.action for t in ep.turns],
        "stepped": [bool(t.info) for t in ep.turns],
        "end_reason": ep.end_reason,
        "success": ep.success,
        "error": None if ep.error is None else ":".join(ep.error.split(":")[:2]),
        "final_observation": ep.final_observation,
    }


def play_all(tokenizer, items, **kwargs):
    """Play with every loop; assert they agree; return ``{loop: (episode, policy, env)}``."""
    runs = {loop: play(loop, tokenizer, items, **kwargs) for loop in LOOPS}
    expected = outcome(runs["packed"][0])
    for loop, (ep, policy, env) in runs.items():
        assert outcome(ep) == expected, f"{loop} differs from packed"
        assert policy.seeds == runs["packed"][1].seeds, f"{loop} sampled with other seeds"
        assert env.calls == runs["packed"][2].calls, f"{loop} called the env differently"
    return runs


@pytest.mark.parametrize(
    "items, kwargs, expected",
    [
        (["a"], {}, dict(turns=3, rewards=[1.0, 2.0, 3.0], end_reason="terminated", success=True)),
        (["a"], dict(max_turns=2), dict(turns=2, end_reason="max_turns", success=False)),
        (["a"], dict(env_kwargs=dict(truncate_at=2)), dict(turns=2, end_reason="env_truncated")),
        (
            ["a", ("length", "b c")],
            {},
            dict(turns=3, response_truncated=[False, True, True], end_reason="terminated"),
        ),
        (
            ["a", ("length", "b c")],
            dict(truncated_response="penalize", truncation_reward=-0.5),
            dict(turns=2, rewards=[1.0, -0.5], stepped=[True, False], end_reason="response_truncated"),
        ),
        (["a"], dict(env_kwargs=dict(format_error_at=2)), dict(format_error=[False, True, False])),
        (["a", ("raise", "server said no")], {}, dict(turns=1, error="policy: PolicyError")),
        (["a", "malformed"], {}, dict(turns=1, error="policy: PolicyError")),
        (["a", "boom"], {}, dict(turns=2, stepped=[True, False], error="env.step: ValueError")),
        (["a"], dict(env_kwargs=dict(reset_error=True)), dict(turns=0, error="env.reset: OSError")),
    ],
    ids=[
        "terminated", "max_turns", "env_truncated", "truncated_pass", "truncated_penalize",
        "format_error", "policy_error", "malformed_result", "env_step_error", "env_reset_error",
    ],
)
def test_both_loops_end_the_same(tiny_tokenizer, items, kwargs, expected):
    runs = play_all(tiny_tokenizer, items, **kwargs)
    got = outcome(runs["packed"][0])
    assert {k: got[k] for k in expected} == expected
    if got["error"] is not None:
        assert got["end_reason"] == "error"


def test_a_hung_backend_times_out_alike(tiny_tokenizer):
    runs = play_all(tiny_tokenizer, ["a", "hang"], generation_timeout=0.2)
    errors = {loop: ep.error for loop, (ep, _, _) in runs.items()}
    assert errors["packed"] == "policy: PolicyError: generate() timed out after 0.2 s", errors
    assert errors["chat"] == "policy: PolicyError: chat() timed out after 0.2 s", errors


def test_turns_sample_with_derived_seeds_alike(tiny_tokenizer):
    runs = play_all(tiny_tokenizer, ["a"], sampling=rl.SamplingParams(seed=7))
    assert runs["chat"][1].seeds == [rl.derive_seed(7, t) for t in range(3)]
    runs = play_all(tiny_tokenizer, ["a"])
    assert runs["chat"][1].seeds == [None, None, None]


def test_reset_options_reach_the_env_alike(tiny_tokenizer):
    runs = play_all(tiny_tokenizer, ["a"], seed=5, reset_options={"level": 2})
    assert runs["chat"][2].calls[0] == ("reset", 5, {"level": 2})


@pytest.mark.parametrize("fits", [0, 1, 2])
def test_context_overflow_ends_alike(tiny_tokenizer, fits):
    """With a budget that fits exactly ``fits`` turns, every loop plays ``fits`` turns and
    ends with ``"context"`` — the token loop checks the prompt itself, the chat loop from
    the previous usage or by the server's refusal."""
    max_new = 16
    sampling = rl.SamplingParams(max_new_tokens=max_new)
    _, policy, _ = play("per_turn", tiny_tokenizer, ["a"], sampling=sampling)
    prompts = policy.prompts  # the per-turn prompt of each of the 3 turns
    max_context = max_new + (prompts[fits - 1] if fits else prompts[0] - 1)
    runs = {
        loop: play(loop, tiny_tokenizer, ["a"], sampling=sampling, max_context=max_context)
        for loop in ("per_turn", "chat")
    }
    for loop, (ep, _, _) in runs.items():
        assert (ep.num_turns, ep.end_reason, ep.error) == (fits, "context", None), loop
        assert ep.final_observation == ("start 3" if fits == 0 else f"obs {fits}"), loop
    assert outcome(runs["per_turn"][0]) == outcome(runs["chat"][0])


def test_stats_say_what_each_loop_counted(tiny_tokenizer):
    runs = play_all(tiny_tokenizer, ["a"])
    packed, chat = runs["packed"][0], runs["chat"][0]
    assert set(packed.stats) == {"tokens_encoded", "generated_tokens", "wall_time_s"}
    assert packed.stats["generated_tokens"] == sum(len(t.response_ids) for t in packed.turns)
    assert set(chat.stats) == {"requests", "wall_time_s", "prompt_tokens", "generated_tokens"}
    assert chat.stats["requests"] == 3
    assert chat.stats["prompt_tokens"] == sum(runs["chat"][1].prompts)
    assert chat.layout == "per_turn" and all(t.response_ids == [] for t in chat.turns)


@pytest.mark.parametrize("layout", ["packed", "per_turn"])
def test_token_conversation_rebuilds_run_episodes_rows(tiny_tokenizer, layout):
    # TokenConversation is the token state run_episode builds prompts with: replaying the
    # episode's observations and generated ids through it gives the same per-turn prompt ids
    # (and, packed, the episode's whole token row), so a trainer's own loop built on it is
    # token-exact by construction.
    import gem_core
    from gem_core.errors import InvalidArgument

    env = gem_core.make("game:GuessTheNumber-v0-easy")
    policy = TokenScript(tiny_tokenizer, [r"\boxed{5}", r"\boxed{2}", r"\boxed{8}", r"\boxed{9}"])
    formatter = rl.ChatFormatter(tiny_tokenizer)
    ep = asyncio.run(rl.run_episode(env, policy, formatter, seed=3, layout=layout))
    env.close()
    assert ep.num_turns >= 2 and ep.error is None
    conv = rl.TokenConversation(formatter, layout)
    for turn in ep.turns:
        delta, starts = conv.add_observation(turn.observation)
        assert (delta, starts) == (turn.prompt_ids, turn.starts_sample)
        conv.add_response(turn.response_ids)
    if layout == "packed":
        assert conv.prompt_ids == ep.token_ids()
    with pytest.raises(InvalidArgument, match="layout must be one of"):
        rl.TokenConversation(formatter, "chat")
