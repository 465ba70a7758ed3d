"""The adapter conformance scenario itself: known rewards, reference ReBN, helpers."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import gem_core
from gem_core.errors import InvalidArgument
from gem_core.testing.conformance import (
    SCENARIO,
    ConformanceScenario,
    assert_matches_reference,
    packed_episode,
    per_turn_values,
    turn_spans,
)


@pytest.fixture(scope="module")
def tokenizer():
    pytest.importorskip("transformers", reason="the scenario needs gem-core[rl] (transformers)")
    from transformers import AutoTokenizer

    from gem_core.rl.testing import build_tiny_tokenizer

    return AutoTokenizer.from_pretrained(build_tiny_tokenizer(), local_files_only=True)


@pytest.fixture(scope="module")
def reference(tokenizer):
    return SCENARIO.run_reference(tokenizer)


def _guesses(scenario: ConformanceScenario) -> list[int]:
    return [int(text.strip("\\boxed{}")) for text in scenario.responses]


def _game_rewards(target: int, guesses: list[int], lo: int = 1, hi: int = 10, turns: int = 4):
    """GuessTheNumber by hand: 1.0 for the target, else 0.1 * (interval shrink) / range size."""
    size = hi - lo + 1
    low, high = lo, hi
    rewards: list[float] = []
    for t in range(turns):
        g = guesses[min(t, len(guesses) - 1)]
        if g == target:
            rewards.append(1.0)
            return rewards, True
        before = high - low + 1
        if g < target:
            low = max(low, g + 1)
        else:
            high = min(high, g - 1)
        rewards.append(0.1 * (before - (high - low + 1)) / size)
    return rewards, False


def _targets(scenario: ConformanceScenario) -> list[int]:
    out = []
    for seed in scenario.seeds:
        env = gem_core.make(scenario.env_id)
        env.reset(seed=seed)
        out.append(env.unwrapped.target)
        env.close()
    return out


def test_rewards_follow_the_game_rules(reference):
    targets = _targets(SCENARIO)
    assert targets == [4, 5, 7, 10, 2], "the env's seeding changed: update the scenario docs"
    for ep, target, rewards in zip(reference.episodes, targets, reference.rewards, strict=True):
        want, success = _game_rewards(target, _guesses(SCENARIO))
        np.testing.assert_allclose(rewards, want, atol=1e-12, err_msg=f"seed {ep.seed}")
        assert ep.success is success
        assert ep.end_reason == ("terminated" if success else "env_truncated")
        assert [t.action for t in ep.turns] == [
            SCENARIO.response_text(k) for k in range(ep.num_turns)
        ]


def test_scenario_covers_the_cases_an_adapter_can_get_wrong(reference):
    lengths = sorted(ep.num_turns for ep in reference.episodes)
    assert lengths == [1, 2, 3, 4, 4]
    assert reference.num_transitions == 14
    assert any(ep.success for ep in reference.episodes)
    assert any(not ep.success for ep in reference.episodes)
    # Intermediate rewards are non-zero, so gamma and the turn split matter.
    flat = np.concatenate(reference.rewards)
    assert np.count_nonzero((flat > 0) & (flat < 1)) >= 5
    undiscounted = [np.cumsum(r[::-1])[::-1] for r in reference.rewards]
    assert not all(
        np.allclose(g, u) for g, u in zip(reference.returns, undiscounted, strict=True)
    ), "gamma has no effect on this scenario"


def test_reference_rebn_equals_a_plain_loop(reference):
    gamma, eps = SCENARIO.gamma, SCENARIO.eps
    returns = []
    for rewards in reference.rewards:
        g, row = 0.0, []
        for r in reversed(list(rewards)):
            g = r + gamma * g
            row.append(g)
        returns.append(row[::-1])
    flat = [g for row in returns for g in row]
    mean = sum(flat) / len(flat)
    std = math.sqrt(sum((g - mean) ** 2 for g in flat) / len(flat))
    k = 0
    for row, adv, ret in zip(returns, reference.advantages, reference.returns, strict=True):
        for t, g in enumerate(row):
            assert ret[t] == pytest.approx(g, abs=1e-12)
            assert adv[t] == pytest.approx((g - mean) / (std + eps), abs=1e-12)
            k += 1
    assert k == reference.num_transitions


def test_policy_is_stateless_and_reads_the_turn_from_the_prompt(reference, tokenizer):
    for ep in reference.episodes:
        prompt: list[int] = []
        for t, turn in enumerate(ep.turns):
            prompt += turn.prompt_ids
            assert SCENARIO.turn_of_prompt(tokenizer, prompt) == t
            assert turn.response_ids == SCENARIO.response_ids(tokenizer, t)
            prompt += turn.response_ids
    assert SCENARIO.response_ids(tokenizer, 0)[-1] == tokenizer.eos_token_id
    # Past the script the last response repeats.
    assert SCENARIO.response_text(10) == SCENARIO.responses[-1]


def test_turn_of_prompt_rejects_a_prompt_without_generation_header(tokenizer):
    ids = tokenizer("just text", add_special_tokens=False)["input_ids"]
    with pytest.raises(InvalidArgument, match="no generation header"):
        SCENARIO.turn_of_prompt(tokenizer, ids)


def test_packed_episode_layout(reference):
    for i, ep in enumerate(reference.episodes):
        packed = reference.packed(i)
        assert packed == packed_episode(ep)
        mask = np.asarray(packed["response_mask"])
        rewards = np.asarray(packed["token_rewards"])
        ids = np.asarray(packed["response_ids"])
        spans = turn_spans(mask)
        assert len(spans) == ep.num_turns
        for (s, e), turn in zip(spans, ep.turns, strict=True):
            assert ids[s:e].tolist() == turn.response_ids
            assert rewards[e - 1] == turn.reward
            assert not rewards[s : e - 1].any()
        assert not rewards[mask == 0].any()
        assert packed["prompt_ids"] + packed["response_ids"] == ep.token_ids()
        assert mask.tolist()[-1] == 1, "the packed response ends with the last generated token"


def test_packed_episode_rejects_multi_sample_episodes():
    from gem_core.rl.types import Episode, Turn

    ep = Episode(env_id="x", seed=0, layout="per_turn")
    ep.turns = [Turn([1], [2], [0.0]), Turn([3], [4], [0.0])]
    with pytest.raises(InvalidArgument, match="expected one packed sample, got 2"):
        packed_episode(ep)


def test_turn_spans():
    assert turn_spans([0, 1, 1, 0, 0, 1, 0, 1]) == [(1, 3), (5, 6), (7, 8)]
    assert turn_spans([1, 1]) == [(0, 2)]
    assert turn_spans([0, 0]) == []
    assert turn_spans([]) == []


def test_per_turn_values():
    values = [0.0, 2.0, 2.0, 9.0, -1.0, 0.0]
    mask = [0, 1, 1, 0, 1, 0]
    np.testing.assert_array_equal(per_turn_values(values, mask), [2.0, -1.0])
    with pytest.raises(AssertionError, match="turn 0 .* does not carry one value"):
        per_turn_values([0.0, 2.0, 2.5, 0.0], [0, 1, 1, 0])
    with pytest.raises(InvalidArgument, match="differ in shape"):
        per_turn_values([0.0], [0, 1])


def test_assert_matches_reference(reference):
    assert_matches_reference(reference.advantages, reference)
    assert_matches_reference(reference.returns, reference, what="returns")
    off = [a.copy() for a in reference.advantages]
    off[2][1] += 1e-4
    with pytest.raises(AssertionError, match=r"row 2 \(seed 2\), turn 1: advantages"):
        assert_matches_reference(off, reference)
    short = [a[:-1] if i == 0 else a for i, a in enumerate(reference.advantages)]
    with pytest.raises(AssertionError, match=r"row 0 \(seed 0\): expected 4 turns, got 3"):
        assert_matches_reference(short, reference)
    with pytest.raises(AssertionError, match="expected 5 rows"):
        assert_matches_reference(reference.advantages[:4], reference)
    with pytest.raises(InvalidArgument, match="what must be one of"):
        assert_matches_reference(reference.advantages, reference, what="values")


def test_import_is_light():
    code = (
        "import sys, gem_core.testing.conformance; "
        "heavy = [m for m in ('torch', 'transformers') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_packed_episode_keeps_the_reward_of_an_empty_turn():
    # The reference layout used to write `=` and drop the reward of a turn that generated
    # nothing; it follows the kit's rule now: credited to the turn before it.
    from gem_core.rl.types import Episode, Turn

    ep = Episode(env_id="x", seed=0)
    ep.turns = [
        Turn([1], [2, 3], [0.0, 0.0], reward=0.25),
        Turn([4], [], [], reward=-0.1, starts_sample=False),
        Turn([5], [6], [0.0], reward=1.0, starts_sample=False),
    ]
    packed = packed_episode(ep)
    assert packed["token_rewards"] == pytest.approx([0.0, 0.15, 0.0, 0.0, 1.0])
    assert sum(packed["token_rewards"]) == pytest.approx(ep.episode_return)


@pytest.fixture(scope="module")
def references(tokenizer):
    from gem_core.testing.conformance import SCENARIOS

    return {name: s.run_reference(tokenizer) for name, s in SCENARIOS.items()}


def test_each_scenario_covers_its_case(references):
    def eps(name):
        return references[name].episodes

    assert any(not t.response_ids for ep in eps("empty_turn") for t in ep.turns[:1])
    assert any(not t.response_ids for ep in eps("empty_turn") for t in ep.turns[1:-1])
    assert any(t.reward < 0 and t.format_error for ep in eps("format_penalty") for t in ep.turns)
    assert any(ep.end_reason == "response_truncated" and ep.turns[-1].reward == -1.0 for ep in eps("truncated"))
    for ep in eps("terminal_reward"):
        assert all(r == 0 for r in ep.rewards()[:-1]), "Echo pays only at the end"
    assert any(not ep.success for ep in eps("terminal_reward")) and any(ep.num_turns > 2 for ep in eps("terminal_reward"))
    qa = eps("qa")
    assert all(ep.num_turns == 1 for ep in qa) and {ep.success for ep in qa} == {True, False}


def test_reference_values_follow_the_empty_turn_rule(references):
    from gem_core.rl.advantages import compute_advantages

    for name, ref in references.items():
        rule = [np.asarray(p.credited_rewards) for p in ref.rows]
        for got, want in zip(ref.rewards, rule, strict=True):
            np.testing.assert_allclose(got, want, atol=1e-12)
        for p, ep in zip(ref.rows, ref.episodes, strict=True):
            assert sum(p.token_rewards) == pytest.approx(ep.episode_return), name
        if name != "empty_turn":  # no empty turn: one transition per turn, as compute_advantages
            want = compute_advantages(ref.episodes, "rebn", gamma=ref.scenario.gamma, eps=ref.scenario.eps)
            for got, w in zip(ref.advantages, want, strict=True):
                np.testing.assert_allclose(got, w, atol=1e-12, err_msg=name)
    # empty_turn: fewer transitions than turns; the empty turns' -0.1 are inside the credited turn.
    ref = references["empty_turn"]
    assert ref.num_transitions < sum(ep.num_turns for ep in ref.episodes)
    assert ref.rewards[1].tolist() == pytest.approx([-0.1 + 1.0])  # seed 1: empty turn 0, then the win


def test_scenario_script_is_picklable_by_reference(tokenizer, references):
    import functools
    import pickle

    from gem_core.testing.conformance import scenario_script

    script = pickle.loads(pickle.dumps(functools.partial(scenario_script, "qa")))
    ep = references["qa"].episodes[1]
    assert script(tokenizer, ep.turns[0].prompt_ids) == ep.turns[0].response_ids
