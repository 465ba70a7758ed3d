r"""`GemLearner`: oat's ``PPOMultiTurnLearner``, keeping every transition of a step for exact ReBN.

oat's multi-turn learner without a critic is ReBN already: ``process_feedback_data``
computes each transition's discounted return (``values = 0, lam = 1``, ``--gamma``)
and ``learning_step`` with ``--whiten_adv`` normalises the returns over all
transitions of all ranks (population std, eps 1e-9). Two oat 0.2.4 behaviours break
"over all transitions of the batch", and `GemLearner` changes only those (with
``--keep_all_transitions``, the default):

- ``process_feedback_data`` keeps a random subset of ``rollout_batch_size_per_device``
  transitions when a step brings more (multi-turn episodes always do: one transition
  per turn), *before* whitening, so the statistics are the subset's and the other
  transitions are lost. `GemLearner` keeps them all (oat's own code runs with the limit
  raised to the step's transition count);
- the policy buffer is a deque of ``pi_buffer_maxlen_per_device`` (default 16): more
  transitions would silently push the oldest out. `GemLearner` makes it unbounded; it
  is cleared after each learning step (``--buffer_clear_every 1``, GemArgs' default).

Memory: ``learning_step`` pads all of a step's transitions into one batch, so size
``--rollout_batch_size`` (episodes) by the transitions it yields (episodes x turns).
With ``--no-keep_all_transitions`` oat's subsampling is back (advantages whitened over
the subset).

Several learner ranks: keeping every transition gives ranks different transition counts
(episodes have different numbers of turns), and ``learning_step`` runs one backward and
optimizer step per transition (``train_batch_size_per_device`` 1): under DeepSpeed every
step is a collective, so uneven counts would leave the longer ranks waiting forever. With
more than one rank, `GemLearner.learn` therefore pads each rank's buffer to the largest
count with copies of its shortest transition carrying ``loss_mask`` False and advantage 0
(oat multiplies every loss term by ``loss_mask``: their gradient is exactly 0), whitens the real
transitions' returns itself with the count, sum and sum of squares all-reduced in float64
over the ranks (population std, oat's eps 1e-9; the pads are outside the statistics), runs
oat's ``learn()`` with ``--whiten_adv`` off for that call, then restores the buffer. A step
on which one rank has no transition at all raises `UsageError` on every rank (nothing to
pad with) rather than hang.

It also replaces the prompt dataset, which the multi-turn actor ignores, by
placeholders (``--max_train`` rows set the number of steps: ``max_train /
rollout_batch_size``), so no dataset is downloaded.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

from oat.algorithms.ppo_multiturn import PPOMultiTurnLearner
from torch.utils.data import DataLoader

from gem_core.errors import UsageError
from gem_oat.args import validate_args

WHITEN_EPS = 1e-9  # oat 0.2.4's learning_step: (A - mean) / (std + 1e-9)

__all__ = ["GemLearner", "placeholder_prompts"]


def placeholder_prompts(n: int) -> list[tuple[str, str, str]]:
    """``n`` empty ``(formatted prompt, prompt, reference)`` rows: what oat's prompt loader yields."""
    return [("", "", "")] * int(n)


class GemLearner(PPOMultiTurnLearner):
    """oat's multi-turn PPO learner with every transition kept (module docs)."""

    def _init(self, args: Any, actors: list[Any]) -> None:
        validate_args(args, make_envs=False)  # before oat loads the model
        super()._init(args, actors)
        if args.keep_all_transitions:
            self.pi_buffer = deque(self.pi_buffer)

    def prepare_data(self, strategy: Any, tokenizer: Any) -> None:
        """Placeholder prompts (the actor plays envs): ``max_train`` rows, no eval set."""
        self.prompts_dataset = placeholder_prompts(max(1, int(strategy.args.max_train)))
        self.eval_prompts_dataset = []
        self.prompts_dataloader = strategy.setup_dataloader(
            self.prompts_dataset,
            strategy.args.rollout_batch_size_per_device,
            pin_memory=False,
            shuffle=False,
        )
        self.eval_prompts_dataloader = DataLoader(self.eval_prompts_dataset, batch_size=1)

    def process_feedback_data(self, data_list: Any) -> None:
        """oat's returns and flattening; with ``keep_all_transitions`` no subsampling."""
        if not self.args.keep_all_transitions:
            return super().process_feedback_data(data_list)
        n = sum(len(episode) for episode in data_list)
        limit = self.args.rollout_batch_size_per_device
        self.args.rollout_batch_size_per_device = max(int(limit), n)
        try:
            return super().process_feedback_data(data_list)
        finally:
            self.args.rollout_batch_size_per_device = limit

    def learn(self, learning_round: int) -> Any:
        """oat's ``learn()``; with several ranks and every transition kept, on buffers padded
        to one length and whitened over the real transitions of all ranks (module docs)."""
        import torch.distributed as dist

        if not (self.args.keep_all_transitions and dist.is_initialized() and dist.get_world_size() > 1):
            return super().learn(learning_round)
        real = list(self.pi_buffer)
        saved = [t.info["advantages"] for t in real]
        pads = self._equal_length_pads(real)
        whiten = self.args.whiten_adv
        try:
            if whiten:
                for t, a in zip(real, self._whitened(saved), strict=True):
                    t.info["advantages"] = a
            self.pi_buffer.extend(pads)
            self.args.whiten_adv = False
            return super().learn(learning_round)
        finally:
            self.args.whiten_adv = whiten
            for t, a in zip(real, saved, strict=True):
                t.info["advantages"] = a
            for _ in pads:
                self.pi_buffer.pop()

    @staticmethod
    def _equal_length_pads(real: list[Any]) -> list[Any]:
        """Copies of the shortest transition (``loss_mask`` False, advantage 0) that bring this
        rank's buffer to the largest count over the ranks."""
        import torch
        import torch.distributed as dist

        counts = torch.tensor([len(real), -len(real)], dtype=torch.int64)
        dist.all_reduce(counts, op=dist.ReduceOp.MAX)
        most, fewest = int(counts[0]), -int(counts[1])
        if fewest == 0 and most > 0:
            raise UsageError(
                "gem-oat: a learner rank has no transition this step while another has "
                f"{most}: nothing to pad its buffer with, and uneven steps would hang "
                "DeepSpeed's collectives (give every actor at least one episode per step)"
            )
        if most == len(real):
            return []
        shortest = min(real, key=lambda t: len(t.prompt_ids) + len(t.response_ids))
        info = {**(shortest.info or {}), "advantages": 0.0, "returns": 0.0, "values": 0.0}
        return [dataclasses.replace(shortest, loss_mask=False, info=dict(info)) for _ in range(most - len(real))]

    @staticmethod
    def _whitened(returns: list[float]) -> list[float]:
        """ReBN over the real transitions of every rank: float64 sums all-reduced."""
        import torch
        import torch.distributed as dist

        local = torch.tensor(returns, dtype=torch.float64)
        stats = torch.stack([torch.tensor(float(local.numel()), dtype=torch.float64), local.sum(), (local**2).sum()])
        dist.all_reduce(stats, op=dist.ReduceOp.SUM)
        n, total, squares = (float(x) for x in stats)
        mean = total / n
        std = max(squares / n - mean * mean, 0.0) ** 0.5
        return [(float(a) - mean) / (std + WHITEN_EPS) for a in returns]
