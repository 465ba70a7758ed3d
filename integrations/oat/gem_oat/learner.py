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

It also replaces the prompt dataset, which the multi-turn actor ignores, by
placeholders (``--max_train`` rows set the number of steps: ``max_train /
rollout_batch_size``), so no dataset is downloaded.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from oat.algorithms.ppo_multiturn import PPOMultiTurnLearner
from torch.utils.data import DataLoader

from gem_oat.args import validate_args

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
