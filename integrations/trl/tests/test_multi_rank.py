"""World size 2 on CPU: every rank's ReBN advantages are the single-process ones of the whole batch.

Two spawned processes are TRL's data-parallel ranks as ``accelerate launch`` starts them
(``RANK``/``WORLD_SIZE``/``LOCAL_RANK``, ``MASTER_ADDR=127.0.0.1`` and a free
``MASTER_PORT``; accelerate's ``MULTI_CPU`` state, gloo). Each builds a `GemGRPOTrainer` on
the tiny model and

1. runs TRL's own ``_generate_and_score_completions`` on its own two episodes (the
   scripted ``guess`` scenario behind the generate call): equal row counts per rank, as TRL
   slices its batches, and different widths, as each rank pads its completions alone;
2. calls `GemGRPOTrainer.rebn_advantages` on 3 and 1 hand-made rows of different widths,
   and logs the gem/ metrics of 3 and 1 episodes: the processes need not hold the same
   number of rows.

This process computes `gem_core.rl.token_advantages` (``rebn``) over the concatenated
rows and checks that each rank got its own rows of it, and that ReBN over one rank's rows
alone is something else (so the check can fail).
"""

from __future__ import annotations

import functools
import os
import socket
from typing import Any

import pytest

pytest.importorskip("trl", reason="gem-trl's tests need TRL installed (make test-trl builds its venv)")

import torch  # noqa: E402

from gem_core.rl import token_advantages  # noqa: E402
from gem_core.testing.conformance import SCENARIO  # noqa: E402
from gem_core.testing.ranks import RankProcesses, reporting  # noqa: E402

from .conftest import make_trainer, tiny_model_path  # noqa: E402

WORLD = 2
TIMEOUT_S = 60  # per message from a rank, and the process group's own timeout: a hang fails
GAMMA = SCENARIO.gamma
SEEDS = ((0, 1), (2, 5))  # each rank's guess episodes: 4 and 1 turns, 2 and 3 turns (widths 174, 114)
UNEVEN = ((3, 9), (1, 5))  # (rows, width) of each rank's hand-made shard


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _shard(rows: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of 1 to 3 turns (runs of mask 1 between env tokens), a float64 reward at each turn's end."""
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.zeros(rows, width, dtype=torch.float64)
    mask = torch.zeros(rows, width, dtype=torch.int64)
    for i in range(rows):
        j = 0
        for _ in range(int(torch.randint(1, 4, (1,), generator=gen))):
            n = int(torch.randint(1, 3, (1,), generator=gen))
            if j + n > width:
                break
            mask[i, j : j + n] = 1
            rewards[i, j + n - 1] = float(torch.randn(1, generator=gen, dtype=torch.float64)) + seed
            j += n + 1  # one env token after each turn
    return rewards, mask


def _rank_main(rank: int, conn: Any, port: int, tmp: str) -> None:
    """One TRL data-parallel rank: play its episodes, run the uneven shard, send back what it got."""
    with reporting(conn):
        from gem_trl import GemRollout

        from gem_core.rl.testing import TinyModelGenerator
        from gem_core.testing.conformance import scenario_script

        torch.set_num_threads(1)
        os.environ.update(
            RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(WORLD),
            MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
            GLOO_SOCKET_IFNAME="lo",  # gloo's rank-to-rank pairs on loopback only
        )  # fmt: skip
        rollout = GemRollout(
            generate=TinyModelGenerator(tiny_model_path(), script=functools.partial(scenario_script, SCENARIO.name)),
            max_tokens_per_turn=SCENARIO.max_new_tokens,
        )
        trainer = make_trainer(
            tmp, rollout=rollout, per_device_train_batch_size=2, num_generations=2, gamma=GAMMA,
            max_completion_length=512, ddp_timeout=TIMEOUT_S,
        )  # fmt: skip
        acc = trainer.accelerator
        assert (acc.distributed_type.value, acc.num_processes, acc.process_index) == ("MULTI_CPU", WORLD, rank), (
            f"rank {rank}: accelerate's state is {acc.distributed_type}, {acc.num_processes} processes, index {acc.process_index}"
        )
        trainer.model.train()
        rows = [{"prompt": "play", "env_id": SCENARIO.env_id, "seed": s} for s in SEEDS[rank]]
        out = trainer._generate_and_score_completions(rows)
        played = {
            "advantages": out["advantages"],
            "rewards": out["gem_token_rewards"],
            "mask": out["completion_mask"] * out["tool_mask"],
            "metrics": {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith("gem/")},
            "episodes": {k: list(trainer._gem_output[k]) for k in ("gem_success", "gem_num_turns", "gem_return")},
        }

        rewards, mask = _shard(*UNEVEN[rank], seed=rank)
        uneven = trainer.rebn_advantages(rewards, mask)
        n = UNEVEN[rank][0]
        episodes = {"gem_success": [1.0 - rank] * n, "gem_num_turns": [rank + 1.0] * n, "gem_return": [2.0 * rank] * n}
        trainer._metrics["train"].clear()
        trainer._log_gem_metrics(episodes, uneven, mask)
        metrics = {k: v[-1] for k, v in trainer._metrics["train"].items()}
        conn.send(("ok", {"played": played, "uneven": uneven, "uneven_metrics": metrics}))


def _run_ranks(tmp: str) -> list[dict[str, Any]]:
    tiny_model_path()  # built once here, not by both ranks at the same time
    with RankProcesses(_rank_main, WORLD, args=(_free_port(), tmp), timeout_s=TIMEOUT_S) as ranks:
        return [ranks.recv(r) for r in range(WORLD)]


def _concat(parts: list[torch.Tensor]) -> torch.Tensor:
    """The ranks' rows as one batch, right-padded with 0 to the widest."""
    width = max(x.shape[1] for x in parts)
    return torch.cat([torch.nn.functional.pad(x, (0, width - x.shape[1])) for x in parts])


def _check_rank_rows(name: str, got: list[torch.Tensor], rewards: list[torch.Tensor], masks: list[torch.Tensor], **tol: Any) -> None:
    """Each rank's ``got`` is its rows of ReBN over all ranks' rows, and not ReBN over its rows alone."""
    full, _ = token_advantages(_concat(rewards).double(), _concat(masks), gamma=GAMMA, estimator="rebn", eps=SCENARIO.eps)
    start = 0
    for rank, (adv, r, m) in enumerate(zip(got, rewards, masks, strict=True)):
        n, width = r.shape
        assert adv.shape == (n, width), f"{name}, rank {rank}: advantages {tuple(adv.shape)} for rows {(n, width)}"
        torch.testing.assert_close(adv.double(), full[start : start + n, :width], rtol=0, **tol,
                                   msg=lambda s, rank=rank: f"{name}, rank {rank}: not the single-process rows: {s}")  # fmt: skip
        assert not full[start : start + n, width:].any(), f"{name}, rank {rank}: the padding past its width is not 0"
        local, _ = token_advantages(r.double(), m, gamma=GAMMA, estimator="rebn", eps=SCENARIO.eps)
        on = m.bool()
        assert not torch.allclose(local[on], full[start : start + n, :width][on], atol=1e-3), (
            f"{name}, rank {rank}: ReBN over the rank's rows alone equals the global one; the test cannot tell them apart"
        )
        start += n
    assert start == full.shape[0]


def test_every_rank_gets_its_rows_of_the_single_process_rebn(tmp_path) -> None:
    results = _run_ranks(str(tmp_path))

    # 1. TRL's own generation step: 2 episodes per rank, each rank padded to its own width.
    played = [res["played"] for res in results]
    widths = [p["mask"].shape[1] for p in played]
    assert widths[0] != widths[1], f"both ranks padded to {widths[0]}; the cross-rank padding goes unchecked"
    _check_rank_rows(
        "TRL step", [p["advantages"] for p in played], [p["rewards"] for p in played], [p["mask"] for p in played],
        atol=1e-6,  # TRL's tensors are float32
    )  # fmt: skip
    episodes = {k: [v for p in played for v in p["episodes"][k]] for k in played[0]["episodes"]}
    masks = _concat([p["mask"] for p in played]).bool()
    want = {
        "gem/success_rate": sum(episodes["gem_success"]) / 4,
        "gem/mean_turns": sum(episodes["gem_num_turns"]) / 4,
        "gem/episode_return": sum(episodes["gem_return"]) / 4,
        "gem/adv_abs_mean": float(_concat([p["advantages"] for p in played]).double()[masks].abs().mean()),
    }
    for rank, p in enumerate(played):
        got = {k: p["metrics"].get(k) for k in want}
        assert got == pytest.approx(want, abs=1e-6), f"rank {rank}: gem/ metrics are not over all episodes"

    # 2. Uneven shards (3 and 1 rows, widths 9 and 5), float64 in and out: exactly the rows.
    shards = [_shard(*UNEVEN[r], seed=r) for r in range(WORLD)]
    _check_rank_rows("uneven", [res["uneven"] for res in results], [s[0] for s in shards], [s[1] for s in shards], atol=0)
    n0, n1 = UNEVEN[0][0], UNEVEN[1][0]
    on = [s[1].bool() for s in shards]
    abs_sum = sum(float(res["uneven"][m].abs().sum()) for res, m in zip(results, on, strict=True))
    want = {
        "gem/success_rate": n0 / (n0 + n1),  # 1.0 on rank 0's episodes, 0.0 on rank 1's
        "gem/mean_turns": (n0 * 1.0 + n1 * 2.0) / (n0 + n1),
        "gem/episode_return": n1 * 2.0 / (n0 + n1),
        "gem/adv_abs_mean": abs_sum / sum(int(m.sum()) for m in on),
    }
    for rank, res in enumerate(results):
        got = {k: res["uneven_metrics"].get(k) for k in want}
        assert got == pytest.approx(want, abs=1e-12), (
            f"rank {rank}: gem/ metrics of uneven shards are not the means over all episodes"
        )
