"""World size 2 on CPU: each data-parallel rank trains on the driver's ``rebn`` advantages.

verl computes advantages once, in the driver, over the whole batch; ``update_actor`` then
splits the batch across the data-parallel ranks. Here the driver runs verl's
``compute_advantage`` (``rebn``) and the legacy trainer's conversion (``to_tensordict``,
``left_right_2_no_padding``), the dispatch function registered on verl's
``ActorRolloutRefWorker.update_actor`` splits the batch for the dp ranks that two spawned
processes (gloo, a FileStore in ``tmp_path``) report through verl's ``Worker``, and each rank
runs verl's actor loss (``workers/utils/losses.py::ppo_loss``) on its chunk, backward, and
the data-parallel gradient average. Stand-ins (the Ray object store, the FSDP engine): see
STUBS.md.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("verl", reason="gem-verl's tests need verl installed (make test-verl builds its venv)")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.workers.utils.losses import ppo_loss  # noqa: E402

from gem_core.testing.ranks import RankProcesses, gloo_group, reporting  # noqa: E402

WORLD = 2
ROWS = 4  # episodes of 1, 2, 3 and 4 turns; verl's chunk needs a multiple of the dp size
TIMEOUT_S = 60  # per message from a rank, and gloo's own timeout: a hang fails


def _log_probs(model, input_ids) -> torch.Tensor:
    """The model's log-prob of each next token, flat over the jagged rows (verl's no-padding
    ``log_probs``: position ``t`` holds ``log p(x_{t+1} | x_{<=t})``, the last one 0)."""
    rows = []
    for ids in input_ids.unbind():
        logp = torch.log_softmax(model(input_ids=ids[None]).logits[0, :-1].float(), -1)
        rows.append(torch.cat([logp.gather(-1, ids[1:, None])[:, 0], logp.new_zeros(1)]))
    return torch.cat(rows)


def _actor_backward(model, data: TensorDict, actor, dp_size: int) -> torch.Tensor:
    """verl's actor loss on ``data`` and its backward; returns the loss.

    The global token count and dp size are set as ``FSDPEngine.forward_backward_batch`` sets
    them (an all-reduce of ``loss_mask`` over the dp group) before it calls the loss.
    """
    tokens = data["loss_mask"].sum()
    if dp_size > 1:
        dist.all_reduce(tokens)
    tu.assign_non_tensor(data, batch_num_tokens=tokens.item(), dp_size=dp_size)
    loss, _ = ppo_loss(actor, {"log_probs": _log_probs(model, data["input_ids"])}, data)
    loss.backward()
    return loss.detach()


def _rank_main(rank: int, conn, store: str) -> None:
    """One data-parallel rank: report its dp rank, train on its chunk, send back what it saw."""
    with reporting(conn):
        from transformers import AutoModelForCausalLM
        from verl.single_controller.base.worker import Worker
        from verl.trainer.ppo.core_algos import get_adv_estimator_fn

        torch.set_num_threads(1)
        # verl's Worker reads its rank from the environment its worker group sets.
        os.environ.update(WORLD_SIZE=str(WORLD), RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT="0")
        gloo_group(rank, WORLD, store, timeout_s=TIMEOUT_S)
        worker = Worker()
        # As ActorRolloutRefWorker registers the "actor" mesh (its engine's dp rank; pure DP here).
        worker._register_dispatch_collect_info("actor", dp_rank=dist.get_rank(), is_collect=True)
        conn.send(("ok", worker._query_dispatch_info("actor")))

        model_path, actor, algo, data = conn.recv()
        received = data["advantages"].clone()
        # ReBN as it would be if each rank computed it on its own rows.
        local, _ = get_adv_estimator_fn(algo.adv_estimator)(
            token_level_rewards=data["token_level_rewards"], response_mask=data["response_mask"], config=algo
        )
        model = AutoModelForCausalLM.from_pretrained(model_path)
        loss = _actor_backward(model, data, actor, WORLD)
        grads = [p.grad for p in model.parameters()]
        local_grad = torch.cat([g.flatten() for g in grads]).clone()
        for g in grads:  # the data-parallel gradient average (FSDP's reduce-scatter, DDP's all-reduce)
            dist.all_reduce(g)
            g /= WORLD
        averaged = torch.cat([g.flatten() for g in grads])
        conn.send(("ok", {"uid": list(data["uid"]), "advantages": received, "local_rebn": local,
                          "loss": loss, "local_grad": local_grad, "averaged_grad": averaged}))


def _padded_batch(reference, model) -> DataProto:
    """The first ``ROWS`` reference episodes as the legacy trainer's padded batch: left-padded
    prompts, right-padded responses, masks, positions, token rewards, the model's old log-probs."""
    packed = [reference.packed(i) for i in range(ROWS)]
    plen = max(len(p["prompt_ids"]) for p in packed)
    rlen = max(len(p["response_ids"]) for p in packed)
    prompts = torch.zeros(ROWS, plen, dtype=torch.int64)
    responses = torch.zeros(ROWS, rlen, dtype=torch.int64)
    attention = torch.zeros(ROWS, plen + rlen, dtype=torch.int64)
    response_mask = torch.zeros(ROWS, rlen, dtype=torch.int64)
    rewards = torch.zeros(ROWS, rlen)
    old_log_probs = torch.zeros(ROWS, rlen)
    for i, p in enumerate(packed):
        n_p, n_r = len(p["prompt_ids"]), len(p["response_ids"])
        prompts[i, plen - n_p :] = torch.tensor(p["prompt_ids"])
        responses[i, :n_r] = torch.tensor(p["response_ids"])
        attention[i, plen - n_p : plen + n_r] = 1
        response_mask[i, :n_r] = torch.tensor(p["response_mask"])
        rewards[i, :n_r] = torch.tensor(p["token_rewards"], dtype=torch.float32)
        ids = torch.tensor(p["prompt_ids"] + p["response_ids"])
        with torch.no_grad():
            old_log_probs[i, :n_r] = _log_probs(model, ids[None])[n_p - 1 : -1]
    batch = TensorDict(
        {
            "prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
            "attention_mask": attention, "position_ids": (attention.cumsum(1) - 1).clamp(min=0),
            "response_mask": response_mask, "token_level_rewards": rewards, "old_log_probs": old_log_probs,
        },
        batch_size=ROWS,
    )
    uids = np.array([f"uid{i}" for i in range(ROWS)], dtype=object)
    return DataProto(batch=batch, non_tensor_batch={"uid": uids})


def test_each_rank_trains_on_the_drivers_rebn_rows(reference, verl_config, tiny_model_path, tmp_path, monkeypatch):
    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM
    from verl.single_controller.base.decorator import MAGIC_ATTR
    from verl.single_controller.base.worker_group import WorkerGroup
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.engine_workers import ActorRolloutRefWorker
    from verl.workers.utils.padding import left_right_2_no_padding

    store = str(tmp_path / "store")  # gloo's rendezvous: a file, no TCP store
    with RankProcesses(_rank_main, WORLD, args=(store,), timeout_s=TIMEOUT_S) as ranks:
        # The driver, while the ranks start: rebn over the whole batch, then the trainer's conversion.
        algo = omega_conf_to_dataclass(verl_config.algorithm)
        actor_conf = OmegaConf.merge(verl_config.actor_rollout_ref.actor, {"ppo_micro_batch_size_per_gpu": 1})
        actor = omega_conf_to_dataclass(actor_conf)
        model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
        data = compute_advantage(
            _padded_batch(reference, model), adv_estimator=algo.adv_estimator, gamma=algo.gamma, config=algo
        )
        full = data.batch["advantages"].clone()
        batch_td = left_right_2_no_padding(data.to_tensordict())
        tu.assign_non_tensor(batch_td, global_batch_size=ROWS, mini_batch_size=ROWS, epochs=1)

        # verl's dispatch for update_actor, for the dp ranks the processes report (a worker group
        # of one worker per rank; RayWorkerGroup asks its Ray actors the same question).
        class Ranks(WorkerGroup):
            def __init__(self, dp_ranks):
                super().__init__(resource_pool=None)
                self._workers, self._dp_ranks = list(dp_ranks), list(dp_ranks)

            def _query_dispatch_info(self, mesh_name):
                return self._dp_ranks

        dispatch_fn = getattr(ActorRolloutRefWorker.update_actor, MAGIC_ATTR)["dispatch_mode"]["dispatch_fn"]
        # The chunks go through pipes, not Ray's object store (STUBS.md).
        monkeypatch.setattr("verl.utils.ray_utils.parallel_put", lambda items, max_workers=None: list(items))
        (chunks,), _ = dispatch_fn(Ranks([ranks.recv(r) for r in range(WORLD)]), batch_td)
        for r in range(WORLD):
            ranks.send(r, (tiny_model_path, actor, algo, chunks[r]))
        results = [ranks.recv(r) for r in range(WORLD)]

    # Every row on exactly one rank, and each rank's advantages are the driver's rows, exactly.
    seen = [uid for res in results for uid in res["uid"]]
    assert sorted(seen) == [f"uid{i}" for i in range(ROWS)], seen
    mask = data.batch["response_mask"].bool()
    for r, res in enumerate(results):
        rows = [int(uid.removeprefix("uid")) for uid in res["uid"]]
        assert len(rows) == ROWS // WORLD
        assert torch.equal(res["advantages"], full[rows]), f"rank {r}: advantages differ from driver rows {rows}"
        # rebn on the rank's rows alone normalises with other statistics: not what verl trains on.
        assert not torch.allclose(res["local_rebn"][mask[rows]], full[rows][mask[rows]], atol=1e-4), (
            f"rank {r}: rank-local rebn equals the global one; the test cannot tell the two apart"
        )
        grad = res["local_grad"]
        assert torch.isfinite(grad).all() and grad.abs().sum() > 0, f"rank {r}: gradient not finite or all zero"
        assert torch.isfinite(res["loss"])

    # The dp-averaged gradient is the single-process one (verl scales each rank's token-mean loss
    # by dp_size over the global token count).
    _actor_backward(model, batch_td, actor, dp_size=1)
    single = torch.cat([p.grad.flatten() for p in model.parameters()])
    for res in results:
        torch.testing.assert_close(res["averaged_grad"], single, rtol=1e-4, atol=1e-7)
    assert not torch.allclose(results[0]["local_grad"], results[1]["local_grad"])
