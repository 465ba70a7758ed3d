r"""The adapter conformance suite: a pytest base class every trainer adapter's tests subclass.

An adapter implements three hooks and inherits every test::

    from gem_core.testing.adapter_suite import AdapterSuite

    class TestMyTrainer(AdapterSuite):
        def tokenizer(self):
            return ...  # the tokenizer the trainer uses (a chat template; the tiny one)

        def rollout(self, scenario):
            # Play scenario.rows() through the trainer's real rollout path, with
            # scenario.script (the scripted policy) behind the trainer's generate call,
            # scenario.max_new_tokens as its per-turn cap, scenario.env_kwargs_dict,
            # scenario.truncated_response / truncation_reward; return one
            # gem_core.rl.PackedEpisode per row, read back from what the trainer stores.
            ...

        def advantages(self, token_rewards, response_mask, *, gamma):
            # The trainer's real estimator path on [batch, length] numpy rows; return
            # the per-token advantages as a numpy array.
            ...

The inherited tests run every scenario of `gem_core.testing.conformance.SCENARIOS`
(a subclass may narrow ``scenarios``; the others are skipped with the reason): token ids
and masks equal to the reference, per-turn rewards on the right tokens, log-probs only on
generated tokens, advantages equal to the reference (1e-6), padding rows out of the
statistics, and random packed rows against a plain-loop ReBN written here (independent
of `gem_core.rl`). The checks are module functions (`check_tokens`, ...) so they can be
called on their own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest

from gem_core.rl.packing import PackedEpisode, pad_responses
from gem_core.testing.conformance import (
    SCENARIOS,
    ConformanceReference,
    ConformanceScenario,
    assert_matches_reference,
    per_turn_values,
)

__all__ = [
    "AdapterSuite",
    "Case",
    "check_tokens",
    "check_rewards",
    "check_logprobs",
    "check_advantages",
    "check_padding",
    "check_random_rows",
    "plain_rebn",
]

_REFERENCES: dict[tuple[str, str, int], ConformanceReference] = {}


def reference_for(scenario: ConformanceScenario, tokenizer: Any) -> ConformanceReference:
    """`ConformanceScenario.run_reference`, cached per scenario and tokenizer."""
    key = (scenario.name, str(getattr(tokenizer, "name_or_path", "")), len(tokenizer))
    if key not in _REFERENCES:
        _REFERENCES[key] = scenario.run_reference(tokenizer)
    return _REFERENCES[key]


@dataclass
class Case:
    """One scenario as the adapter played it, with the reference."""

    scenario: ConformanceScenario
    reference: ConformanceReference
    rows: list[PackedEpisode]

    def label(self, i: int) -> str:
        """Names row ``i`` in messages."""
        return f"scenario {self.scenario.name!r}, row {i} (seed {self.scenario.seeds[i]})"


def _check_count(case: Case) -> None:
    n = len(case.scenario.seeds)
    assert len(case.rows) == n, (
        f"scenario {case.scenario.name!r}: rollout() returned {len(case.rows)} rows for {n} "
        "seeds; return one PackedEpisode per row of scenario.rows(), in order"
    )


def check_tokens(case: Case) -> None:
    """Prompt ids, response ids and masks equal the reference's, token for token."""
    _check_count(case)
    for i, (got, want) in enumerate(zip(case.rows, case.reference.rows, strict=True)):
        for name in ("prompt_ids", "response_ids", "response_mask"):
            g, w = list(getattr(got, name)), list(getattr(want, name))
            if g != w:
                k = next((j for j, (a, b) in enumerate(zip(g, w, strict=False)) if a != b), min(len(g), len(w)))
                raise AssertionError(
                    f"{case.label(i)}: {name} differ from the reference at position {k} "
                    f"(lengths {len(g)} vs {len(w)}): got {g[k:k + 8]}, want {w[k:k + 8]}; the "
                    "adapter must store the generated ids as generated and each observation "
                    "as the chat template's token delta"
                )


def check_rewards(case: Case) -> None:
    """Each generated turn's reward on its last generated token; the return in ``reward_score``."""
    _check_count(case)
    for i, (got, want) in enumerate(zip(case.rows, case.reference.rows, strict=True)):
        g = np.asarray(got.token_rewards, dtype=np.float64)
        w = np.asarray(want.token_rewards, dtype=np.float64)
        assert g.shape == w.shape, f"{case.label(i)}: {g.size} token rewards, reference {w.size}"
        bad = np.flatnonzero(np.abs(g - w) > 1e-7)
        assert not bad.size, (
            f"{case.label(i)}: token rewards differ at positions {bad[:5].tolist()}: got "
            f"{g[bad[:5]].tolist()}, want {w[bad[:5]].tolist()} (each generated turn's "
            "reward sits on its last generated token; a turn that generated nothing is "
            "credited to the generated turn before it, see gem_core.rl.packing)"
        )
        episode = case.reference.episodes[i]
        assert got.reward_score == pytest.approx(episode.episode_return, abs=1e-7), (
            f"{case.label(i)}: reward_score {got.reward_score} != the episode return "
            f"{episode.episode_return}"
        )
        if any(want.response_mask):
            assert float(g.sum()) == pytest.approx(episode.episode_return, abs=1e-6), (
                f"{case.label(i)}: the token rewards sum to {g.sum()}, not to the return "
                f"{episode.episode_return}: a reward was dropped"
            )


def check_logprobs(case: Case) -> None:
    """One log-prob per response token, 0.0 on observation tokens."""
    _check_count(case)
    for i, got in enumerate(case.rows):
        lp = np.asarray(got.response_logprobs, dtype=np.float64)
        mask = np.asarray(got.response_mask) != 0
        assert lp.shape == mask.shape, f"{case.label(i)}: {lp.size} log-probs for {mask.size} tokens"
        assert not lp[~mask].any(), f"{case.label(i)}: observation tokens carry log-probs"
        assert np.all(np.isfinite(lp)) and np.all(lp <= 0), f"{case.label(i)}: log-probs must be finite and <= 0"


def _padded(rows: list[PackedEpisode], *, extra_rows: int = 0, extra_width: int = 0) -> dict[str, np.ndarray]:
    width = max((len(r.response_ids) for r in rows), default=0) + extra_width
    blank = PackedEpisode([], [], [], [], [], 0.0, 0)
    return pad_responses(list(rows) + [blank] * extra_rows, width=width)


def _per_row(adv: np.ndarray, mask: np.ndarray, n: int, atol: float) -> list[np.ndarray]:
    return [per_turn_values(adv[i], mask[i], atol=atol) for i in range(n)]


def check_advantages(suite: AdapterSuite, case: Case) -> None:
    """The trainer's estimator on the adapter's rows equals the reference ReBN (1e-6); env tokens get 0."""
    _check_count(case)
    arr = _padded(case.rows)
    adv = np.asarray(suite.advantages(arr["token_rewards"], arr["response_mask"], gamma=case.scenario.gamma))
    assert adv.shape == arr["response_mask"].shape, (
        f"advantages() returned shape {adv.shape} for rows of shape {arr['response_mask'].shape}"
    )
    n, tol = len(case.rows), case.scenario.atol
    assert_matches_reference(_per_row(adv, arr["response_mask"], n, tol), case.reference)
    assert not np.abs(adv[arr["response_mask"] == 0]).max(initial=0.0) > tol, (
        f"scenario {case.scenario.name!r}: observation or padding tokens carry advantages"
    )


def check_padding(suite: AdapterSuite, case: Case) -> None:
    """Padding rows (no generated token) and extra width change nothing and get 0."""
    _check_count(case)
    arr = _padded(case.rows, extra_rows=3, extra_width=7)
    adv = np.asarray(suite.advantages(arr["token_rewards"], arr["response_mask"], gamma=case.scenario.gamma))
    n, tol = len(case.rows), case.scenario.atol
    assert_matches_reference(_per_row(adv, arr["response_mask"], n, tol), case.reference)
    assert not np.abs(adv[n:]).max(initial=0.0) > tol, "padding rows got advantages (or entered the statistics)"


def plain_rebn(rewards: np.ndarray, mask: np.ndarray, gamma: float, eps: float = 1e-8) -> np.ndarray:
    """Token-level ReBN by plain loops (turns = maximal runs of mask 1), for `check_random_rows`."""
    turns: list[tuple[int, int, int]] = []
    for i in range(mask.shape[0]):
        j = 0
        while j < mask.shape[1]:
            if mask[i, j]:
                k = j
                while k < mask.shape[1] and mask[i, k]:
                    k += 1
                turns.append((i, j, k))
                j = k
            else:
                j += 1
    returns: dict[tuple[int, int, int], float] = {}
    for i in range(mask.shape[0]):
        g = 0.0
        for t in reversed([t for t in turns if t[0] == i]):
            g = float(rewards[i, t[1] : t[2]].sum()) + gamma * g
            returns[t] = g
    out = np.zeros(rewards.shape)
    if not returns:
        return out
    values = list(returns.values())
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    for (i, s, e), g in returns.items():
        out[i, s:e] = (g - mean) / (std + eps)
    return out


def check_random_rows(suite: AdapterSuite, seed: int) -> None:
    """Random packed rows (with padding rows) through the trainer's estimator equal a plain loop."""
    rng = np.random.default_rng(seed)
    rows, width = int(rng.integers(2, 9)), int(rng.integers(5, 60))
    mask = (rng.random((rows, width)) < rng.uniform(0.3, 0.8)).astype(np.int64)
    mask[int(rng.integers(0, rows))] = 0  # a padding row
    mask[0, 0] = 1  # at least one turn
    rewards = np.where(mask == 1, rng.normal(size=mask.shape), 0.0) * (rng.random(mask.shape) < 0.4)
    gamma = float(rng.choice([0.0, 0.5, 0.9, 1.0]))
    got = np.asarray(suite.advantages(rewards, mask, gamma=gamma), dtype=np.float64)
    want = plain_rebn(rewards, mask, gamma)
    diff = np.abs(got - want)
    assert float(diff.max()) <= 1e-5, (
        f"random rows (seed {seed}, gamma {gamma}): advantages differ from the plain-loop ReBN by "
        f"{diff.max():.3g} at {np.unravel_index(diff.argmax(), diff.shape)}"
    )


class AdapterSuite:
    """Subclass as ``Test<Trainer>`` in the adapter's tests and implement the three hooks.

    Attributes:
        scenarios: the names of the scenarios to run (default: all of ``SCENARIOS``);
            the others are skipped, with the reason in the test report.
    """

    scenarios: ClassVar[tuple[str, ...]] = tuple(SCENARIOS)

    def tokenizer(self) -> Any:
        """The tokenizer the trainer uses (the reference is computed with it)."""
        raise NotImplementedError("AdapterSuite subclasses implement tokenizer()")

    def rollout(self, scenario: ConformanceScenario) -> list[PackedEpisode]:
        """``scenario.rows()`` through the trainer's real rollout path, one `PackedEpisode` per row."""
        raise NotImplementedError("AdapterSuite subclasses implement rollout(scenario)")

    def advantages(self, token_rewards: np.ndarray, response_mask: np.ndarray, *, gamma: float) -> np.ndarray:
        """The trainer's real estimator on ``[batch, length]`` rows: per-token advantages."""
        raise NotImplementedError("AdapterSuite subclasses implement advantages(...)")

    @pytest.fixture(scope="class", params=list(SCENARIOS))
    @classmethod
    def case(cls, request: Any) -> Case:
        """The scenario ``request.param`` as the adapter played it (once per class), with the reference."""
        name = request.param
        if name not in cls.scenarios:
            pytest.skip(f"{cls.__name__} does not run scenario {name!r} (scenarios={cls.scenarios})")
        suite = cls()
        scenario = SCENARIOS[name]
        reference = reference_for(scenario, suite.tokenizer())
        return Case(scenario, reference, list(suite.rollout(scenario)))

    def test_tokens_and_masks_equal_the_reference(self, case: Case) -> None:
        check_tokens(case)

    def test_rewards_sit_on_the_right_tokens(self, case: Case) -> None:
        check_rewards(case)

    def test_logprobs_only_on_generated_tokens(self, case: Case) -> None:
        check_logprobs(case)

    def test_advantages_equal_the_reference(self, case: Case) -> None:
        check_advantages(self, case)

    def test_padding_rows_stay_out_of_the_statistics(self, case: Case) -> None:
        check_padding(self, case)

    @pytest.mark.parametrize("seed", range(6))
    def test_random_rows_match_a_plain_loop(self, seed: int) -> None:
        check_random_rows(self, seed)
