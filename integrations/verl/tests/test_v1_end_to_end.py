"""verl's v1 path end to end on CPU: Ray agent-loop workers -> TransferQueue -> advantage step.

The slow test of the adapter (about a minute): verl's ``AgentLoopManagerTQ`` starts a
real ``AgentLoopWorkerTQ`` Ray actor, which loads the gem-verl plugin on ``import verl``,
plays the conformance episodes with ``gem_agent`` against the in-process tiny model and
stores each output in TransferQueue; the v1 trainer's own ``_compute_advantage`` then
reads ``rm_scores`` back, dispatches to ``rebn`` and writes the advantages to
TransferQueue, where they must equal the conformance reference.
"""

from __future__ import annotations

import os
import time
import uuid
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("verl", reason="gem-verl's tests need verl installed (make test-verl builds its venv)")
pytest.importorskip("transfer_queue", reason="verl's v1 path needs TransferQueue (pip install TransferQueue)")
ray = pytest.importorskip("ray", reason="verl's v1 path needs Ray")

from gem_verl.testing import TinyModelClient, conformance_script  # noqa: E402

from gem_core.testing.conformance import SCENARIO, assert_matches_reference, per_turn_values  # noqa: E402

from .conftest import compose_config  # noqa: E402


@pytest.fixture
def ray_cluster(tmp_path_factory):
    env = {k: os.environ[k] for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TOKENIZERS_PARALLELISM", "WANDB_MODE") if k in os.environ}
    env["TRANSFER_QUEUE_ENABLE"] = "1"
    ray.init(
        num_cpus=8,  # logical slots for the TQ controller, one storage unit and the worker
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": env},
        # Sessions, sockets and logs in the test's temp dir, not in the host's /tmp/ray.
        _temp_dir=str(tmp_path_factory.mktemp("ray")),
    )
    try:
        yield
    finally:
        ray.shutdown()


# Quiet: ~40 s. Ray's dozen processes share the CPUs with whatever else runs: beside two CPU
# hogs on 2 cores the call ran past 420 s, so the limits leave room for a loaded CI box.
@pytest.mark.timeout(1200)
def test_agent_loop_manager_tq_to_advantages(ray_cluster, tiny_model_path, reference):
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1 import AgentLoopManagerTQ
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer
    from verl.utils import tensordict_utils as tu

    config = compose_config(
        tiny_model_path,
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "transfer_queue.enable=True",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    )
    tq.init(config.transfer_queue)
    try:
        client = TinyModelClient(config, tiny_model_path, script=conformance_script)
        manager = AgentLoopManagerTQ.create(config=config, llm_client=client)

        # One gen batch as the v1 trainer builds it from the dataset (see _fetch_one_gen_batch).
        n = len(SCENARIO.seeds)
        uids = [str(uuid.uuid4()) for _ in range(n)]
        batch = tu.get_tensordict(
            {
                "raw_prompt": np.array([[{"role": "user", "content": "play"}] for _ in range(n)], dtype=object),
                "env_id": np.array([SCENARIO.env_id] * n, dtype=object),
                "seed": np.array(SCENARIO.seeds, dtype=np.int64),
                "agent_name": np.array(["gem_agent"] * n, dtype=object),
                "index": np.arange(n),
                "data_source": np.array([f"gem:{SCENARIO.env_id}"] * n, dtype=object),
                "uid": np.array(uids, dtype=object),
            }
        )
        tu.assign_non_tensor_data(batch, "global_steps", 0)
        tags = [{"is_prompt": True, "status": "pending", "global_steps": 0} for _ in range(n)]
        tq.kv_batch_put(keys=uids, partition_id="train", tags=tags)
        manager.generate_sequences(batch)

        deadline = time.monotonic() + 600
        while True:
            listed = tq.kv_list("train").get("train", {})
            status = {u: (listed.get(u) or {}).get("status") for u in uids}
            if all(s in ("finished", "failure") for s in status.values()):
                break
            assert time.monotonic() < deadline, f"rollouts did not finish: {status}"
            time.sleep(0.5)
        assert set(status.values()) == {"finished"}, status

        keys = [f"{u}_0_0" for u in uids]  # {uid}_{session}_{output index}
        stored = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["rm_scores", "response_mask"])
        for i in range(n):
            p = reference.packed(i)
            np.testing.assert_array_equal(stored["response_mask"][i].numpy(), p["response_mask"])
            np.testing.assert_allclose(stored["rm_scores"][i].numpy(), p["token_rewards"], atol=1e-7)

        # The actor's old-log-prob step (skipped here: no training engine on CPU) would write
        # old_log_probs; the tiny model that generated is the policy, so they are its
        # rollout log-probs.
        from tensordict import TensorDict

        lp = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["rollout_log_probs"])
        tq.kv_batch_put(
            keys=keys,
            partition_id="train",
            fields=TensorDict({"old_log_probs": lp["rollout_log_probs"]}, batch_size=n),
        )

        # The v1 trainer's advantage step, verbatim (it reads rm_scores from TransferQueue).
        meta = KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train")
        trainer = SimpleNamespace(config=config)
        PPOTrainer._compute_advantage(trainer, meta, metrics={})
        out = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["advantages", "response_mask"])
        got = [per_turn_values(out["advantages"][i].numpy(), out["response_mask"][i].numpy()) for i in range(n)]
        assert_matches_reference(got, reference)
    finally:
        tq.close()
