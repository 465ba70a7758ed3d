"""The rollout engine: token-exact layouts, template-rewrite detection, flags and errors."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import gem_core
import gem_core.rl as rl
from gem_core.errors import InvalidArgument, install_command
from gem_core.rl.testing import CHATML_TEMPLATE, ScriptedPolicy, TextPolicy
from tests.testing_env import GenericTestEnv

EASY = "game:GuessTheNumber-v0-easy"

# A ChatML template that drops <think>...</think> from every assistant message but the
# last one (what Qwen3-style templates do to earlier reasoning).
STRIP_THINK_TEMPLATE = (
    "{% for message in messages %}"
    "{% set content = message['content'] %}"
    "{% if message['role'] == 'assistant' and not loop.last %}"
    "{% set content = content.split('</think>')[-1] %}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + content + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class Recorder:
    """Wraps a policy and records every (prompt, result) pair."""

    def __init__(self, policy):
        self.policy = policy
        self.calls = []

    async def generate(self, prompt_ids, sampling):
        result = await self.policy.generate(prompt_ids, sampling)
        self.calls.append((list(prompt_ids), result))
        return result


def guesser(tokenizer, think=False):
    """Guess 1, 2, 3, ... (the number of assistant turns so far, plus one)."""

    def respond(prompt_text):
        k = prompt_text.count("<|im_start|>assistant")
        return (f"<think>turn {k}</think>" if think else "I guess ") + f"\\boxed{{{k}}}"

    return TextPolicy(tokenizer, respond)


def play(env_id, policy, formatter, **kwargs):
    env = gem_core.make(env_id, format_error="retry") if isinstance(env_id, str) else env_id
    try:
        return asyncio.run(rl.run_episode(env, policy, formatter, **kwargs))
    finally:
        env.close()


def chat_of(episode, formatter):
    """The chat messages of an episode, rebuilt from its turns."""
    stops = formatter.stop_token_ids
    observations = [t.observation for t in episode.turns]
    contents = []
    for t in episode.turns:
        body = (
            t.response_ids[:-1]
            if t.response_ids and t.response_ids[-1] in stops
            else t.response_ids
        )
        contents.append(formatter.decode(body))
    return observations, contents


def check_packed_exact(episode, recorder, formatter):
    """Every prompt the policy saw is a prefix of the sequence, responses sit verbatim
    where generated with mask 1, everything else has mask 0, and decoding equals the
    chat template's rendering."""
    assert episode.layout == "packed" and not episode.template_rewrite
    seq, mask = episode.token_ids(), episode.loss_mask()
    assert len(seq) == len(mask)
    expected_mask = np.zeros(len(seq), dtype=int)
    observations, contents = chat_of(episode, formatter)
    assert len(recorder.calls) == episode.num_turns
    for k, (prompt, result) in enumerate(recorder.calls):
        start, end = len(prompt), len(prompt) + len(result.token_ids)
        assert seq[:start] == prompt
        assert seq[start:end] == result.token_ids  # never re-tokenized
        expected_mask[start:end] = 1
        rendered = formatter.render(
            formatter.messages(observations[: k + 1], contents[:k]), add_generation_prompt=True
        )
        assert formatter.decode(seq[:start]) == rendered
    assert mask == expected_mask.tolist()
    full = formatter.render(formatter.messages(observations, contents), add_generation_prompt=False)
    text = formatter.decode(seq)
    assert full.startswith(text)
    last = episode.turns[-1]
    # Only the template's end-of-turn text after the last response is not in the sequence.
    assert full[len(text) :] == (
        "\n" if last.response_ids[-1] in formatter.stop_token_ids else "<|im_end|>\n"
    )


def test_packed_layout_is_token_exact_with_scripted_policy(tiny_tokenizer):
    formatter = rl.ChatFormatter(tiny_tokenizer, system_prompt="Play well.")
    rec = Recorder(guesser(tiny_tokenizer))
    with warnings.catch_warnings():
        warnings.simplefilter("error", rl.TemplateRewriteWarning)
        ep = play(EASY, rec, formatter, seed=3)
    assert ep.num_turns >= 2 and ep.error is None
    assert [t.action for t in ep.turns][:2] == ["I guess \\boxed{1}", "I guess \\boxed{2}"]
    assert ep.turns[0].starts_sample and not any(t.starts_sample for t in ep.turns[1:])
    check_packed_exact(ep, rec, formatter)
    # Packed: each turn encodes only its delta, so the total equals the sequence's prompt tokens.
    assert ep.stats["tokens_encoded"] == sum(len(t.prompt_ids) for t in ep.turns)


def test_packed_layout_is_token_exact_with_tiny_model(tiny_model):
    model, tokenizer = tiny_model
    policy = rl.TransformersPolicy(model, tokenizer)
    formatter = rl.ChatFormatter(tokenizer, max_context=2048)
    for seed in range(2):
        rec = Recorder(policy)
        sampling = rl.SamplingParams(temperature=1.0, max_new_tokens=8, seed=seed)
        ep = play(EASY, rec, formatter, seed=seed, sampling=sampling)
        assert ep.error is None and ep.num_turns == 4, ep.end_reason
        assert any(t.response_truncated for t in ep.turns)
        check_packed_exact(ep, rec, formatter)


def test_per_turn_layout_renders_full_history(tiny_tokenizer):
    formatter = rl.ChatFormatter(tiny_tokenizer)
    rec = Recorder(guesser(tiny_tokenizer))
    ep = play(EASY, rec, formatter, seed=5, layout="per_turn")
    assert ep.num_turns >= 2
    assert all(t.starts_sample for t in ep.turns) and len(ep.samples()) == ep.num_turns
    observations, contents = chat_of(ep, formatter)
    for k, (turn, (prompt, result)) in enumerate(zip(ep.turns, rec.calls, strict=True)):
        rendered = formatter.render(
            formatter.messages(observations[: k + 1], contents[:k]), add_generation_prompt=True
        )
        assert turn.prompt_ids == prompt == formatter.encode(rendered)
        assert turn.response_ids == result.token_ids
    with pytest.raises(ValueError, match="use Episode.samples"):
        ep.token_ids()
    # Per-turn re-encodes the whole history every turn.
    assert ep.stats["tokens_encoded"] == sum(len(t.prompt_ids) for t in ep.turns)


def test_template_rewrite_is_detected_and_falls_back(tiny_tokenizer):
    formatter = rl.ChatFormatter(tiny_tokenizer, chat_template=STRIP_THINK_TEMPLATE)
    rec = Recorder(guesser(tiny_tokenizer, think=True))
    with pytest.warns(rl.TemplateRewriteWarning, match="rewrites earlier turns"):
        ep = play(EASY, rec, formatter, seed=3)
    assert ep.num_turns >= 3 and ep.template_rewrite
    # Fallback: the turn restarts a sample from the full rendering, and the policy is
    # prompted with exactly the tokens stored in the sample.
    assert len(ep.samples()) == ep.num_turns
    observations, contents = chat_of(ep, formatter)
    for k, (turn, (prompt, _)) in enumerate(zip(ep.turns, rec.calls, strict=True)):
        assert turn.prompt_ids == prompt
        rendered = formatter.render(
            formatter.messages(observations[: k + 1], contents[:k]), add_generation_prompt=True
        )
        assert formatter.decode(prompt) == rendered
        if k:
            assert "<think>" not in formatter.decode(prompt).split("<|im_start|>assistant")[-2]

    # The same policy under the plain ChatML template: no rewrite, one packed sample.
    plain = rl.ChatFormatter(tiny_tokenizer, chat_template=CHATML_TEMPLATE)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rl.TemplateRewriteWarning)
        ep2 = play(EASY, guesser(tiny_tokenizer, think=True), plain, seed=3)
    assert not ep2.template_rewrite and len(ep2.samples()) == 1


def test_template_that_does_not_render_response_verbatim_is_detected(tiny_tokenizer):
    stripping = CHATML_TEMPLATE.replace("message['content']", "message['content'] | trim")
    formatter = rl.ChatFormatter(tiny_tokenizer, chat_template=stripping)
    policy = TextPolicy(tiny_tokenizer, lambda text: "\\boxed{2}   ")
    with pytest.warns(rl.TemplateRewriteWarning, match="verbatim"):
        ep = play(EASY, policy, formatter, seed=3)
    assert ep.template_rewrite


def _truncating_policy(tokenizer):
    ids = tokenizer("\\boxed{4} and more", add_special_tokens=False)["input_ids"]
    return ScriptedPolicy(lambda p, s: ids, stop_token_ids=(tokenizer.eos_token_id,))


def test_truncated_response_pass_and_penalize(tiny_tokenizer):
    formatter = rl.ChatFormatter(tiny_tokenizer)
    ep = play(EASY, _truncating_policy(tiny_tokenizer), formatter, seed=0, max_turns=2)
    assert all(t.response_truncated for t in ep.turns) and ep.num_turns >= 1
    assert ep.turns[0].info["parsed_action"] == "4"  # passed to the env as it is

    ep = play(
        EASY,
        _truncating_policy(tiny_tokenizer),
        formatter,
        seed=0,
        truncated_response="penalize",
        truncation_reward=-0.5,
    )
    assert ep.num_turns == 1 and ep.end_reason == "response_truncated" and ep.terminated
    assert ep.turns[0].reward == -0.5 and ep.turns[0].info == {}  # env not stepped
    with pytest.raises(InvalidArgument, match="truncated_response must be one of"):
        play(EASY, _truncating_policy(tiny_tokenizer), formatter, truncated_response="drop")


def test_context_overflow_ends_episode_truncated(tiny_tokenizer):
    policy = guesser(tiny_tokenizer)
    first = rl.ChatFormatter(tiny_tokenizer).encode(
        rl.ChatFormatter(tiny_tokenizer).render(
            [{"role": "user", "content": gem_core.make(EASY).reset(seed=1)[0]}],
            add_generation_prompt=True,
        )
    )
    formatter = rl.ChatFormatter(tiny_tokenizer, max_context=len(first) + 40)
    ep = play(EASY, policy, formatter, seed=1, sampling=rl.SamplingParams(max_new_tokens=16))
    assert ep.end_reason == "context" and ep.truncated and ep.context_truncated
    assert ep.num_turns == 1 and ep.final_observation  # the unshown observation is kept
    # A first prompt that does not fit: an episode with no turns, flagged, not dropped.
    tiny = rl.ChatFormatter(tiny_tokenizer, max_context=10)
    ep = play(EASY, policy, tiny, seed=1)
    assert ep.end_reason == "context" and ep.num_turns == 0 and ep.error is None


def test_max_turns_and_env_truncation(tiny_tokenizer):
    formatter = rl.ChatFormatter(tiny_tokenizer)
    wrong = TextPolicy(
        tiny_tokenizer, lambda text: "\\boxed{11}"
    )  # out of range: invalid, never wins
    ep = play(EASY, wrong, formatter, seed=0, max_turns=2)
    assert ep.end_reason == "max_turns" and ep.num_turns == 2 and ep.truncated
    ep = play(EASY, wrong, formatter, seed=0)
    assert ep.end_reason == "env_truncated" and ep.num_turns == 4 and not ep.success


def _obs_policy(tokenizer):
    """Answers '\\boxed{1}', but fails in different ways depending on the observation."""
    eos = tokenizer.eos_token_id
    ids = tokenizer("\\boxed{1}", add_special_tokens=False)["input_ids"] + [eos]

    async def generate(prompt_ids, sampling):
        text = tokenizer.decode(prompt_ids)
        if "start 5" in text:
            raise rl.PolicyError("server said no")
        if "start 6" in text:
            return rl.GenerationResult(ids, [0.0], "stop")  # malformed: too few logprobs
        if "start 7" in text:
            await asyncio.sleep(30)  # hung
        await asyncio.sleep(0.001)
        return rl.GenerationResult(list(ids), [0.0] * len(ids), "stop")

    policy = ScriptedPolicy(lambda p, s: ids)
    policy.generate = generate
    return policy


def test_backend_and_env_errors_flag_only_their_episode(tiny_tokenizer):
    def reset(env, seed, options):
        env.t = 0
        return f"start {seed}", {}

    def step(env, action):
        if env.seed_used == 4:
            raise ValueError("env exploded")
        env.t += 1
        return f"obs {env.t}", 1.0, env.t >= 2, False, {"success": env.t >= 2}

    class Env(GenericTestEnv):
        def reset(self, *, seed=None, options=None):
            self.seed_used = seed
            return super().reset(seed=seed, options=options)

    def factory():
        return Env(reset_fn=reset, step_fn=step)

    def bad_factory():
        raise RuntimeError("cannot build")

    formatter = rl.ChatFormatter(tiny_tokenizer)
    seeds = list(range(9))
    envs = [factory] * 8 + [bad_factory]
    episodes = rl.collect_episodes_sync(
        envs,
        _obs_policy(tiny_tokenizer),
        formatter,
        seeds=seeds,
        generation_timeout=0.3,
        concurrency=9,
    )
    by_seed = {ep.seed: ep for ep in episodes}
    assert [ep.seed for ep in episodes] == seeds
    for s in (0, 1, 2, 3):
        assert by_seed[s].error is None and by_seed[s].success and by_seed[s].num_turns == 2
    assert (
        by_seed[4].error.startswith("env.step: ValueError: env exploded")
        and by_seed[4].end_reason == "error"
    )
    assert by_seed[4].num_turns == 1
    assert by_seed[5].error == "policy: PolicyError: server said no" and by_seed[5].num_turns == 0
    assert by_seed[6].error.startswith("policy: PolicyError: malformed GenerationResult: need")
    assert by_seed[7].error == "policy: PolicyError: generate() timed out after 0.3 s"
    assert by_seed[8].error == "env.make: RuntimeError: cannot build"
    assert all(not ep.ok for ep in episodes[4:])


def test_env_reset_error_is_flagged(tiny_tokenizer):
    def reset(env, seed, options):
        raise OSError("no data")

    ep = play(
        GenericTestEnv(reset_fn=reset), guesser(tiny_tokenizer), rl.ChatFormatter(tiny_tokenizer)
    )
    assert ep.error == "env.reset: OSError: no data" and ep.num_turns == 0


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert (x.seed, x.env_id, x.end_reason, x.success, x.error) == (
            y.seed,
            y.env_id,
            y.end_reason,
            y.success,
            y.error,
        )
        assert x.num_turns == y.num_turns
        for s, t in zip(x.turns, y.turns, strict=True):
            assert (s.prompt_ids, s.response_ids, s.action, s.reward) == (
                t.prompt_ids,
                t.response_ids,
                t.action,
                t.reward,
            )
            np.testing.assert_allclose(s.response_logprobs, t.response_logprobs, atol=1e-4)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_concurrent_episodes_equal_sequential(tiny_model, temperature):
    model, tokenizer = tiny_model
    formatter = rl.ChatFormatter(tokenizer, max_context=2048)
    sampling = rl.SamplingParams(temperature=temperature, max_new_tokens=6, seed=123)
    kwargs = dict(
        seeds=[0, 1, 2, 3, 4, 5, 0, 1],
        sampling=sampling,
        env_kwargs={"format_error": "retry"},
        max_turns=3,
    )
    sequential = rl.collect_episodes_sync(
        "game:GuessTheNumber-v0-random",
        rl.TransformersPolicy(model, tokenizer),
        formatter,
        concurrency=1,
        **kwargs,
    )
    policy = rl.TransformersPolicy(model, tokenizer, batch_wait_s=0.01)
    concurrent = rl.collect_episodes_sync(
        "game:GuessTheNumber-v0-random", policy, formatter, concurrency=8, **kwargs
    )
    assert policy.num_batches < sum(ep.num_turns for ep in concurrent)  # requests were batched
    _assert_same(sequential, concurrent)
    assert all(ep.error is None and ep.num_turns == 3 for ep in concurrent)
    assert len({tuple(t.response_ids) for ep in concurrent for t in ep.turns}) > 3  # not degenerate
    if temperature:
        # Repeated env seeds (a GRPO group) sample differently; the group id is shared.
        assert concurrent[0].group_id == concurrent[6].group_id == "game:GuessTheNumber-v0-random/0"
        assert concurrent[0].turns[0].response_ids != concurrent[6].turns[0].response_ids


def test_training_batch_from_packed_and_per_turn_episodes(tiny_tokenizer):
    formatter = rl.ChatFormatter(tiny_tokenizer)
    packed = [play(EASY, guesser(tiny_tokenizer), formatter, seed=s) for s in (1, 2)]
    per_turn = [
        play(EASY, guesser(tiny_tokenizer), formatter, seed=s, layout="per_turn") for s in (1, 2)
    ]
    episodes = packed + per_turn
    for ep in episodes:
        for t in ep.turns:
            t.response_logprobs = [-0.5] * len(t.response_ids)
    adv = rl.compute_advantages(episodes, "rebn", gamma=0.9)
    batch = rl.build_training_batch(episodes, adv, pad_token_id=tiny_tokenizer.pad_token_id)
    n_rows = 2 + sum(ep.num_turns for ep in per_turn)
    assert batch.input_ids.shape[0] == n_rows == batch.num_samples
    assert (
        batch.episode_index.tolist()
        == [0, 1] + [2] * per_turn[0].num_turns + [3] * per_turn[1].num_turns
    )
    for row in range(2):
        ep = episodes[row]
        m = batch.lengths[row]
        assert batch.input_ids[row, :m].tolist() == ep.token_ids()
        assert batch.loss_mask[row, :m].tolist() == ep.loss_mask()
        assert (
            batch.attention_mask[row].sum() == m
            and (batch.input_ids[row, m:] == tiny_tokenizer.pad_token_id).all()
        )
        # Each turn's advantage sits on its generated tokens only.
        pos = 0
        for t, a in zip(ep.turns, adv[row], strict=True):
            pos += len(t.prompt_ids)
            np.testing.assert_allclose(
                batch.advantages[row, pos : pos + len(t.response_ids)], a, rtol=1e-6
            )
            pos += len(t.response_ids)
    assert (batch.advantages[batch.loss_mask == 0] == 0).all()
    assert (batch.old_logprobs[batch.loss_mask == 1] == -0.5).all() and (
        batch.old_logprobs[batch.loss_mask == 0] == 0
    ).all()
    assert batch.num_loss_tokens == sum(t.num_response_tokens for ep in episodes for t in ep.turns)
    sub = batch.select([0, 2])
    assert sub.input_ids.shape == (2, max(batch.lengths[0], batch.lengths[2]))
    with pytest.raises(InvalidArgument, match="turns but 1 advantages"):
        rl.build_training_batch(
            episodes[:1], [np.zeros(1)] if episodes[0].num_turns != 1 else [np.zeros(2)]
        )


def test_import_does_not_load_torch_or_rl():
    code = (
        "import sys, gem_core; assert 'gem_core.rl' not in sys.modules; "
        "import gem_core.rl, gem_core.rl.policies, gem_core.rl.testing; "
        "bad = [m for m in ('torch', 'transformers', 'tokenizers') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_torch_names_the_extra(monkeypatch, tiny_tokenizer):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(
        gem_core.errors.DependencyNotInstalled, match=re.escape(install_command("rl"))
    ):
        rl.TransformersPolicy(object(), tiny_tokenizer)


def test_argument_validation(tiny_tokenizer):
    with pytest.raises(InvalidArgument, match="temperature must be >= 0"):
        rl.SamplingParams(temperature=-1)
    with pytest.raises(InvalidArgument, match="max_new_tokens must be a positive int"):
        rl.SamplingParams(max_new_tokens=0)
    with pytest.raises(InvalidArgument, match="layout must be one of"):
        play(EASY, guesser(tiny_tokenizer), rl.ChatFormatter(tiny_tokenizer), layout="flat")
    with pytest.raises(InvalidArgument, match="got 2 envs for 3 seeds"):
        rl.collect_episodes_sync(
            [EASY, EASY], guesser(tiny_tokenizer), rl.ChatFormatter(tiny_tokenizer), seeds=[0, 1, 2]
        )
    assert rl.derive_seed(None, 1) is None and rl.derive_seed(1, 2) == rl.derive_seed(
        1, 2
    ) != rl.derive_seed(1, 3)


# --- Chat messages with images (run_chat_episode) -------------------------------------------

PNG_SIG = b"\x89PNG\r\n\x1a\n"


def _png(width=3, height=2, color=(200, 10, 10)):
    PIL = pytest.importorskip("PIL.Image", reason="the image tests need Pillow")
    import io

    buf = io.BytesIO()
    PIL.new("RGB", (width, height), color).save(buf, format="PNG")
    return buf.getvalue()


def _decode_url(url):
    import base64

    head, _, payload = url.partition(",")
    return head, base64.b64decode(payload, validate=True)


def test_chat_content_text_png_bytes_and_pil():
    import io

    import PIL.Image

    from gem_core.rl.rollout import chat_content, chat_messages

    assert chat_content("plain") == "plain"
    assert chat_content({"text": "no pictures", "images": []}) == "no pictures"
    assert chat_content({"text": "no key"}) == "no key"

    png = _png(5, 4)
    parts = chat_content({"text": "look", "images": [png, bytearray(png)]})
    assert parts[0] == {"type": "text", "text": "look"}
    assert [p["type"] for p in parts[1:]] == ["image_url", "image_url"]
    for p in parts[1:]:
        head, data = _decode_url(p["image_url"]["url"])
        assert head == "data:image/png;base64" and data == png  # bytes sent as they are

    img = PIL.Image.new("RGB", (7, 3), (1, 2, 3))
    (text, part) = chat_content({"text": "pil", "images": [img]})
    head, data = _decode_url(part["image_url"]["url"])
    assert head == "data:image/png;base64" and data.startswith(PNG_SIG)
    back = PIL.Image.open(io.BytesIO(data))
    assert back.size == (7, 3) and back.getpixel((0, 0)) == (1, 2, 3)

    jpeg = io.BytesIO()
    img.save(jpeg, format="JPEG")
    (_, part) = chat_content({"text": "jpg", "images": jpeg.getvalue()})  # one image, no list
    assert part["image_url"]["url"].startswith("data:image/jpeg;base64,")

    # Text observations keep plain string content; image ones become parts.
    msgs = chat_messages(["a", {"text": "b", "images": [png]}], ["r"], system_prompt="s")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[1]["content"] == "a" and isinstance(msgs[3]["content"], list)


def test_chat_content_rejects_unsendable_images():
    from gem_core.rl.rollout import chat_content

    with pytest.raises(InvalidArgument, match="type str to a chat model: expected encoded image bytes"):
        chat_content({"text": "x", "images": ["figure.png"]})  # a path, not data
    with pytest.raises(InvalidArgument, match="is not PNG, JPEG, GIF or WebP data"):
        chat_content({"text": "x", "images": [b"hello world"]})
    with pytest.raises(InvalidArgument, match="type ndarray"):
        chat_content({"text": "x", "images": [np.zeros((2, 2))]})


def _image_env(images_per_obs, turns=2):
    """Each observation: text plus ``images_per_obs()`` images; ends after ``turns`` steps."""

    def reset(env, seed, options):
        env.t = 0
        return {"text": "start", "images": images_per_obs(0)}, {}

    def step(env, action):
        env.t += 1
        done = env.t >= turns
        return ({"text": f"obs {env.t}", "images": images_per_obs(env.t)}, 1.0, done, False,
                {"success": done})

    return GenericTestEnv(reset, step)


class _ChatRecorder:
    def __init__(self):
        self.calls = []

    async def chat(self, messages, sampling):
        self.calls.append(messages)
        return rl.ChatResult("ok", "stop", 5, 1)


def test_chat_episode_sends_images_resends_history_and_keeps_only_summaries():
    a, b = _png(3, 2), _png(9, 8, (0, 0, 255))
    env = _image_env(lambda t: [a] if t == 0 else ([b] if t == 1 else []), turns=2)
    policy = _ChatRecorder()
    ep = asyncio.run(rl.run_chat_episode(env, policy))
    assert ep.error is None and ep.success and len(policy.calls) == 2
    first, second = policy.calls
    assert [_decode_url(p["image_url"]["url"])[1] for p in first[0]["content"][1:]] == [a]
    # The API is stateless: the second request re-sends the first turn's image too.
    assert second[0]["content"] == first[0]["content"]
    assert second[1] == {"role": "assistant", "content": "ok"}
    assert [_decode_url(p["image_url"]["url"])[1] for p in second[2]["content"][1:]] == [b]
    # The turns keep the text and a summary, never the image data.
    assert [t.observation for t in ep.turns] == ["start", "obs 1"]
    assert ep.turns[0].info["observation_images"] == [
        {"mime": "image/png", "bytes": len(a), "width": 3, "height": 2}]
    assert ep.turns[1].info["observation_images"][0]["width"] == 9
    assert ep.turns[1].info["success"] is True  # the env's info is kept beside it
    assert ep.stats["images_sent"] == 3  # a, then a + b
    assert ep.stats["image_bytes_sent"] == 2 * len(a) + len(b)


def test_chat_episode_text_observations_unchanged_and_bad_image_flagged():
    env = _image_env(lambda t: [], turns=1)
    policy = _ChatRecorder()
    ep = asyncio.run(rl.run_chat_episode(env, policy))
    assert policy.calls[0] == [{"role": "user", "content": "start"}]
    assert "images_sent" not in ep.stats and "observation_images" not in ep.turns[0].info

    env = _image_env(lambda t: ["/tmp/figure.png"], turns=1)
    ep = asyncio.run(rl.run_chat_episode(env, _ChatRecorder()))
    assert ep.end_reason == "error" and not ep.turns
    assert ep.error.startswith("observation: InvalidArgument: cannot send an observation image of type str")
