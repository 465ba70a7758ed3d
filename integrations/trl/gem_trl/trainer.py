r"""`GemGRPOTrainer`: TRL's ``GRPOTrainer`` with gem_core rollouts and per-token ReBN advantages.

TRL computes its advantages inline in ``_generate_and_score_completions``: one scalar
reward per completion, normalised per group of ``num_generations``, no discount. Its
loss (``_compute_loss``) also accepts ``(B, T)`` advantages from subclasses.
`GemGRPOTrainer` calls the parent's ``_generate_and_score_completions`` and replaces
``output["advantages"]`` with per-token ReBN from the per-turn rewards the rollout
returned (``gem_token_rewards``): `gem_core.rl.token_advantages` with
``estimator="rebn"`` and ``gamma = args.gamma``. A turn is a maximal run of the loss
mask (``completion_mask * env_mask``); ``G_t = r_t + gamma * G_{t+1}`` per episode;
``A = (G - mean G) / (std G + eps)`` over every (episode, turn) of the whole generation
batch: with several processes the rows of every process are gathered before
normalising (the processes may hold different numbers of rows and widths), and each
process keeps its own rows. Env tokens get 0.

What the user does not pass:

- ``rollout_func``: `gem_trl.rollout.GemRollout` from the config (a custom one may be
  passed; it must return ``gem_token_rewards`` and ``gem_return``);
- ``reward_funcs``: `gem_episode_return` (the episode return, logged by TRL as
  ``rewards/gem_episode_return/mean``); it feeds only TRL's logging and its unused
  GRPO advantages, so passing reward functions is an error.

Every rollout output is checked before TRL uses it: one completion per prompt (TRL does
not check), and per row as many log-probs, mask and reward entries as completion ids.
Metrics go through TRL's own logging (``gem/success_rate``, ``gem/mean_turns``,
``gem/episode_return``, ``gem/adv_abs_mean``, ``gem/generate_batches``); the first four are
means over the episodes (generated tokens) of every process.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer

from gem_core.errors import InvalidArgument, InvalidRow
from gem_core.rl import token_advantages
from gem_trl._version import check_trl_version
from gem_trl.rollout import GemRollout

__all__ = ["GemGRPOConfig", "GemGRPOTrainer", "gem_episode_return", "check_rollout_output", "check_trl_hooks"]

check_trl_version()


def check_trl_hooks() -> None:
    """Raise ImportError, naming the change, when the TRL method gem-trl overrides changed."""
    from gem_core.rl.versions import check_hook
    from gem_trl._version import TRL_MIN

    check_hook("gem-trl", "TRL", "GRPOTrainer._generate_and_score_completions",
               getattr(GRPOTrainer, "_generate_and_score_completions", None), ("self", "inputs"),
               tested=f"trl {TRL_MIN}.x")


check_trl_hooks()


@dataclass
class GemGRPOConfig(GRPOConfig):
    """``GRPOConfig`` plus the GEM fields (``max_completion_length`` is the packed response's budget)."""

    gamma: float = field(default=1.0, metadata={"help": "Discount of the per-turn returns G_t = r_t + gamma * G_{t+1} (ReBN)."})
    rebn_eps: float = field(default=1e-8, metadata={"help": "The std offset of the ReBN normalisation."})
    max_prompt_length: int = field(default=512, metadata={"help": "The most tokens the env's first observation may render to."})
    max_tokens_per_turn: int | None = field(default=None, metadata={"help": "The most tokens of one response (None: max_completion_length)."})
    max_turns: int | None = field(default=None, metadata={"help": "The engine's turn limit (None: the env's own)."})
    system_prompt: str | None = field(default=None, metadata={"help": "Text of a leading system message."})
    env_kwargs: dict[str, Any] | str | None = field(default=None, metadata={"help": "gem_core.make keyword arguments (a dict or a JSON string)."})
    truncated_response: str = field(default="pass", metadata={"help": "'pass' a response cut by the token cap to the env, or 'penalize' it."})
    truncation_reward: float = field(default=-1.0, metadata={"help": "Reward of a penalized truncated response (it ends the episode)."})

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.gamma) <= 1.0:
            raise InvalidArgument(f"GemGRPOConfig.gamma must be in [0, 1], got {self.gamma!r}")
        if self.truncated_response not in ("pass", "penalize"):
            raise InvalidArgument(
                f"GemGRPOConfig.truncated_response must be 'pass' or 'penalize', got {self.truncated_response!r}"
            )
        if isinstance(self.env_kwargs, str):
            self.env_kwargs = json.loads(self.env_kwargs) if self.env_kwargs.strip() else None
        if self.env_kwargs is not None and not isinstance(self.env_kwargs, dict):
            raise InvalidArgument(f"GemGRPOConfig.env_kwargs must be a dict, got {type(self.env_kwargs).__name__}")
        super().__post_init__()


def gem_episode_return(prompts: Sequence[Any], completions: Sequence[Any], gem_return: Sequence[float] | None = None, **kwargs: Any) -> list[float]:
    """TRL reward function: each completion's episode return (the rollout's ``gem_return``)."""
    if gem_return is None or len(gem_return) != len(completions):
        got = None if gem_return is None else len(gem_return)
        raise InvalidArgument(
            f"gem_episode_return needs the rollout's 'gem_return' field, one per completion ({len(completions)}), "
            f"got {got}; the rollout_func must return it (gem_trl.GemRollout does)"
        )
    return [float(r) for r in gem_return]


def check_rollout_output(output: Any, num_prompts: int) -> None:
    """Raise `InvalidArgument` unless ``output`` holds one well-formed completion per prompt.

    TRL itself only checks the keys; a rollout returning several completions per prompt
    would train silently on misaligned rows.
    """
    if not isinstance(output, dict):
        raise InvalidArgument(f"the rollout_func must return a dict, got {type(output).__name__}")
    required = ("prompt_ids", "completion_ids", "logprobs", "env_mask", "gem_token_rewards", "gem_return")
    missing = [k for k in required if k not in output]
    if missing:
        raise InvalidArgument(
            f"the rollout_func's output lacks {missing} (GemGRPOTrainer needs {list(required)}; gem_trl.GemRollout returns them)"
        )
    for key, values in output.items():
        if isinstance(values, (list, tuple)) and len(values) != num_prompts:
            raise InvalidArgument(
                f"the rollout_func returned {len(values)} entries of {key!r} for {num_prompts} prompts; TRL passes "
                "the prompts already repeated num_generations times, so return exactly one completion per prompt"
            )
    for i in range(num_prompts):
        n = len(output["completion_ids"][i])
        if n == 0:
            raise InvalidArgument(f"completion {i} is empty; return at least one (masked) token per completion")
        for key in ("logprobs", "env_mask", "gem_token_rewards"):
            if len(output[key][i]) != n:
                raise InvalidArgument(
                    f"completion {i} has {n} ids but {len(output[key][i])} entries of {key!r}; they must align token for token"
                )


class GemGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` on gem_core envs with per-turn ReBN (see the module docs).

    Args:
        model: as for ``GRPOTrainer`` (a model id/path or a loaded model).
        args: a `GemGRPOConfig`.
        train_dataset: rows with ``prompt`` (a placeholder), ``env_id`` and ``seed``
            columns (`gem_trl.make_dataset`).
        rollout_func: ``None`` builds `GemRollout` from ``args``; pass a `GemRollout`
            to choose its generation backend (``generate=``).
        reward_funcs: must be ``None`` (the adapter supplies `gem_episode_return`).
        **kwargs: the other ``GRPOTrainer`` arguments.

    Attributes:
        gem_rows: the dataset rows of the generation batch being played (what the
            rollout function reads).
    """

    def __init__(
        self,
        model: Any,
        args: GemGRPOConfig | None = None,
        train_dataset: Any = None,
        *,
        rollout_func: Callable[..., Any] | None = None,
        reward_funcs: Any = None,
        **kwargs: Any,
    ):
        if args is None:
            args = GemGRPOConfig(output_dir="gem-trl-grpo")
        if not isinstance(args, GemGRPOConfig):
            raise InvalidArgument(
                f"GemGRPOTrainer needs args=GemGRPOConfig(...) (it holds gamma and the env settings), got {type(args).__name__}"
            )
        if reward_funcs is not None:
            raise InvalidArgument(
                "GemGRPOTrainer supplies its reward function (the env's episode return) and trains on ReBN "
                "advantages of the env's per-turn rewards; other reward functions would be ignored: pass "
                "reward_funcs=None and put rewards into the env"
            )
        _check_dataset(train_dataset)
        inner = rollout_func if rollout_func is not None else GemRollout.from_config(args)
        self.gem_rollout = inner
        self.gem_rows: list[dict[str, Any]] | None = None
        self._gem_output: dict[str, Any] | None = None

        def checked_rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            output = inner(prompts, trainer)
            check_rollout_output(output, len(prompts))
            self._gem_output = output
            return output

        super().__init__(
            model=model,
            reward_funcs=[gem_episode_return],
            args=args,
            train_dataset=train_dataset,
            rollout_func=checked_rollout,
            **kwargs,
        )

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self.gem_rows = [dict(x) for x in inputs]
        self._gem_output = None
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self.gem_rows = None
        rollout = self._gem_output
        if rollout is None:
            raise InvalidArgument("GemGRPOTrainer: the rollout function was not called (no rollout output to score)")
        mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            mask = mask * output["tool_mask"]
        width = mask.shape[1]
        token_rewards = torch.zeros(mask.shape, dtype=torch.float64, device=mask.device)
        for i, r in enumerate(rollout["gem_token_rewards"]):
            r = list(r)[:width]
            token_rewards[i, : len(r)] = torch.tensor(r, dtype=torch.float64)
        advantages = self.rebn_advantages(token_rewards, mask)
        output["advantages"] = advantages.to(torch.float32)
        output["gem_token_rewards"] = token_rewards.to(torch.float32)
        self._log_gem_metrics(rollout, advantages, mask)
        return output

    def rebn_advantages(self, token_rewards: torch.Tensor, mask: torch.Tensor, *, gamma: float | None = None) -> torch.Tensor:
        """Per-token ReBN over the generation batch of every process; this process's rows back.

        Args:
            token_rewards: ``(B, T)`` per-token rewards of this process's rows (``B`` and
                ``T`` may differ between processes).
            mask: ``(B, T)``, non-zero on generated tokens (the loss mask).
            gamma: the discount (default ``args.gamma``).

        Returns:
            ``(B, T)`` float64 advantages, 0 off the mask.
        """
        gamma = float(self.args.gamma if gamma is None else gamma)
        rewards = torch.as_tensor(token_rewards, dtype=torch.float64)
        mask = torch.as_tensor(mask).to(torch.int64)
        if rewards.shape != mask.shape:
            raise InvalidArgument(f"token_rewards {tuple(rewards.shape)} and mask {tuple(mask.shape)} must have the same shape")
        acc = self.accelerator
        if acc.num_processes == 1:
            adv, _ = token_advantages(rewards, mask, gamma=gamma, estimator="rebn", eps=self.args.rebn_eps)
            return adv
        # Every process's rows enter the statistics. Gloo and NCCL gather equal shapes only, so
        # each process pads to the largest (rows, width), and the padding rows are dropped again:
        # the processes may hold different numbers of rows.
        sizes = acc.gather(torch.tensor([list(rewards.shape)], device=acc.device)).tolist()
        rows, width = max(n for n, _ in sizes), max(w for _, w in sizes)

        def gathered(x: torch.Tensor) -> torch.Tensor:
            padded = x.new_zeros((rows, width))
            padded[: x.shape[0], : x.shape[1]] = x
            return acc.gather(padded.to(acc.device))

        keep = [p * rows + i for p, (n, _) in enumerate(sizes) for i in range(n)]
        all_rewards, all_mask = gathered(rewards)[keep], gathered(mask)[keep]
        adv, _ = token_advantages(all_rewards, all_mask, gamma=gamma, estimator="rebn", eps=self.args.rebn_eps)
        start = sum(n for n, _ in sizes[: acc.process_index])
        return adv[start : start + rewards.shape[0], : rewards.shape[1]].to(rewards.device)

    def _log_gem_metrics(self, rollout: dict[str, Any], advantages: torch.Tensor, mask: torch.Tensor) -> None:
        mode = "train" if self.model.training else "eval"
        # (sum, count) per metric from every process, so the means are over all episodes (and
        # all generated tokens) even where the processes hold different numbers of them.
        on = mask.bool()
        local = [[float(sum(map(float, rollout.get(key) or []))), float(len(rollout.get(key) or []))]
                 for key in ("gem_success", "gem_num_turns", "gem_return")]
        local.append([float(advantages[on].abs().sum()), float(on.sum())])
        totals = self.accelerator.gather(torch.tensor([local], dtype=torch.float64, device=self.accelerator.device)).sum(dim=0)
        means = [float(s / c) if c > 0 else 0.0 for s, c in totals.tolist()]
        m = self._metrics[mode]
        for name, value in zip(("success_rate", "mean_turns", "episode_return", "adv_abs_mean"), means, strict=True):
            m[f"gem/{name}"].append(value)
        stats_ = getattr(self.gem_rollout, "stats", None) or {}
        if "batches" in stats_:
            m["gem/generate_batches"].append(float(stats_["batches"]))


def _check_dataset(dataset: Any) -> None:
    columns = getattr(dataset, "column_names", None)
    if isinstance(columns, dict):  # a DatasetDict
        columns = next(iter(columns.values()), None)
    if columns is None:
        return  # an iterable dataset: each row is checked when played
    missing = [c for c in ("prompt",) if c not in columns]
    if "env_id" not in columns and "extra_info" not in columns:
        missing.append("env_id")
    if missing:
        raise InvalidRow(
            f"GemGRPOTrainer's train_dataset needs the columns prompt (a placeholder) and env_id (and seed), "
            f"it lacks {missing} among {sorted(columns)}; write it with gem_trl.make_dataset(env_id, seeds)"
        )
