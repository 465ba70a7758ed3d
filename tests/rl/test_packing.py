"""The packed layout and token-level advantages, against plain-loop references."""

from __future__ import annotations

import logging
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_core.errors import InvalidArgument
from gem_core.rl.advantages import compute_advantages
from gem_core.rl.packing import (
    credited_rewards,
    pack_episode,
    pack_turns,
    pad_responses,
    sample_advantages,
    token_advantages,
    turn_index,
    turn_spans,
)
from gem_core.rl.types import Episode, Turn

# --- plain-loop references (independent of gem_core.rl) -------------------------------


def slow_spans(mask) -> list[tuple[int, int]]:
    spans, j, m = [], 0, list(mask)
    while j < len(m):
        if m[j]:
            k = j
            while k < len(m) and m[k]:
                k += 1
            spans.append((j, k))
            j = k
        else:
            j += 1
    return spans


def slow_estimate(rows: list[list[float]], estimator, gamma, eps=None, groups=None, baseline="none"):
    """Per-turn (advantages, returns) of each row's turn rewards; rows without turns skipped."""
    returns = []
    for r in rows:
        g, out = 0.0, []
        for x in reversed(r):
            g = x + gamma * g
            out.append(g)
        returns.append(out[::-1])
    live = [i for i, r in enumerate(rows) if r]
    adv = [[0.0] * len(r) for r in rows]
    if estimator in ("rebn", "reinforce"):
        flat = [g for i in live for g in returns[i]]
        mean = sum(flat) / len(flat) if flat else 0.0
        std = math.sqrt(sum((g - mean) ** 2 for g in flat) / len(flat)) if flat else 0.0
        for i in live:
            for t, g in enumerate(returns[i]):
                if estimator == "rebn":
                    adv[i][t] = (g - mean) / (std + (1e-8 if eps is None else eps))
                else:
                    adv[i][t] = g - mean if baseline == "mean" else g
        return adv, returns
    by_group: dict = {}
    for i in live:
        by_group.setdefault(groups[i], []).append(i)
    for members in by_group.values():
        vals = [returns[i][0] for i in members]
        n = len(vals)
        mean = sum(vals) / n
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else 0.0
        for i, v in zip(members, vals, strict=True):
            if estimator == "grpo":
                a = (v - mean) / (std + (1e-6 if eps is None else eps))
            elif estimator == "dr_grpo":
                a = v - mean
            else:
                a = v - (sum(vals) - v) / (n - 1) if n > 1 else 0.0
            adv[i] = [a] * len(rows[i])
    return adv, returns


def slow_token(rewards, mask, estimator, gamma, **kw):
    rows = [[float(sum(rewards[i][s:e])) for s, e in slow_spans(mask[i])] for i in range(len(mask))]
    adv, ret = slow_estimate(rows, estimator, gamma, **kw)
    a = np.zeros(np.shape(rewards))
    g = np.zeros(np.shape(rewards))
    for i in range(len(mask)):
        for k, (s, e) in enumerate(slow_spans(mask[i])):
            a[i, s:e] = adv[i][k]
            g[i, s:e] = ret[i][k]
    return a, g


def turn(prompt: int, response: int, reward: float, start: int = 0) -> Turn:
    ids = list(range(start, start + response))
    return Turn(
        prompt_ids=[900 + k for k in range(prompt)],
        response_ids=ids,
        response_logprobs=[-0.1 * (k + 1) for k in range(response)],
        reward=reward,
        starts_sample=False,
    )


def episode(*turns: Turn) -> Episode:
    ep = Episode(env_id="test:x", seed=0)
    ep.turns = list(turns)
    ep.turns[0].starts_sample = True
    return ep


# --- pack_episode -----------------------------------------------------------------------


def test_pack_episode_layout():
    ep = episode(turn(3, 2, 0.5), turn(2, 3, -0.1, start=10), turn(1, 1, 1.0, start=20))
    p = pack_episode(ep)
    assert p.prompt_ids == [900, 901, 902]
    assert p.response_ids == [0, 1, 900, 901, 10, 11, 12, 900, 20]
    assert p.response_mask == [1, 1, 0, 0, 1, 1, 1, 0, 1]
    assert p.token_rewards == [0, 0.5, 0, 0, 0, 0, -0.1, 0, 1.0]
    assert p.response_logprobs == pytest.approx([-0.1, -0.2, 0, 0, -0.1, -0.2, -0.3, 0, -0.1])
    assert p.turn_spans == [(0, 2), (4, 7), (8, 9)] == turn_spans(p.response_mask)
    assert p.turn_rewards == p.credited_rewards == [0.5, -0.1, 1.0]
    assert p.reward_score == pytest.approx(1.4) and p.num_turns == 3
    assert p.token_ids == ep.token_ids() and p.loss_mask == ep.loss_mask()


def test_empty_middle_turn_credits_the_turn_before(caplog):
    ep = episode(turn(2, 2, 0.1), turn(2, 0, -0.5), turn(2, 1, 1.0, start=5))
    with caplog.at_level(logging.WARNING, logger="gem_core.rl.packing"):
        p = pack_episode(ep)
    assert p.response_mask == [1, 1, 0, 0, 0, 0, 1]
    assert p.token_rewards == pytest.approx([0, 0.1 - 0.5, 0, 0, 0, 0, 1.0])
    assert p.credited_rewards == pytest.approx([-0.4, 1.0])
    assert p.turn_rewards == [0.1, -0.5, 1.0] and p.turn_spans[1] == (4, 4)
    assert sum(p.token_rewards) == pytest.approx(p.reward_score)
    assert "turn 1 generated no token; its reward -0.5 is credited to turn 0" in caplog.text


def test_empty_first_turns_credit_the_first_generated_turn():
    ep = episode(turn(2, 0, -0.1), turn(2, 0, -0.2), turn(2, 2, 0.3), turn(1, 0, 0.05))
    p = pack_episode(ep)
    assert p.response_mask == [0, 0, 0, 0, 1, 1, 0]
    assert p.credited_rewards == pytest.approx([-0.1 - 0.2 + 0.3 + 0.05])
    assert sum(p.token_rewards) == pytest.approx(p.reward_score)
    assert p.token_rewards[5] == pytest.approx(0.05)


def test_episode_without_generated_tokens_keeps_the_return_in_reward_score(caplog):
    ep = episode(turn(2, 0, -0.1), turn(2, 0, -0.1))
    with caplog.at_level(logging.WARNING, logger="gem_core.rl.packing"):
        p = pack_episode(ep)
    assert p.credited_rewards == [] and not any(p.token_rewards) and not any(p.response_mask)
    assert p.reward_score == pytest.approx(-0.2)
    assert "kept only in reward_score" in caplog.text


def test_pack_episode_errors():
    ep = Episode(env_id="x", seed=0, layout="per_turn")
    ep.turns = [Turn([1], [2], [0.0]), Turn([3], [4], [0.0])]
    with pytest.raises(InvalidArgument, match=r"expected one packed sample, got 2 .*use Episode.samples"):
        pack_episode(ep)
    with pytest.raises(InvalidArgument, match=r"episode of x \(seed 1\) has no turn"):
        pack_episode(Episode(env_id="x", seed=1, end_reason="context"))
    bad = episode(Turn([1], [2, 3], [0.0]))
    with pytest.raises(InvalidArgument, match="turn 0: 2 response tokens but 1 logprobs"):
        pack_episode(bad)


def slow_pack(turns):
    """The packed row by hand: rewards by the empty-turn rule, one token at a time."""
    response, mask, rewards = [], [], []
    last = None  # index of the last generated token so far
    pending = 0.0  # rewards of empty turns before any generated token
    for k, t in enumerate(turns):
        if k:
            for tok in t.prompt_ids:
                response.append(tok)
                mask.append(0)
                rewards.append(0.0)
        for tok in t.response_ids:
            response.append(tok)
            mask.append(1)
            rewards.append(0.0)
        if t.response_ids:
            last = len(response) - 1
            rewards[last] += t.reward + pending
            pending = 0.0
        elif last is not None:
            rewards[last] += t.reward
        else:
            pending += t.reward
    return response, mask, rewards


turns_strategy = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.floats(-1, 1, allow_nan=False)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(turns_strategy)
def test_pack_turns_matches_a_plain_loop(spec):
    turns = [turn(p if k else max(p, 1), r, w, start=10 * k) for k, (p, r, w) in enumerate(spec)]
    # Consecutive generated turns are separated by observation tokens, as in every chat template.
    for k in range(1, len(turns)):
        if not turns[k].prompt_ids:
            turns[k].prompt_ids = [999]
    p = pack_turns(turns)
    response, mask, rewards = slow_pack(turns)
    assert p.response_ids == response and p.response_mask == mask
    np.testing.assert_allclose(p.token_rewards, rewards, atol=1e-12)
    if any(mask):
        assert sum(p.token_rewards) == pytest.approx(p.reward_score, abs=1e-9)
    assert len(p.credited_rewards) == len(turn_spans(mask))
    np.testing.assert_allclose(
        p.credited_rewards, [sum(rewards[s:e]) for s, e in slow_spans(mask)], atol=1e-12
    )


def test_credited_rewards_targets():
    assert credited_rewards([1, 2, 3], [False, True, False]) == ([6.0], [0, 0, 0])
    assert credited_rewards([1, 2], [False, False]) == ([], [-1, -1])
    with pytest.raises(InvalidArgument, match="got 2 rewards for 1 turns"):
        credited_rewards([1, 2], [True])


def test_pad_responses():
    a = pack_turns([turn(1, 2, 1.0)])
    b = pack_turns([turn(1, 1, 0.5), turn(1, 1, 0.25, start=7)])
    out = pad_responses([a, b], width=5, pad_token_id=-1)
    assert out["response_ids"].tolist() == [[0, 1, -1, -1, -1], [0, 900, 7, -1, -1]]
    assert out["response_mask"].tolist() == [[1, 1, 0, 0, 0], [1, 0, 1, 0, 0]]
    assert out["token_rewards"][1].tolist() == [0.5, 0, 0.25, 0, 0]
    assert out["lengths"].tolist() == [2, 3]
    with pytest.raises(InvalidArgument, match="more than width=2"):
        pad_responses([a, b], width=2)


# --- turn_spans / turn_index ------------------------------------------------------------

masks = st.lists(st.lists(st.integers(0, 1), min_size=0, max_size=12), min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(masks, st.integers(0, 12))
def test_turn_spans_and_index_match_a_plain_loop(rows, width):
    width = max([width] + [len(r) for r in rows])
    m = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        m[i, : len(r)] = r
    assert turn_spans(m) == [slow_spans(row) for row in m.tolist()]
    index, per_row = turn_index(m)
    k = 0
    for i, row in enumerate(m.tolist()):
        spans = slow_spans(row)
        assert per_row[i] == len(spans)
        want = [-1] * width
        for s, e in spans:
            want[s:e] = [k] * (e - s)
            k += 1
        assert index[i].tolist() == want


def test_turn_spans_and_index_examples():
    assert turn_spans([0, 1, 1, 0, 0, 1, 0, 1]) == [(1, 3), (5, 6), (7, 8)]
    assert turn_spans([]) == [] and turn_spans([0, 0]) == []
    assert turn_spans([[1, 0], [0, 0]]) == [[(0, 1)], []]
    index, per_row = turn_index(np.array([[0, 1, 1, 0, 1], [1, 0, 0, 0, 0], [0] * 5]))
    assert index.tolist() == [[-1, 0, 0, -1, 1], [2, -1, -1, -1, -1], [-1] * 5]
    assert per_row.tolist() == [2, 1, 0]
    with pytest.raises(InvalidArgument, match=r"must be 2-D \[batch, length\], got shape \(3,\)"):
        turn_index([1, 0, 1])
    with pytest.raises(InvalidArgument, match="1-D or 2-D"):
        turn_spans(np.zeros((1, 1, 1)))


# --- token_advantages -------------------------------------------------------------------

ESTIMATOR_CASES = [
    ("rebn", {}),
    ("reinforce", {}),
    ("reinforce", {"baseline": "mean"}),
    ("grpo", {}),
    ("dr_grpo", {}),
    ("rloo", {}),
]


@pytest.mark.parametrize("estimator,kw", ESTIMATOR_CASES)
@pytest.mark.parametrize("seed", range(4))
def test_token_advantages_match_a_plain_loop(estimator, kw, seed):
    rng = np.random.default_rng(seed)
    mask = (rng.random((7, 30)) < 0.6).astype(np.int64)
    mask[rng.integers(0, 7)] = 0  # a padding row: out of every statistic
    mask[:, -3:] = 0  # right padding
    rewards = rng.normal(size=mask.shape)  # rewards also on mask-0 tokens: ignored
    gamma = float(rng.choice([0.0, 0.5, 0.9, 1.0]))
    groups = [i % 3 for i in range(7)]
    gkw = {"groups": groups} if estimator in ("grpo", "dr_grpo", "rloo") else {}
    adv, ret = token_advantages(
        rewards, mask, gamma=gamma, estimator=estimator, group_ids=groups if gkw else None, **kw
    )
    want_adv, want_ret = slow_token(rewards * mask, mask, estimator, gamma, **gkw, **kw)
    np.testing.assert_allclose(adv, want_adv, atol=1e-9)
    np.testing.assert_allclose(ret, want_ret, atol=1e-9)
    assert not adv[mask == 0].any() and not ret[mask == 0].any()


def test_padding_rows_do_not_change_the_statistics():
    rng = np.random.default_rng(0)
    mask = (rng.random((4, 20)) < 0.5).astype(np.int64)
    mask[:, 0] = 1
    rewards = rng.normal(size=mask.shape) * mask
    adv, _ = token_advantages(rewards, mask, gamma=0.9)
    padded_mask = np.zeros((7, 25), dtype=np.int64)
    padded_rewards = np.zeros((7, 25))
    padded_mask[:4, :20], padded_rewards[:4, :20] = mask, rewards
    adv2, _ = token_advantages(padded_rewards, padded_mask, gamma=0.9)
    np.testing.assert_allclose(adv2[:4, :20], adv, atol=1e-12)
    assert not adv2[4:].any()
    # GRPO: a padding row in a group does not enter that group's mean.
    groups = [0, 0, 1, 1, 0, 0, 1]
    g1, _ = token_advantages(rewards, mask, gamma=1.0, estimator="grpo", group_ids=groups[:4])
    g2, _ = token_advantages(padded_rewards, padded_mask, gamma=1.0, estimator="grpo", group_ids=groups)
    np.testing.assert_allclose(g2[:4, :20], g1, atol=1e-12)


def test_token_advantages_equal_compute_advantages_on_packed_episodes():
    rng = np.random.default_rng(3)
    episodes = []
    for e in range(5):
        ts = [turn(2, int(rng.integers(1, 4)), float(rng.normal()), start=10 * k) for k in range(e % 3 + 1)]
        episodes.append(episode(*ts))
    packed = [pack_episode(ep) for ep in episodes]
    arr = pad_responses(packed, width=40)
    for estimator in ("rebn", "reinforce", "grpo", "rloo"):
        groups = [i % 2 for i in range(5)]
        ref = compute_advantages(episodes, estimator, gamma=0.9, group_ids=groups)
        adv, _ = token_advantages(
            arr["token_rewards"], arr["response_mask"], gamma=0.9, estimator=estimator, group_ids=groups
        )
        for i in range(len(packed)):
            got = [adv[i, s] for s, _ in turn_spans(arr["response_mask"][i])]
            np.testing.assert_allclose(got, ref[i], atol=1e-12, err_msg=estimator)


def test_token_advantages_one_row_and_errors():
    adv, ret = token_advantages([0, 1.0, 0, 2.0], [0, 1, 0, 1], gamma=1.0, estimator="reinforce")
    assert adv.tolist() == [0, 3.0, 0, 2.0] and ret.tolist() == adv.tolist()
    with pytest.raises(InvalidArgument, match=r"token_rewards \(2, 3\) and response_mask \(2, 4\) must have the same shape"):
        token_advantages(np.zeros((2, 3)), np.zeros((2, 4)), gamma=1.0)
    with pytest.raises(InvalidArgument, match="unknown estimator 'gae'"):
        token_advantages(np.zeros((1, 2)), np.ones((1, 2)), gamma=1.0, estimator="gae")
    with pytest.raises(InvalidArgument, match="'grpo' needs group_ids"):
        token_advantages(np.zeros((1, 2)), np.ones((1, 2)), gamma=1.0, estimator="grpo")
    with pytest.raises(InvalidArgument, match="group_ids has 1 entries for 2 rows"):
        token_advantages(np.zeros((2, 2)), np.ones((2, 2)), gamma=1.0, estimator="grpo", group_ids=[0])
    empty, _ = token_advantages(np.zeros((0, 4)), np.zeros((0, 4)), gamma=0.9)
    assert empty.shape == (0, 4)
    all_pad, _ = token_advantages(np.ones((2, 3)), np.zeros((2, 3)), gamma=0.9)
    assert not all_pad.any()


def test_token_advantages_keeps_torch_dtype_and_device():
    torch = pytest.importorskip("torch", reason="the torch path needs gem-core[rl] (torch)")
    rewards = torch.tensor([[0.0, 1.0, 0.0, 0.5], [0.0, 0.0, 0.0, 0.0]], dtype=torch.bfloat16)
    mask = torch.tensor([[1, 1, 0, 1], [0, 0, 0, 0]])
    adv, ret = token_advantages(rewards, mask, gamma=0.5)
    assert adv.dtype == torch.bfloat16 and ret.dtype == torch.bfloat16 and adv.shape == (2, 4)
    want, _ = token_advantages(rewards.float().numpy(), mask.numpy(), gamma=0.5)
    np.testing.assert_allclose(adv.float().numpy(), want, atol=1e-2)


# --- sample_advantages ------------------------------------------------------------------


@pytest.mark.parametrize("estimator", ["rebn", "reinforce", "grpo", "rloo"])
def test_sample_advantages_equal_token_advantages_on_the_same_turns(estimator):
    rng = np.random.default_rng(1)
    lengths = [3, 1, 4, 2]
    rows = [list(rng.normal(size=n)) for n in lengths]
    width = 2 * max(lengths)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    rewards = np.zeros((len(rows), width))
    for i, r in enumerate(rows):
        for k, x in enumerate(r):
            mask[i, 2 * k] = 1
            rewards[i, 2 * k] = x
    groups = [0, 0, 1, 1]
    tok, tok_ret = token_advantages(rewards, mask, gamma=0.9, estimator=estimator, group_ids=groups)
    samples = [(i, k, x) for i, r in enumerate(rows) for k, x in enumerate(r)]
    rng.shuffle(samples)
    traj = [f"t{i}" for i, _, _ in samples]
    adv, ret = sample_advantages(
        [x for _, _, x in samples],
        traj,
        [10 * k for _, k, _ in samples],  # gaps are fine: only the order counts
        gamma=0.9,
        estimator=estimator,
        group_ids=[groups[i] for i, _, _ in samples],
    )
    for (i, k, _), a, g in zip(samples, adv, ret, strict=True):
        assert a == pytest.approx(tok[i, 2 * k], abs=1e-12)
        assert g == pytest.approx(tok_ret[i, 2 * k], abs=1e-12)


def test_sample_advantages_empty_sample_follows_the_rule():
    adv, ret = sample_advantages(
        [0.1, -0.5, 1.0, 0.2],
        ["a", "a", "a", "b"],
        [0, 1, 2, 0],
        gamma=0.5,
        estimator="reinforce",
        num_tokens=[3, 0, 2, 1],
    )
    assert adv[1] == 0 and ret[1] == 0
    assert ret[0] == pytest.approx(0.1 - 0.5 + 0.5 * 1.0) and ret[2] == pytest.approx(1.0)
    with pytest.raises(InvalidArgument, match="repeated turn index"):
        sample_advantages([0, 0], ["a", "a"], [1, 1], gamma=1.0)
    with pytest.raises(InvalidArgument, match="pass one of each per sample"):
        sample_advantages([0, 0], ["a"], [1, 1], gamma=1.0)
    with pytest.raises(InvalidArgument, match="different groups"):
        sample_advantages([0, 0], ["a", "a"], [0, 1], gamma=1.0, estimator="grpo", group_ids=[0, 1])


def test_import_is_light():
    code = "import sys, gem_core.rl.packing; print([m for m in ('torch', 'transformers') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_compute_advantages_follows_the_empty_turn_rule():
    # Empty turns (first, middle, last) are not transitions for the Episode-level
    # estimators either: their reward is credited like in the packed rows, their advantage
    # is 0, and the other turns' advantages equal token_advantages on the packed rows.
    episodes = [
        episode(turn(2, 0, 0.3), turn(1, 2, 0.5, start=10), turn(1, 0, -0.1, start=20), turn(1, 1, 1.0, start=30)),
        episode(turn(2, 3, 0.0), turn(1, 0, 0.7, start=10)),
        episode(turn(2, 1, 1.0), turn(1, 2, -1.0, start=10)),
    ]
    packed = [pack_episode(ep) for ep in episodes]
    arr = pad_responses(packed, width=40)
    for estimator in ("rebn", "reinforce", "grpo"):
        groups = [0, 0, 1]
        got = compute_advantages(episodes, estimator, gamma=0.9, group_ids=groups)
        adv, _ = token_advantages(
            arr["token_rewards"], arr["response_mask"], gamma=0.9, estimator=estimator, group_ids=groups
        )
        for i, ep in enumerate(episodes):
            assert got[i].shape == (ep.num_turns,)
            empty = [k for k, t in enumerate(ep.turns) if not t.response_ids]
            assert all(got[i][k] == 0.0 for k in empty)
            kept = [got[i][k] for k, t in enumerate(ep.turns) if t.response_ids]
            spans = turn_spans(arr["response_mask"][i])
            np.testing.assert_allclose(kept, [adv[i, s] for s, _ in spans], atol=1e-12, err_msg=estimator)
    # ReBN statistics run over the 5 generated turns only (not 8): the credited rewards
    # are [0.3 + 0.5 - 0.1, 1.0], [0.0 + 0.7] and [1.0, -1.0].
    got = compute_advantages(episodes, "rebn", gamma=0.9)
    g = np.array([0.7 + 0.9 * 1.0, 1.0, 0.7, 1.0 - 0.9, -1.0])
    expected = (g - g.mean()) / (g.std() + 1e-8)
    kept = [a[[k for k, t in enumerate(ep.turns) if t.response_ids]] for a, ep in zip(got, episodes, strict=True)]
    np.testing.assert_allclose(np.concatenate(kept), expected, atol=1e-12)
