"""The ``rebn`` estimator through verl's own advantage dispatch, against the conformance reference.

Padding rows and random packed rows are checked by the inherited adapter suite
(``test_adapter_suite.py``); turn numbering by the kit's own tests (gem_core.rl.packing).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl", reason="gem-verl's tests need verl installed (make test-verl builds its venv)")

import torch  # noqa: E402
from gem_verl.advantage import compute_rebn_advantage  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402

from gem_core.testing.conformance import SCENARIO, assert_matches_reference, per_turn_values  # noqa: E402


def _batch(reference, width: int = 400) -> DataProto:
    """The reference episodes as verl rows: right-padded responses, rewards, masks, uids."""
    n = len(reference.episodes)
    mask = torch.zeros(n, width, dtype=torch.int64)
    rewards = torch.zeros(n, width, dtype=torch.float32)
    for i in range(len(reference.episodes)):
        p = reference.packed(i)
        m = len(p["response_mask"])
        mask[i, :m] = torch.tensor(p["response_mask"])
        rewards[i, :m] = torch.tensor(p["token_rewards"], dtype=torch.float32)
    uids = np.array([f"uid{i}" for i in range(n)], dtype=object)
    batch = TensorDict({"response_mask": mask, "token_level_rewards": rewards}, batch_size=n)
    return DataProto(batch=batch, non_tensor_batch={"uid": uids})


def _rows(data: DataProto, key: str, n: int) -> list[np.ndarray]:
    return [
        per_turn_values(data.batch[key][i].numpy(), data.batch["response_mask"][i].numpy())
        for i in range(n)
    ]


def test_legacy_compute_advantage_equals_reference(reference, verl_config):
    algo = omega_conf_to_dataclass(verl_config.algorithm)
    assert algo.adv_estimator == "rebn" and algo.gamma == SCENARIO.gamma
    data = compute_advantage(_batch(reference), adv_estimator=algo.adv_estimator, gamma=algo.gamma, config=algo)
    n = len(reference.episodes)
    assert_matches_reference(_rows(data, "advantages", n), reference)
    assert_matches_reference(_rows(data, "returns", n), reference, what="returns")
    # Env tokens and padding carry no advantage.
    assert not data.batch["advantages"][data.batch["response_mask"] == 0].any()


def test_v1_compute_advantage_for_multi_trajectories_equals_reference(reference, verl_config):
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    data = _batch(reference)
    keys = [f"uid{i}_0_0" for i in range(len(data))]
    data = compute_advantage_for_multi_trajectories(
        data,
        batch_keys=keys,
        adv_estimator=verl_config.algorithm.adv_estimator,
        gamma=verl_config.algorithm.gamma,
        lam=verl_config.algorithm.lam,
        config=verl_config.algorithm,  # the v1 trainer passes the DictConfig
    )
    assert_matches_reference(_rows(data, "advantages", len(data)), reference)


def test_gamma_comes_from_the_config(reference):
    data = _batch(reference)
    rewards, mask = data.batch["token_level_rewards"], data.batch["response_mask"]
    _, ret1 = compute_rebn_advantage(rewards, mask, config={"gamma": 1.0})
    _, ret9 = compute_rebn_advantage(rewards, mask, config={"gamma": 0.9})
    first = [int(np.flatnonzero(mask[i].numpy())[0]) for i in range(len(data))]
    # Seed 0: rewards 0.06, 0, 0.02, 0 -> G_0 = 0.08 (gamma 1) and 0.06 + 0.81 * 0.02 (gamma 0.9).
    assert ret1[0, first[0]].item() == pytest.approx(0.08, abs=1e-6)
    assert ret9[0, first[0]].item() == pytest.approx(0.06 + 0.81 * 0.02, abs=1e-6)


def test_shape_mismatch_message():
    with pytest.raises(ValueError, match=r"token_level_rewards \(2, 3\) and response_mask \(2, 4\) must have the same shape"):
        compute_rebn_advantage(torch.zeros(2, 3), torch.zeros(2, 4))
