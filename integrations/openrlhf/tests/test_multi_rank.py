"""gem-openrlhf at data-parallel world size 2.

OpenRLHF is single-controller: the ``PPOTrainer`` Ray actor (the driver) runs the experience
maker over the whole rollout batch — ``make_experience_batch`` -> the adapter's
``compute_advantages_and_returns`` on every micro-batch at once — and only then hands the
experiences to its actor ranks with ``RayActorGroup.async_run_method_batch("append", ...)``. No
rank computes statistics of its own, so every rank must hold exactly its rows of the
whole-batch ReBN. This test runs OpenRLHF's own split (``async_run_method_batch`` and each
rank's ``BaseModelActor.execute_batch``) to two ranks on the adapter's experiences and checks
every rank's advantages against a ReBN oracle written from the definition over the whole batch;
a rank-local normalisation differs from it, so the check can fail. The Ray actor handles and
``ray.put`` are replaced by local objects (no cluster): the split itself is OpenRLHF's.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip(
    "openrlhf", reason="gem-openrlhf's tests need openrlhf (make test-openrlhf builds its venv)"
)

import torch  # noqa: E402
from gem_openrlhf.agent import TOKEN_REWARDS, make_label  # noqa: E402
from gem_openrlhf.experience import REBN_EPS  # noqa: E402
from openrlhf_harness import harness  # noqa: E402

from gem_core.testing.conformance import SCENARIO, scenario_script  # noqa: E402

WORLD_SIZE = 2


def oracle(rows, gamma: float, eps: float = REBN_EPS) -> list[np.ndarray]:
    """ReBN from the definition: a turn is a maximal run of action-mask tokens, its reward the
    sum of the token rewards in it; G_t = r_t + gamma G_{t+1} per row; A = (G - mean) / (std + eps)
    over every turn of every row (population std); each token of a turn gets its turn's A."""
    spans, returns = [], []
    for rewards, mask in rows:
        turns, t = [], 0
        while t < len(mask):
            if mask[t]:
                s = t
                while t < len(mask) and mask[t]:
                    t += 1
                turns.append((s, t, float(sum(rewards[s:t]))))
            else:
                t += 1
        g, row_returns = 0.0, []
        for _, _, r in reversed(turns):
            g = r + gamma * g
            row_returns.append(g)
        spans.append(turns)
        returns.append(row_returns[::-1])
    flat = np.array([g for row in returns for g in row], dtype=np.float64)
    mean, std = flat.mean(), flat.std()
    out = []
    for (rewards, _), turns, row_returns in zip(rows, spans, returns, strict=True):
        adv = np.zeros(len(rewards))
        for (s, e, _), g in zip(turns, row_returns, strict=True):
            adv[s:e] = (g - mean) / (std + eps)
        out.append(adv)
    return out


def rows_of(experiences):
    """(token rewards, action mask) per row, as the advantage step reads them, before it runs."""
    rows = []
    for exp in experiences:
        rewards = exp.info[TOKEN_REWARDS]
        for i in range(exp.action_mask.shape[0]):
            rows.append((rewards[i].tolist(), exp.action_mask[i].tolist()))
    return rows


class LocalRank:
    """One actor rank: OpenRLHF's own ``BaseModelActor.execute_batch`` on a local object whose
    ``append`` keeps what ``PolicyModelActor.append`` puts in its replay buffer."""

    def __init__(self, strategy):
        from openrlhf.trainer.ray.launcher import BaseModelActor

        self.strategy = strategy
        self.received: list = []
        self._execute = functools.partial(BaseModelActor.execute_batch, self)
        self.execute_batch = type("Method", (), {"remote": staticmethod(self._execute)})()

    def append(self, experience):
        self.received.append(experience)


def test_every_rank_holds_its_rows_of_the_whole_batch_rebn(monkeypatch):
    import openrlhf.trainer.ray.launcher as launcher

    h = harness()
    engine = h.engine(script=functools.partial(scenario_script, SCENARIO.name))
    labels = [
        make_label(SCENARIO.env_id, s, max_tokens_per_turn=SCENARIO.max_new_tokens)
        for s in SCENARIO.seeds
    ]
    batches = h.micro_batches(h.experiences(h.responses(engine, labels)))
    assert len(batches) >= WORLD_SIZE, "the scenario must give every rank a micro-batch"
    rows = rows_of(batches)
    want = oracle(rows, SCENARIO.gamma)
    experiences = h.advantages(batches, SCENARIO.gamma)  # the driver: once, over the whole batch

    # OpenRLHF's split to its actor ranks (PPOTrainer.train_step), Ray handles made local.
    monkeypatch.setattr(launcher.ray, "put", lambda obj: obj)
    group = object.__new__(launcher.RayActorGroup)
    ranks = [LocalRank(h.trainer.strategy) for _ in range(WORLD_SIZE)]
    group._actor_handlers, group.duplicate_actors = ranks, 1
    group.async_run_method_batch(method_name="append", experience=experiences)

    got_rows, local = [], []
    for rank in ranks:
        assert rank.received, "every rank gets experiences"
        rank_rows = []
        for exp in rank.received:
            for i in range(exp.action_mask.shape[0]):
                n = exp.action_mask.shape[1]
                rank_rows.append(exp.advantages[i, :n].double().numpy())
        got_rows.extend(rank_rows)
        local.extend(oracle(rows[len(got_rows) - len(rank_rows) : len(got_rows)], SCENARIO.gamma))
    assert len(got_rows) == len(rows), "every row on exactly one rank"
    for i, (got, exp_row) in enumerate(zip(got_rows, want, strict=True)):
        np.testing.assert_allclose(got, exp_row, atol=1e-6, err_msg=f"row {i}")
    # Rank-local statistics would be wrong: the check above can fail.
    assert max(float(np.abs(a - b).max()) for a, b in zip(local, want, strict=True)) > 1e-3
    assert any(torch.count_nonzero(e.advantages) for e in experiences)
