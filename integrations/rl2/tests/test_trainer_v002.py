"""rl-square 0.0.2's own actor update and data-parallel scatter on the adapter's batch (CPU).

The batch is the conformance scenario through RL2's ``Rollout.__call__`` with
``adv.estimator=rebn`` applied by the wrapped ``RL2.trainer.ppo.compute_advantages``.
`Actor.update` runs as the trainer calls it (``rl2_trainer.build_actor``: the actor
without its flash-attention/FSDP ``__init__``, see STUBS.md); its scatter
(``tensor_dict_to_minibatches``) runs on two gloo ranks.
"""

from __future__ import annotations

import pytest

RL2 = pytest.importorskip(
    "RL2", reason="gem-rl2's tests need rl-square (make test-rl2 builds its venv)"
)

import torch  # noqa: E402

from gem_core.testing.conformance import SCENARIO  # noqa: E402

from .conftest import init_rl2_process  # noqa: E402
from .rl2_trainer import check_scatter, check_update  # noqa: E402
from .rl2_v002 import rl2_config  # noqa: E402
from .test_adapter_suite_v002 import _setup, play_scenario  # noqa: E402

ACTOR = (
    "actor.offload_model=false",
    "actor.offload_optimizer=false",
    "actor.max_length_per_device=4096",
)


@pytest.fixture(scope="module")
def batch():
    """``(raw, cu_seqs, with_advantages)``: RL2's rollout batch before and after the rebn advantages."""
    import RL2.trainer.ppo as ppo
    from gem_rl2.train import install

    raw, cu_seqs, _ = play_scenario(SCENARIO)
    init_rl2_process()
    install()
    done = {k: v.clone() for k, v in raw.items()}
    ppo.compute_advantages(rl2_config(_setup()[0], *ACTOR).adv, done, cu_seqs, 1)
    return raw, cu_seqs, done


def test_actor_update_reads_the_adapters_advantages_and_moves_the_model(batch):
    config = rl2_config(_setup()[0], *ACTOR)
    check_update(config.actor, batch[2], _setup()[0])


def test_two_ranks_receive_the_single_process_advantages(batch, tmp_path):
    raw, cu_seqs, done = batch
    check_scatter(
        {k: v.clone() for k, v in raw.items()},
        cu_seqs,
        rl2_config(_setup()[0], *ACTOR),
        done,
        tmp_path,
    )
    assert torch.equal(raw["rewards"], done["rewards"])  # the rollout batch itself is untouched
