"""The adapter suite run against the kit itself (play_row + BudgetedPolicy + pack_episode + token_advantages).

`TestKitReference` is what an adapter's test class looks like; here its hooks are the
kit's own functions, so the suite is exercised in the core venv too. The other tests
check that the suite fails an adapter that gets a scenario wrong.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools

import numpy as np
import pytest

pytest_plugins = ["pytester"]

pytest.importorskip("transformers", reason="the adapter suite needs gem-core[rl] (transformers)")

from gem_core.rl import BudgetedPolicy, ChatFormatter, pack_episode, play_row, token_advantages  # noqa: E402
from gem_core.testing.adapter_suite import (  # noqa: E402
    AdapterSuite,
    Case,
    check_advantages,
    check_random_rows,
    check_rewards,
    check_tokens,
    reference_for,
)
from gem_core.testing.conformance import SCENARIOS, scenario_script  # noqa: E402


@functools.lru_cache(maxsize=1)
def _tokenizer():
    from transformers import AutoTokenizer

    from gem_core.rl.testing import build_tiny_tokenizer

    return AutoTokenizer.from_pretrained(build_tiny_tokenizer(), local_files_only=True)


def kit_rollout(scenario, tokenizer):
    """What an adapter's rollout does, with a scripted 'server' in place of the trainer's."""
    script = functools.partial(scenario_script, scenario.name)

    async def one(row):
        formatter = ChatFormatter(tokenizer)

        async def generate(prompt_ids, max_tokens):  # the trainer's generate call
            return script(tokenizer, prompt_ids)[:max_tokens], None, None

        policy = BudgetedPolicy(
            generate,
            formatter,
            prompt_length=512,
            response_length=512,
            max_tokens_per_turn=scenario.max_new_tokens,
        )
        episode = await play_row(
            row,
            policy,
            formatter,
            env_kwargs=scenario.env_kwargs_dict,
            truncated_response=scenario.truncated_response,
            truncation_reward=scenario.truncation_reward,
        )
        packed = pack_episode(episode)
        # The scripted server returns no log-probs: the adapter stores zeros.
        return packed

    async def run():
        return await asyncio.gather(*(one(row) for row in scenario.rows()))

    return list(asyncio.run(run()))


class TestKitReference(AdapterSuite):
    def tokenizer(self):
        return _tokenizer()

    def rollout(self, scenario):
        return kit_rollout(scenario, self.tokenizer())

    def advantages(self, token_rewards, response_mask, *, gamma):
        return token_advantages(token_rewards, response_mask, gamma=gamma)[0]


# --- the suite can fail ---------------------------------------------------------------


def _case(name):
    scenario = SCENARIOS[name]
    tokenizer = _tokenizer()
    return Case(scenario, reference_for(scenario, tokenizer), kit_rollout(scenario, tokenizer))


def test_dropping_an_empty_turns_reward_fails_the_suite():
    # The old reference layout: `token_rewards[-1] = reward` only when the turn generated.
    case = _case("empty_turn")
    broken = []
    for p in case.rows:
        rewards = [0.0] * len(p.response_ids)
        for (s, e), r in zip(p.turn_spans, p.turn_rewards, strict=True):
            if e > s:
                rewards[e - 1] = r
        broken.append(dataclasses.replace(p, token_rewards=rewards))
    check_rewards(case)
    with pytest.raises(AssertionError, match="token rewards differ at positions"):
        check_rewards(Case(case.scenario, case.reference, broken))


def test_a_retokenized_observation_fails_the_suite():
    case = _case("guess")
    p = case.rows[0]
    s, _ = p.turn_spans[1]
    ids = list(p.response_ids)
    ids[s - 1] += 1  # one observation token differs
    with pytest.raises(AssertionError, match=r"row 0 \(seed 0\): response_ids differ from the reference at position"):
        check_tokens(Case(case.scenario, case.reference, [dataclasses.replace(p, response_ids=ids), *case.rows[1:]]))


class _SampleStd(TestKitReference):
    """An estimator with the sample std (ROLL's native normaliser): off by sqrt((n-1)/n)."""

    def advantages(self, token_rewards, response_mask, *, gamma):
        adv, ret = token_advantages(token_rewards, response_mask, gamma=gamma)
        n = np.count_nonzero(np.diff(np.concatenate([[0], (np.asarray(response_mask) != 0).ravel()])) == 1)
        return adv * np.sqrt((n - 1) / n) if n > 1 else adv


def test_a_wrong_normaliser_fails_the_suite():
    with pytest.raises(AssertionError, match="advantages"):
        check_advantages(_SampleStd(), _case("guess"))
    with pytest.raises(AssertionError, match="differ from the plain-loop ReBN"):
        check_random_rows(_SampleStd(), 0)


def test_a_subclass_may_narrow_the_scenarios(pytester):
    pytester.makepyfile(
        """
        from gem_core.testing.adapter_suite import AdapterSuite

        class TestNarrow(AdapterSuite):
            scenarios = ("guess",)

            def tokenizer(self):
                raise AssertionError("not reached for skipped scenarios")

            def rollout(self, scenario):
                raise AssertionError("not reached")

            def advantages(self, token_rewards, response_mask, *, gamma):
                raise AssertionError("not reached")
        """
    )
    result = pytester.runpytest("-q", "-k", "qa and masks", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*does not run scenario 'qa'*"])


# --- TinyModelGenerator (moved here from the verl adapter's test client) ---------------


def test_tiny_model_generator_scores_scripted_tokens_and_decodes_greedily(tmp_path):
    torch = pytest.importorskip("torch", reason="the tiny model needs gem-core[rl] (torch)")
    import pickle

    from gem_core.rl.testing import TinyModelGenerator, build_tiny_model

    path = build_tiny_model(tmp_path / "m", hidden=32, layers=1, heads=2)
    tokenizer = _tokenizer()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    scripted = TinyModelGenerator(path, script=lambda tok, p: [5, 6, 7, 8])
    ids, logprobs = scripted.complete(prompt, 3)
    assert ids == [5, 6, 7] and len(logprobs) == 3 and all(lp < 0 for lp in logprobs)
    model, _ = scripted.load()
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0].log_softmax(-1)
    want = [float(logits[len(prompt) - 1 + k, t]) for k, t in enumerate(ids)]
    np.testing.assert_allclose(logprobs, want, atol=1e-5)
    free = pickle.loads(pickle.dumps(TinyModelGenerator(path)))  # pickles without the model
    out, _, reason = asyncio.run(free(prompt, 5))
    assert 1 <= len(out) <= 5 and reason is None
    assert out == free.greedy(prompt, 5) and free.requests[0]["max_tokens"] == 5
