"""Run RL2's own actor update and data-parallel scatter on CPU (helpers of the update and multi-rank tests).

Both releases are covered, picked by the ``RL2`` on ``sys.path``: rl-square 0.0.2's
``RL2.workers.Actor`` (``update``: its ``data_manager`` scatter, ``forward``, the clipped
surrogate written inline, ``aggregate_values``, ``backward``, ``optimizer_step``) and
HEAD's ``RL2.workers.fsdp.actor.FSDPActor`` (``ppo_update``: ``_scatter_data``,
``_forward``, ``actor_ppo_loss``, ``aggregate_values``, ``_scale_loss``,
``_optimizer_step``). `build_actor` builds the actor without its ``__init__``, which
loads the model with ``attn_implementation="flash_attention_2"`` and wraps it in FSDP
over a ``"cuda"`` device mesh; it sets what ``__init__`` would: the config, the (tiny,
unwrapped) model, a ``"cpu"`` device mesh, RL2's AdamW and scheduler. RL2 moves every
tensor to ``torch.cuda.current_device()``: `on_cpu` answers ``"cpu"`` (STUBS.md).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: How long the multi-rank test waits for its ranks, in seconds.
RANK_TIMEOUT_S = 120


def rl2_release() -> str:
    """``"head"`` or ``"0.0.2"``: the RL2 that is imported."""
    return "head" if hasattr(importlib.import_module("RL2.datasets"), "SampleGroup") else "0.0.2"


@contextlib.contextmanager
def on_cpu() -> Iterator[None]:
    """``torch.cuda.current_device()`` answers ``"cpu"`` inside (RL2's ``.to(...)`` target)."""
    import torch

    saved = torch.cuda.current_device
    torch.cuda.current_device = lambda: "cpu"
    try:
        yield
    finally:
        torch.cuda.current_device = saved


def build_actor(actor_config: Any, model: Any, dp_size: int = 1) -> Any:
    """RL2's actor with what its ``__init__`` sets, on a ``"cpu"`` mesh of ``dp_size`` ranks (module docs)."""
    import torch
    from omegaconf import OmegaConf
    from torch.distributed.device_mesh import init_device_mesh
    from transformers import get_scheduler

    if rl2_release() == "head":
        from RL2.workers.fsdp.actor import FSDPActor as cls

        names = ("dp", "cp", "tp")
    else:
        from RL2.workers import Actor as cls

        names = ("dp", "sp", "tp")
    actor = cls.__new__(cls)
    actor.config, actor.train = actor_config, True
    actor.device_mesh = init_device_mesh("cpu", (dp_size, 1, 1), mesh_dim_names=names)
    actor.dp_size = dp_size  # 0.0.2's Worker.prepare_device_mesh sets it
    if model is None:
        return actor
    actor.model = model
    if rl2_release() == "head":  # FSDPWorker._prepare_model_optimizer and prepare_scheduler
        actor.optimizer = torch.optim.AdamW(
            model.parameters(), **OmegaConf.to_container(actor_config.optimizer)
        )
        actor.prepare_scheduler(1)
    else:  # Worker.prepare_model_optimizer and Trainer.prepare_scheduler
        actor.optimizer = torch.optim.AdamW(
            model.parameters(), lr=actor_config.lr, weight_decay=actor_config.weight_decay
        )
        actor.scheduler = get_scheduler(
            actor_config.scheduler, actor.optimizer, num_warmup_steps=0, num_training_steps=1
        )
    return actor


def record_forward(actor: Any) -> list[dict[str, Any]]:
    """Record each minibatch of the actor's forward with its ``logps`` (gradient retained).

    The forward itself is RL2's (0.0.2 ``Actor.forward`` with its sequence-parallel
    wrapper, HEAD ``FSDPActor._forward``); the record is the minibatch the loss reads.
    """
    calls: list[dict[str, Any]] = []
    inner = type(actor)._forward if rl2_release() == "head" else type(actor).forward

    if rl2_release() == "head":

        def _forward(minibatch, prefix="", return_entropy=False):
            out = inner(actor, minibatch, prefix, return_entropy)
            out["logps"].retain_grad()
            calls.append(out)
            return out

        actor._forward = _forward
    else:

        def forward(minibatch, return_entropy=False):
            out = inner(actor, minibatch, return_entropy=return_entropy)
            logps = out[0] if return_entropy else out
            logps.retain_grad()
            calls.append({**minibatch, "logps": logps})
            return out

        actor.forward = forward
    return calls


def run_update(actor: Any, tensor_dict: dict[str, Any], step: int = 1) -> list[dict[str, Any]]:
    """The actor's own update on ``tensor_dict`` (0.0.2 ``update``, HEAD ``ppo_update``); the recorded minibatches."""
    calls = record_forward(actor)
    with on_cpu():
        if rl2_release() == "head":
            actor.ppo_update(dict(tensor_dict), step)
        else:
            actor.update(dict(tensor_dict), step)
    return calls


def source_rows(minibatch: dict[str, Any], tensor_dict: dict[str, Any]) -> list[int | None]:
    """For each row of ``minibatch``, the ``tensor_dict`` row it is (same tokens), or None for padding."""
    import torch

    lengths = (tensor_dict["eos_mask"].argmax(-1) + 1).tolist()
    rows: list[int | None] = []
    for i in range(minibatch["states"].shape[0]):
        if not minibatch["eos_mask"][i].any():
            rows.append(None)
            continue
        n = int(minibatch["eos_mask"][i].argmax()) + 1
        same = [
            j
            for j, m in enumerate(lengths)
            if m == n and torch.equal(tensor_dict["states"][j, :n], minibatch["states"][i, :n])
        ]
        assert len(same) == 1, (
            f"minibatch row {i} matches tensor_dict rows {same}; expected exactly one"
        )
        rows.append(same[0])
    return rows


# -- multi-rank: RL2's scatter across two gloo ranks -------------------------------------


def scatter_rank(rank: int, world_size: int, workdir: str, config: dict[str, Any]) -> None:
    """One rank of RL2's step after the rollout: rank 0 computes the advantages, the actor scatters.

    ``config`` holds the resolved ``adv`` and ``actor`` sections of the trainer's config.

    Rank 0 loads the rollout's ``tensor_dict`` and ``cu_seqs`` (``rollout.pt``) and calls
    ``RL2.trainer.ppo.compute_advantages`` as the trainer does (``if dist.get_rank() == 0``,
    after `gem_rl2.train.install`); every rank then runs the scatter the actor's update
    starts with (0.0.2 ``tensor_dict_to_minibatches``, HEAD ``FSDPActor._scatter_data``)
    and saves what it received to ``rank<r>.pt``. Ranks meet over a file store in
    ``workdir`` and gloo on the loopback interface: nothing listens beyond 127.0.0.1.
    """
    import torch
    import torch.distributed as dist
    import wandb
    from omegaconf import OmegaConf

    from gem_core.testing.ranks import gloo_group

    torch.set_num_threads(1)
    gloo_group(rank, world_size, str(Path(workdir) / "store"), timeout_s=RANK_TIMEOUT_S)
    wandb.init(mode="disabled")  # RL2's time_logger logs on rank 0
    cfg = OmegaConf.create(config)
    try:
        tensor_dict = None
        if rank == 0:
            import RL2.trainer.ppo as ppo
            from gem_rl2.train import install

            install()
            tensor_dict, cu_seqs = torch.load(Path(workdir) / "rollout.pt")
            ppo.compute_advantages(
                cfg if rl2_release() == "head" else cfg.adv, tensor_dict, cu_seqs, 1
            )
        actor = build_actor(cfg.actor, None, dp_size=world_size)
        with on_cpu():
            if rl2_release() == "head":
                batches = actor._scatter_data(tensor_dict, pack_minibatches=True)
            else:
                from RL2.utils.sequences import tensor_dict_to_minibatches

                batches = tensor_dict_to_minibatches(actor, tensor_dict, True, False)
        torch.save(batches, Path(workdir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_ranks(world_size: int, workdir: str, config: dict[str, Any]) -> list[Any]:
    """`scatter_rank` in ``world_size`` spawned processes; each rank's batches.

    A rank's exception is raised here with its traceback; ranks still running after
    `RANK_TIMEOUT_S` are terminated and the call fails naming the timeout.
    """
    import time

    import torch
    import torch.multiprocessing as mp

    ctx = mp.start_processes(
        scatter_rank,
        args=(world_size, workdir, config),
        nprocs=world_size,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + RANK_TIMEOUT_S
    while not ctx.join(timeout=max(0.1, deadline - time.monotonic())):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.terminate()
            raise TimeoutError(
                f"RL2's scatter on {world_size} gloo ranks did not finish in {RANK_TIMEOUT_S} s"
            )
    return [torch.load(Path(workdir) / f"rank{r}.pt") for r in range(world_size)]


# -- the checks (one place for both releases) ---------------------------------------------


def check_update(actor_config: Any, tensor_dict: dict[str, Any], model_path: str) -> None:
    """RL2's actor update on ``tensor_dict`` (with the adapter's advantages) reads exactly them and moves the model.

    On-policy (no ``old_logps``: ratio 1, the clip inactive, no TIS or KL) the gradient of
    RL2's loss on each token's log-prob is minus that token's advantage over the batch's
    action-token count (``avg_level=token``, counted here from the batch alone); RL2 scales
    the loss by dp size * sp/cp size, 1 on one rank. (``avg_level=sequence`` fails inside
    RL2 at both releases: ``aggregate_values`` takes ``torch.finfo`` of the bool clip ratios.)
    """
    import torch
    from transformers import AutoModelForCausalLM

    plain = (
        actor_config.tis_coef == 0 and actor_config.kl.coef == 0 and actor_config.entropy.coef == 0
    )
    assert plain and actor_config.avg_level == "token", (
        "the expected gradient below is for RL2's plain clipped surrogate (tis_coef, kl.coef, entropy.coef 0), "
        "averaged over tokens"
    )
    adv, mask = tensor_dict["advantages"], tensor_dict["action_mask"]
    assert adv[mask == 1].abs().sum() > 0, "the batch has no non-zero advantage to check"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
    before = [p.detach().clone() for p in model.parameters()]
    actor = build_actor(actor_config, model)
    calls = run_update(actor, tensor_dict)
    assert calls, "RL2's update ran no forward"

    total_actions = mask.sum()
    seen = []
    for minibatch in calls:
        grad = minibatch["logps"].grad
        assert grad is not None, "no gradient reached the log-probs RL2's loss read"
        for i, j in enumerate(source_rows(minibatch, tensor_dict)):
            if j is None:  # a padding sequence RL2 added
                assert not grad[i].any(), f"padding row {i} got a gradient"
                continue
            want = -(adv[j] * mask[j]).float() / total_actions
            w = min(
                grad.shape[1], want.shape[0]
            )  # HEAD re-pads a minibatch to its longest sequence
            torch.testing.assert_close(
                grad[i, :w], want[:w], msg=lambda m, j=j: f"sequence {j}: {m}"
            )
            assert not grad[i, w:].any() and not want[w:].any()
            assert not grad[i, :w][mask[j, :w] == 0].any(), (
                f"sequence {j}: a gradient off the action mask"
            )
            seen.append(j)
    assert sorted(seen) == list(range(tensor_dict["states"].shape[0])), (
        f"RL2's minibatches held sequences {sorted(seen)}; expected each of the batch once"
    )
    moved = sum(
        not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters(), strict=True)
    )
    assert moved > 0, "RL2's optimizer step left every parameter unchanged"


def check_scatter(
    raw: dict[str, Any], cu_seqs: Any, config: Any, single: dict[str, Any], workdir: Path
) -> None:
    """At world size 2, every rank's advantages equal the single-process ones (`scatter_rank`).

    ``raw`` is the rollout's batch before advantages, ``single`` the same batch after the
    single-process ``compute_advantages``; each received sequence is matched to its row of
    ``single`` by its tokens, and each sequence is on exactly one rank.
    """
    import torch
    from omegaconf import OmegaConf

    torch.save((raw, cu_seqs), workdir / "rollout.pt")
    needed = {k: OmegaConf.to_container(config[k], resolve=True) for k in ("adv", "actor")}
    ranks = run_ranks(2, str(workdir), needed)
    seen: dict[int, int] = {}
    for rank, batches in enumerate(ranks):
        got = 0
        for minibatch in (mb for batch in batches for mb in batch):
            for i, j in enumerate(source_rows(minibatch, single)):
                if j is None:
                    continue
                assert j not in seen, f"sequence {j} is on rank {seen[j]} and rank {rank}"
                seen[j] = rank
                assert torch.equal(minibatch["advantages"][i], single["advantages"][j]), (
                    f"rank {rank}: the advantages of sequence {j} differ from the single-process ones"
                )
                got += 1
        assert got, f"rank {rank} received no sequence"
    assert sorted(seen) == list(range(single["states"].shape[0])), f"sequences on the ranks: {seen}"
