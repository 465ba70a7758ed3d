"""RL2 HEAD's own actor update and data-parallel scatter on the adapter's batch (CPU).

The batch is the conformance scenario through ``SampleGroup.generate`` with
``adv.estimator=rebn`` applied by the wrapped ``RL2.trainer.ppo.compute_advantages``
(the whole config). ``FSDPActor.ppo_update`` runs as the trainer calls it
(``rl2_trainer.build_actor``: the actor without its flash-attention/FSDP ``__init__``,
see STUBS.md); its scatter (``FSDPActor._scatter_data``) runs on two gloo ranks. The
config is ``ppo.yaml`` with ``actor/fsdp.yaml`` under ``actor``, as Hydra composes it.
"""

from __future__ import annotations

import importlib
import os

import pytest

RL2 = pytest.importorskip("RL2")
if not hasattr(importlib.import_module("RL2.datasets"), "SampleGroup"):
    pytest.skip(
        "the RL2 on sys.path is not HEAD (no RL2.datasets.SampleGroup)", allow_module_level=True
    )

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from gem_core.testing.conformance import SCENARIO  # noqa: E402

from ..rl2_trainer import check_scatter, check_update  # noqa: E402
from .test_head_suite import _setup, head_config, play_scenario  # noqa: E402


def trainer_config():
    """``head_config`` with the FSDP actor's keys (``actor: fsdp`` in ppo.yaml's defaults), no offloading."""
    import RL2.trainer

    fsdp = OmegaConf.load(
        os.path.join(os.path.dirname(RL2.trainer.__file__), "config", "actor", "fsdp.yaml")
    )
    ours = head_config(_setup()[0], "actor.offload_model=false", "actor.offload_optimizer=false")
    return OmegaConf.merge({"actor": fsdp}, ours)


@pytest.fixture(scope="module")
def batch():
    """``(raw, cu_seqs, with_advantages)``: RL2's rollout batch before and after the rebn advantages."""
    import RL2.trainer.ppo as ppo
    from gem_rl2.train import install

    raw, cu_seqs, _ = play_scenario(SCENARIO)
    install()
    done = {k: v.clone() for k, v in raw.items()}
    ppo.compute_advantages(trainer_config(), done, cu_seqs, 1)
    return raw, cu_seqs, done


def test_actor_ppo_update_reads_the_adapters_advantages_and_moves_the_model(batch):
    check_update(trainer_config().actor, batch[2], _setup()[0])


def test_two_ranks_receive_the_single_process_advantages(batch, tmp_path):
    raw, cu_seqs, done = batch
    check_scatter({k: v.clone() for k, v in raw.items()}, cu_seqs, trainer_config(), done, tmp_path)
    assert torch.equal(raw["rewards"], done["rewards"])  # the rollout batch itself is untouched
