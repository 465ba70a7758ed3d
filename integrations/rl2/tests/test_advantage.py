"""gem_rl2.advantage.rebn_advantages on RL2's layout: trajectories of several sequences."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gem_rl2.advantage import rebn_advantages, wrap_compute_advantages  # noqa: E402

from gem_core.testing.adapter_suite import plain_rebn  # noqa: E402


@pytest.mark.parametrize("seed", range(4))
def test_trajectories_of_several_sequences_equal_a_plain_loop(seed):
    """A trajectory split over sequences (cu_seqs) has the turns of its sequences, in order."""
    rng = np.random.default_rng(seed)
    seqs, width = 7, 12
    mask = (rng.random((seqs, width)) < 0.5).astype(np.int64)
    mask[:, 0] = 0  # sequences start with a prompt token
    rewards = np.where(mask == 1, rng.normal(size=mask.shape), 0.0) * (rng.random(mask.shape) < 0.5)
    cu_seqs = [0, 3, 4, 7]  # trajectories of 3, 1 and 3 sequences
    td = {"action_mask": torch.tensor(mask), "rewards": torch.tensor(rewards, dtype=torch.float32)}
    rebn_advantages(td, torch.tensor(cu_seqs), gamma=0.9)
    # The plain loop sees each trajectory as one row: its sequences side by side, a 0 between.
    rows_m, rows_r = [], []
    for a, b in zip(cu_seqs, cu_seqs[1:], strict=False):
        m = np.concatenate([np.append(mask[r], 0) for r in range(a, b)])
        r = np.concatenate([np.append(rewards[r].astype(np.float32), 0.0) for r in range(a, b)])
        rows_m.append(m)
        rows_r.append(r)
    n = max(len(m) for m in rows_m)
    pm = np.stack([np.pad(m, (0, n - len(m))) for m in rows_m])
    pr = np.stack([np.pad(r, (0, n - len(r))) for r in rows_r])
    want = plain_rebn(pr, pm, 0.9)
    for t, (a, b) in enumerate(zip(cu_seqs, cu_seqs[1:], strict=False)):
        for k, r in enumerate(range(a, b)):
            got = td["advantages"][r].double().numpy()
            np.testing.assert_allclose(got, want[t, k * (width + 1) : k * (width + 1) + width], atol=1e-5)


def test_bad_cu_seqs_are_rejected():
    td = {"action_mask": torch.ones(2, 3, dtype=torch.long), "rewards": torch.zeros(2, 3)}
    with pytest.raises(ValueError, match="does not split 2 sequences"):
        rebn_advantages(td, torch.tensor([0, 1]), gamma=1.0)


def test_wrapper_delegates_other_estimators_and_is_idempotent():
    calls = []

    def original(config, tensor_dict, cu_seqs, step):
        calls.append((config["estimator"], step))

    wrapped = wrap_compute_advantages(original)
    assert wrap_compute_advantages(wrapped) is wrapped
    wrapped({"estimator": "gae", "gamma": 1.0}, {}, None, 3)
    assert calls == [("gae", 3)]


def test_the_wrapped_global_is_checked_with_a_named_message():
    """gem-rl2 wraps RL2.trainer.ppo.compute_advantages (a module global); the installed RL2's
    passes the check, and a changed signature is named with the tested releases."""
    from gem_rl2.advantage import check_rl2_hook, install

    install()  # the installed RL2 (rl-square 0.0.2, or HEAD with GEM_RL2_SRC) passes
    install()  # idempotent, and the wrapped function is checked through its __wrapped__

    def changed(config, batch, step):
        return None

    with pytest.raises(ImportError, match=r"RL2 changed RL2.trainer.ppo.compute_advantages: .*tested with RL2 HEAD 9161ede"):
        check_rl2_hook(changed)
