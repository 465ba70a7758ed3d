"""`BudgetedPolicy`: a trainer's generate call as a `gem_core.rl.Policy`, within the trainer's token budgets.

Every trainer gives a multi-turn rollout the same two budgets: the first prompt must fit
a prompt length, and the whole packed response (every turn's generated tokens plus the
observation tokens between turns) must fit a response length. An adapter wraps the
trainer's own generate call::

    async def generate(prompt_ids, max_tokens):          # the trainer's server call
        out = await server.generate(prompt_ids=prompt_ids, max_tokens=max_tokens)
        return out.token_ids, out.log_probs, out.finish_reason

    policy = BudgetedPolicy(
        generate, formatter, prompt_length=512, response_length=1024,
        prompt_length_key="data.max_prompt_length",
    )
    episode = await play_row(row, policy, formatter)     # sampling=policy.sampling

Each turn is capped at the tokens left (and at ``max_tokens_per_turn``); the formatter's
``max_context`` is set from the first prompt, so `gem_core.rl.run_episode` ends the
episode (``end_reason="context"``) when no response token is left. Ids past a stop token
are cut (servers that ignore custom stop ids), and so are ids past the cap.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from gem_core.errors import InvalidArgument, check_positive_int

if TYPE_CHECKING:
    from gem_core.rl import GenerationResult, SamplingParams

__all__ = ["BudgetedPolicy", "GenerateFn"]

#: ``async generate(prompt_ids, max_tokens) -> (token_ids, logprobs | None, finish_reason | None)``.
GenerateFn = Callable[[list[int], int], Awaitable[tuple[Sequence[int], Sequence[float] | None, str | None]]]


def _positive(name: str, value: Any) -> int:
    check_positive_int(name, value)
    return value


class BudgetedPolicy:
    """A `gem_core.rl.Policy` over ``generate``, enforcing a trainer's prompt and response budgets.

    Args:
        generate: the trainer's call, see `GenerateFn`. ``logprobs`` may be ``None`` (or
            too short): they are then 0.0 and `has_logprobs` turns False. ``finish_reason``
            may be ``None``: it is then ``"stop"`` when the ids end with a stop token.
        formatter: the episode's `gem_core.rl.ChatFormatter` (one per episode: its
            ``max_context`` is set here); its ``stop_token_ids`` end a turn.
        prompt_length: the most tokens the first prompt may have.
        response_length: the most tokens the packed response may have.
        max_tokens_per_turn: the most tokens one turn may generate (``None``:
            ``response_length``).
        prompt_length_key: the trainer's config key of ``prompt_length``, named in the
            error when the first prompt is too long.
        prompt_length_fix: what the error tells the user to do (default: raise
            ``prompt_length_key``).

    Attributes:
        has_logprobs: every turn so far came with log-probs.
        generate_s: seconds spent in ``generate``.
        calls: ``generate`` calls made.
        first_prompt_len: tokens of the first prompt (``None`` before the first call).
    """

    def __init__(
        self,
        generate: GenerateFn,
        formatter: Any,
        *,
        prompt_length: int,
        response_length: int,
        max_tokens_per_turn: int | None = None,
        prompt_length_key: str = "prompt_length",
        prompt_length_fix: str | None = None,
    ):
        self.generate_fn = generate
        self.formatter = formatter
        self.prompt_length = _positive("prompt_length", prompt_length)
        self.response_length = _positive("response_length", response_length)
        self.max_tokens_per_turn = _positive(
            "max_tokens_per_turn", response_length if max_tokens_per_turn is None else max_tokens_per_turn
        )
        self.prompt_length_key = prompt_length_key
        self.prompt_length_fix = prompt_length_fix or f"raise {prompt_length_key}"
        self.stop_token_ids = frozenset(int(t) for t in getattr(formatter, "stop_token_ids", ()))
        self.formatter.max_context = self.prompt_length + self.response_length
        self.first_prompt_len: int | None = None
        self.has_logprobs = True
        self.generate_s = 0.0
        self.calls = 0

    @property
    def sampling(self) -> SamplingParams:
        """The `SamplingParams` to run the episode with.

        ``max_new_tokens=1``: the engine's context check then ends the episode only when
        no token is left; the policy caps each turn itself.
        """
        from gem_core.rl import SamplingParams

        return SamplingParams(max_new_tokens=1)

    def max_tokens(self, prompt_ids: Sequence[int]) -> int:
        """The cap of the turn prompted with ``prompt_ids``: the tokens left, at most ``max_tokens_per_turn``."""
        first = len(prompt_ids) if self.first_prompt_len is None else self.first_prompt_len
        left = first + self.response_length - len(prompt_ids)
        return max(1, min(self.max_tokens_per_turn, left))

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerationResult:
        """One turn: check the budgets, call ``generate``, cut and label its answer."""
        from gem_core.rl import GenerationResult

        if self.first_prompt_len is None:
            if len(prompt_ids) > self.prompt_length:
                raise InvalidArgument(
                    f"the env's first observation renders to {len(prompt_ids)} tokens, more than "
                    f"{self.prompt_length_key}={self.prompt_length}; {self.prompt_length_fix}"
                )
            self.first_prompt_len = len(prompt_ids)
            self.formatter.max_context = self.first_prompt_len + self.response_length
        cap = self.max_tokens(prompt_ids)
        start = time.perf_counter()
        self.calls += 1
        try:
            ids, logprobs, reason = await self.generate_fn(list(prompt_ids), cap)
        finally:
            self.generate_s += time.perf_counter() - start
        ids = [int(t) for t in ids]
        cut = len(ids) > cap
        ids = ids[:cap]
        for k, t in enumerate(ids):
            if t in self.stop_token_ids:
                cut = cut or k + 1 < len(ids)
                ids = ids[: k + 1]
                break
        if logprobs is None or len(logprobs) < len(ids):
            self.has_logprobs = False
            lps = [0.0] * len(ids)
        else:
            lps = [float(x) for x in list(logprobs)[: len(ids)]]
        if ids and ids[-1] in self.stop_token_ids:
            finish = "stop"
        elif reason == "stop" and not cut and len(ids) < cap:
            finish = "stop"  # a stop string or a server-side stop the caller reported
        else:
            finish = "length"
        return GenerationResult(ids, lps, finish)
