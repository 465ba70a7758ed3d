"""GemLearner: every transition of a step reaches the whitening (oat 0.2.4 subsamples them)."""

from __future__ import annotations

import pytest

pytest.importorskip("oat", reason="gem-oat's tests need oat-llm 0.2.4 (make venv-oat)")

import numpy as np  # noqa: E402

from tests.oat_harness import CapturingLearner, row_transitions  # noqa: E402


def _episodes():
    mask = np.array([[1, 0, 1, 0, 1, 0, 1]] * 5)  # 5 episodes x 4 turns = 20 transitions
    rewards = np.zeros(mask.shape)
    rewards[:, 6] = np.arange(5)
    return row_transitions(rewards, mask)[0]


def test_oat_alone_keeps_a_random_subset_before_whitening():
    lrn = CapturingLearner(keep_all_transitions=False, rollout_batch_size_per_device=4)
    captured = lrn.learn(_episodes())
    assert len(captured) == 4, "oat 0.2.4 keeps rollout_batch_size_per_device transitions"
    assert abs(np.mean(list(captured.values()))) < 1e-5  # whitened over the subset only


def test_gem_learner_keeps_every_transition_and_restores_the_limit():
    lrn = CapturingLearner(rollout_batch_size_per_device=4)
    captured = lrn.learn(_episodes())
    assert len(captured) == 20
    assert lrn.learner.args.rollout_batch_size_per_device == 4
    values = np.array(list(captured.values()))
    assert abs(values.mean()) < 1e-5 and abs(values.std() - 1) < 1e-5

