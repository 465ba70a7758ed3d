"""Episode data: `Turn` (one agent response and its reward) and `Episode` (a whole rollout)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Turn", "Episode", "END_REASONS", "LAYOUTS"]

LAYOUTS = ("packed", "per_turn")

# Why an episode ended. "terminated" and "response_truncated" are terminal outcomes of
# the task or of the agent (no bootstrapping); "env_truncated", "max_turns" and
# "context" are budgets that ran out (truncation); "error" means the rollout failed.
END_REASONS = (
    "terminated",
    "response_truncated",
    "env_truncated",
    "max_turns",
    "context",
    "error",
)
_TERMINAL = frozenset({"terminated", "response_truncated"})
_TRUNCATED = frozenset({"env_truncated", "max_turns", "context"})


@dataclass(slots=True)
class Turn:
    """One agent turn: the tokens the policy saw, what it generated and the reward.

    A *sample* (one training sequence) is the concatenation of ``prompt_ids +
    response_ids`` over a run of turns that starts at a turn with ``starts_sample=True``.
    In the ``per_turn`` layout every turn starts a sample and ``prompt_ids`` is the whole
    rendered prompt. In the ``packed`` layout only the first turn starts a sample and
    ``prompt_ids`` is the *delta*: the tokens appended to the episode's sequence before
    this response (the chat-template text for the new observation and the assistant
    header). A packed episode whose chat template rewrote earlier turns restarts a sample
    at the turn where that was detected (see `Episode.template_rewrite`).

    Attributes:
        prompt_ids: prompt tokens of this turn (whole prompt or delta, see above);
            never trained on (loss mask 0).
        response_ids: the token ids the policy generated, exactly as generated
            (including the stop token when it emitted one); loss mask 1.
        response_logprobs: log-probability of each generated token under the policy
            that sampled it (one per ``response_ids`` entry).
        reward: the env's reward for this turn (or the truncation penalty).
        response_truncated: generation hit ``max_new_tokens`` without a stop token.
        format_error: the env reported ``info["format_error"]`` for this action.
        starts_sample: this turn begins a new training sample (see above).
        observation: the observation text this turn answered (for logging).
        action: the action text sent to the env (the decoded response, special tokens
            skipped; for logging).
        info: the env's ``info`` dict for this step (empty when the env was not stepped).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    response_logprobs: list[float]
    reward: float = 0.0
    response_truncated: bool = False
    format_error: bool = False
    starts_sample: bool = True
    observation: str = ""
    action: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def num_response_tokens(self) -> int:
        """The number of generated tokens."""
        return len(self.response_ids)


@dataclass(slots=True)
class Episode:
    """One rollout of one env under one policy.

    Attributes:
        env_id: the env id (or a name for a factory-built env).
        seed: the seed passed to ``env.reset``.
        layout: ``"packed"`` or ``"per_turn"`` (how `Turn.prompt_ids` were built).
        turns: the completed turns, in order.
        success: ``info["success"]`` of the final env step (False when absent).
        end_reason: one of `END_REASONS` (``""`` while running):
            ``"terminated"`` the env ended the task; ``"response_truncated"`` a
            truncated response was penalized (``truncated_response="penalize"``);
            ``"env_truncated"`` the env's own budget ran out; ``"max_turns"`` the
            engine's turn limit; ``"context"`` the next prompt did not fit the context;
            ``"error"`` a policy or env error (see ``error``).
        error: ``None``, or ``"<ExceptionType>: message"`` for a failed rollout.
        template_rewrite: the chat template rendered earlier turns differently once a
            new message was added (packed layout only); the sample was restarted.
        final_observation: the last observation the env returned (also when it was
            never shown to the policy).
        group_id: an id grouping episodes of the same task (GRPO/RLOO); by default the
            collector sets ``f"{env_id}/{seed}"``.
        stats: counters: ``tokens_encoded`` (tokens produced by the tokenizer during
            the rollout), ``generated_tokens``, ``wall_time_s``.
    """

    env_id: str
    seed: int | None
    layout: str = "packed"
    turns: list[Turn] = field(default_factory=list)
    success: bool = False
    end_reason: str = ""
    error: str | None = None
    template_rewrite: bool = False
    final_observation: str = ""
    group_id: str | None = None
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def num_turns(self) -> int:
        """The number of completed turns."""
        return len(self.turns)

    @property
    def episode_return(self) -> float:
        """The undiscounted return: the sum of the turn rewards."""
        return float(sum(t.reward for t in self.turns))

    @property
    def terminated(self) -> bool:
        """The episode reached a terminal outcome (no value to bootstrap)."""
        return self.end_reason in _TERMINAL

    @property
    def truncated(self) -> bool:
        """A budget ran out (env turn limit, engine turn limit or context)."""
        return self.end_reason in _TRUNCATED

    @property
    def context_truncated(self) -> bool:
        """The next prompt did not fit into the context window."""
        return self.end_reason == "context"

    @property
    def ok(self) -> bool:
        """No policy or env error."""
        return self.error is None

    def rewards(self) -> list[float]:
        """The per-turn rewards."""
        return [t.reward for t in self.turns]

    def samples(self) -> list[list[Turn]]:
        """The turns grouped into training samples (see `Turn.starts_sample`)."""
        out: list[list[Turn]] = []
        for turn in self.turns:
            if turn.starts_sample or not out:
                out.append([turn])
            else:
                out[-1].append(turn)
        return out

    def token_ids(self) -> list[int]:
        """The packed token sequence of a single-sample episode (`gem_core.rl.pack_episode`).

        Raises:
            ValueError: the episode has several samples (``per_turn`` layout, or a
                packed episode whose template rewrote history); use `samples`.
        """
        return self._packed().token_ids if self.turns else []

    def loss_mask(self) -> list[int]:
        """The loss mask aligned with `token_ids`: 1 on generated tokens, 0 elsewhere."""
        return self._packed().loss_mask if self.turns else []

    def _packed(self) -> Any:
        from gem_core.rl.packing import pack_episode

        return pack_episode(self)
