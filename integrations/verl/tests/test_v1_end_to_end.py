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


def _ray_init(temp_dir: str, extra_env: dict[str, str] | None = None) -> None:
    env = {k: os.environ[k] for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TOKENIZERS_PARALLELISM", "WANDB_MODE") if k in os.environ}
    env["TRANSFER_QUEUE_ENABLE"] = "1"
    ray.init(
        num_cpus=8,  # logical slots for the TQ controller, one storage unit and the worker
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {**env, **(extra_env or {})}},
        # Sessions, sockets and logs in the test's temp dir, not in the host's /tmp/ray.
        _temp_dir=temp_dir,
    )


@pytest.fixture
def ray_cluster(tmp_path_factory):
    _ray_init(str(tmp_path_factory.mktemp("ray")))
    try:
        yield
    finally:
        ray.shutdown()


def _play_rows(config, client, env_id: str, seeds) -> tuple[list[str], dict[str, str]]:
    """One gen batch of ``env_id`` rows (as the v1 trainer builds it from the dataset) through
    verl's AgentLoopManagerTQ; returns the rows' keys and their final statuses."""
    import transfer_queue as tq
    from verl.trainer.ppo.v1 import AgentLoopManagerTQ
    from verl.utils import tensordict_utils as tu

    manager = AgentLoopManagerTQ.create(config=config, llm_client=client)
    n = len(seeds)
    uids = [str(uuid.uuid4()) for _ in range(n)]
    batch = tu.get_tensordict(
        {
            "raw_prompt": np.array([[{"role": "user", "content": "play"}] for _ in range(n)], dtype=object),
            "env_id": np.array([env_id] * n, dtype=object),
            "seed": np.array(list(seeds), dtype=np.int64),
            "agent_name": np.array(["gem_agent"] * n, dtype=object),
            "index": np.arange(n),
            "data_source": np.array([f"gem:{env_id}"] * n, dtype=object),
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
    return [f"{u}_0_0" for u in uids], status  # {uid}_{session}_{output index}


def _tq_config(tiny_model_path):
    return compose_config(
        tiny_model_path,
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "transfer_queue.enable=True",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    )


# Quiet: ~40 s. Ray's dozen processes share the CPUs with whatever else runs: beside two CPU
# hogs on 2 cores the call ran past 420 s, so the limits leave room for a loaded CI box.
@pytest.mark.timeout(1200)
def test_agent_loop_manager_tq_to_advantages(ray_cluster, tiny_model_path, reference):
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    config = _tq_config(tiny_model_path)
    tq.init(config.transfer_queue)
    try:
        client = TinyModelClient(config, tiny_model_path, script=conformance_script)
        n = len(SCENARIO.seeds)
        keys, status = _play_rows(config, client, SCENARIO.env_id, SCENARIO.seeds)
        assert set(status.values()) == {"finished"}, status

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


# Quiet: ~40 s each; the limits as above.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("route", ["env-module", "entry-point"])
def test_a_users_env_reaches_the_agent_loop_workers(tmp_path_factory, tiny_model_path, route):
    """A user's env is played by verl's real AgentLoopWorkerTQ actor, every row finishing
    with the env's per-turn rewards, by either route: a module on no path named the way
    ``recipes/verl_rebn.py --env-module`` names it (`gem_core.use_env_modules`, the variables
    in Ray's runtime_env), or an installed distribution with a ``gem_core.envs`` entry point
    on the workers' path (no env-module option; the driver never imports it)."""
    import sys

    import transfer_queue as tq

    import gem_core
    from gem_core.testing.user_env import (
        USER_ENV_REWARDS,
        write_user_env_module,
        write_user_env_package,
    )

    folder = tmp_path_factory.mktemp("user_code")
    saved = {k: os.environ.get(k) for k in ("GEM_ENV_MODULES", "PYTHONPATH")}
    saved_path = list(sys.path)
    try:
        if route == "env-module":
            mod = write_user_env_module(folder)
            carried = gem_core.use_env_modules([str(mod.path)])
        else:  # what `pip install` of the user's package into the workers' venv gives them
            mod = write_user_env_package(folder)
            path = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
            carried = {"PYTHONPATH": os.pathsep.join(path)}
            assert mod.env_id not in dict.keys(gem_core.registry)
        _ray_init(str(tmp_path_factory.mktemp("ray")), carried)
        config = _tq_config(tiny_model_path)
        tq.init(config.transfer_queue)
        try:
            client = TinyModelClient(config, tiny_model_path, script=conformance_script)
            keys, status = _play_rows(config, client, mod.env_id, [0, 1])
            assert set(status.values()) == {"finished"}, status
            stored = tq.kv_batch_get(keys=keys, partition_id="train", select_fields=["rm_scores", "response_mask"])
            for i in range(2):
                scores = stored["rm_scores"][i].numpy()  # each turn's reward on its last generated token
                assert scores[scores != 0].tolist() == list(USER_ENV_REWARDS)
                assert (stored["response_mask"][i].numpy()[scores != 0] == 1).all()
        finally:
            tq.close()
            ray.shutdown()
    finally:
        sys.path[:] = saved_path
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
