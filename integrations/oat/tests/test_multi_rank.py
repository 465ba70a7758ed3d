"""World size 2 on CPU: each learner rank's whitened advantages are the ReBN of the whole batch.

Two spawned processes (gloo, a FileStore in ``tmp_path``) each run `GemLearner`'s
``process_feedback_data`` and ``learn()`` around oat's real ``learn()``/``learning_step``
(`tests.oat_harness.CapturingLearner`, oat's ``DeepspeedStrategy`` over the two ranks) on
their own episodes, 3 and 9 transitions. Every transition's advantage must equal
`gem_core.rl`'s ReBN over all 12, computed here in one process (ReBN over one rank's
transitions alone differs), and both ranks must make the same number of backward/optimizer
steps — under DeepSpeed each is a collective, so uneven counts would hang: the shorter rank
trains on zero-loss pads (advantage 0, ``loss_mask`` False). A rank with no transition makes
every rank raise `UsageError`.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("oat", reason="gem-oat's tests need oat-llm 0.2.4 (make venv-oat)")

from gem_core.errors import UsageError  # noqa: E402
from gem_core.rl.advantages import per_turn_advantages  # noqa: E402
from gem_core.testing.ranks import RankProcesses, gloo_group, reporting  # noqa: E402
from tests.conftest import tiny_model_path  # noqa: E402
from tests.oat_harness import CapturingLearner, row_transitions  # noqa: E402

WORLD = 2
GAMMA = 0.9
# Per-turn rewards of 5 episodes (1 to 4 turns); rank 0 gets the first two, rank 1 the rest.
TURN_REWARDS = [[1.0], [0.0, 2.0], [0.5, 0.0, 1.0], [0.0, 0.0, 0.0, 3.0], [-1.0, 0.5]]
SHARDS = [slice(0, 2), slice(2, 5)]
TIMEOUT_S = 60  # per message from a rank, and gloo's own timeout: a hang fails


def _batch():
    """The episodes as oat transitions and, per episode, each turn's input ids (its key)."""
    width = 3 * max(len(r) for r in TURN_REWARDS)
    mask = np.zeros((len(TURN_REWARDS), width), dtype=np.int64)
    rewards = np.zeros(mask.shape)
    for i, turns in enumerate(TURN_REWARDS):
        for k, r in enumerate(turns):  # 2 generated tokens, then 1 env token
            mask[i, 3 * k : 3 * k + 2] = 1
            rewards[i, 3 * k + 1] = r
    episodes, index = row_transitions(rewards, mask)
    return episodes, [[key for _, _, key in turns] for turns in index]


def _rank_main(rank: int, conn, store: str, shards=None) -> None:
    """One learner rank: oat's learn() on its episodes; sends back what it trained on."""
    with reporting(conn):
        gloo_group(rank, WORLD, store, timeout_s=TIMEOUT_S)
        episodes, _ = _batch()
        lrn = CapturingLearner(gamma=GAMMA)
        try:
            lrn.learn(episodes[(shards or SHARDS)[rank]])
        except UsageError as exc:
            conn.send(("usage_error", str(exc)))
            return
        learner = lrn.learner
        conn.send(
            (
                "ok",
                {
                    "world_size": learner.strategy.world_size,
                    "trained": learner.trained,
                    "backward_calls": learner.strategy.backward_calls,
                    "buffer_after": len(learner.pi_buffer),
                },
            )
        )


def _rebn(episodes: slice, keys: list[list[tuple[int, ...]]]) -> dict[tuple[int, ...], float]:
    """gem_core.rl's ReBN over the turns of ``episodes``, by transition key."""
    advantages, _ = per_turn_advantages(TURN_REWARDS[episodes], "rebn", gamma=GAMMA)
    pairs = zip(keys[episodes], advantages, strict=True)
    return {k: float(a) for ks, adv in pairs for k, a in zip(ks, adv, strict=True)}


def _run_ranks(tmp_path, shards=None) -> list[tuple[str, object]]:
    """Spawn the two ranks; each one's ``(status, payload)``. A hang or a dead rank fails."""
    tiny_model_path()  # build the cached model once, before the ranks load it
    store = str(tmp_path / "store")  # gloo's rendezvous: a file, no TCP store
    with RankProcesses(_rank_main, WORLD, args=(store, shards), timeout_s=TIMEOUT_S) as ranks:
        return [ranks.recv_status(r) for r in range(WORLD)]


def test_each_rank_whitens_with_the_whole_batch_statistics(tmp_path):
    results = _run_ranks(tmp_path)
    _, keys = _batch()
    whole = _rebn(slice(None), keys)
    assert len(whole) == 12
    steps = [res["backward_calls"] for _, res in results]
    assert steps[0] == steps[1] == max(len(ks) for ks in (sum(keys[sh], []) for sh in SHARDS)), (
        f"backward steps per rank {steps}: uneven steps hang DeepSpeed's collectives"
    )
    for r, (status, res) in enumerate(results):
        assert status == "ok", res
        assert res["world_size"] == WORLD, f"rank {r}: oat's strategy saw world size {res['world_size']}"
        assert res["buffer_after"] == len(sum(keys[SHARDS[r]], [])), f"rank {r}: the pads stayed in the buffer"
        mine = [k for ks in keys[SHARDS[r]] for k in ks]
        trained: dict[tuple[int, ...], list[float]] = {}
        for k, a in res["trained"]:
            trained.setdefault(k, []).append(a)
        assert sorted(trained) == sorted(mine), f"rank {r} trained on {sorted(trained)}, expected its transitions {mine}"
        pads = 0
        for k in mine:
            values = sorted(trained[k], key=lambda a: abs(a - whole[k]))
            assert values[0] == pytest.approx(whole[k], abs=1e-6), (
                f"rank {r}, transition {k}: {values[0]} is not the whole-batch ReBN {whole[k]}"
            )
            assert all(a == 0.0 for a in values[1:]), f"rank {r}, transition {k}: a pad with advantage {values[1:]}"
            pads += len(values) - 1
        assert pads == steps[r] - len(mine)
        # Normalising with the rank's own transitions only gives other advantages: the test tells them apart.
        local = _rebn(SHARDS[r], keys)
        assert max(abs(local[k] - whole[k]) for k in mine) > 0.1, f"rank {r}: rank-local ReBN equals the global one"


def test_a_rank_without_transitions_is_a_clear_error_on_every_rank(tmp_path):
    results = _run_ranks(tmp_path, shards=[slice(0, 0), slice(0, 5)])
    for r, (status, message) in enumerate(results):
        assert status == "usage_error", f"rank {r}: {status} {message}"
        assert "a learner rank has no transition this step while another has 12" in message
