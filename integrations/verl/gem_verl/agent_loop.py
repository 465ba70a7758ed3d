r"""The ``gem_agent`` agent loop: one gem_core env episode per dataset row, packed for verl.

`GemAgentLoop` is a verl ``AgentLoopBase`` registered as ``"gem_agent"``. Each call of
``run`` plays the row's episode with the adapter kit of `gem_core.rl`: `play_row` (env id
and seed from the row's ``env_id``/``seed`` columns or ``extra_info``), a
`BudgetedPolicy` over verl's LLM server (the first observation must fit
``rollout.prompt_length``; every turn is capped so that the packed response fits
``rollout.response_length``; when no token is left the episode ends, ``end_reason
"context"``), and `pack_episode` (the packed row: generated ids as generated, each next
observation as the chat template's token delta, each turn's reward on its last
generated token; a turn that generated nothing is credited to the turn before it, see
`gem_core.rl.packing`). It returns a `GemAgentLoopOutput`:

- ``prompt_ids``, ``response_ids``, ``response_mask``, ``response_logprobs`` and
  ``token_rewards``: the packed row; on verl's v1 (TransferQueue) path
  ``token_rewards`` become ``rm_scores``, the ``token_level_rewards`` ``"rebn"`` reads;
- ``reward_score``: the episode return; ``num_turns``: verl's count of chat messages
  (2 per turn);
- ``extra_fields["reward_extra_info"]``: ``success`` (0/1), ``num_turns`` (agent turns)
  and ``episode_return``, logged by verl per data source; ``extra_fields["turn_scores"]``:
  the env's per-turn rewards.

The row's ``prompt`` column is only a placeholder verl's dataset needs; the env's reset
observation is the real prompt.
"""

from __future__ import annotations

import time
from typing import Any
from uuid import uuid4

import torch
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from gem_core.errors import InvalidArgument
from gem_core.rl import BudgetedPolicy, ChatFormatter, Episode, pack_episode, play_row
from gem_core.rl.play import row_value
from gem_verl import AGENT_NAME
from gem_verl.advantage import warn_if_legacy_rebn

__all__ = ["AGENT_NAME", "GemAgentLoop", "GemAgentLoopOutput", "episode_to_output"]

class GemAgentLoopOutput(AgentLoopOutput):
    """An ``AgentLoopOutput`` carrying per-token rewards (``token_rewards``).

    verl's v1 path stores ``as_dict()`` in TransferQueue; there ``rm_scores`` is built
    from ``token_rewards`` (one value per response token) instead of the base class's
    ``reward_score`` on the last token, so per-turn rewards reach the estimator.
    """

    token_rewards: list[float]
    """One reward per response token: each turn's reward on its last generated token."""

    def as_dict(self) -> dict[str, Any]:
        """The base class's dict with ``rm_scores`` = ``token_rewards`` (float32)."""
        output = super().as_dict()
        output.pop("token_rewards", None)
        output["rm_scores"] = torch.tensor(self.token_rewards, dtype=torch.float32)
        return output


def episode_to_output(
    episode: Episode, *, with_logprobs: bool = True, metrics: AgentLoopMetrics | None = None
) -> GemAgentLoopOutput:
    """An episode as a `GemAgentLoopOutput`: `gem_core.rl.pack_episode`'s row (module docs).

    Raises:
        InvalidArgument: the episode has no turn, or several samples (a chat template
            that rewrites earlier turns cannot be packed: set a custom chat template,
            ``actor_rollout_ref.model.custom_chat_template``, that only appends).
    """
    if episode.template_rewrite:
        raise InvalidArgument(
            f"episode of {episode.env_id} (seed {episode.seed}): the chat template rewrites "
            "earlier turns (e.g. strips <think>), so one packed row cannot hold the episode; "
            "set actor_rollout_ref.model.custom_chat_template to a template that only appends"
        )
    p = pack_episode(episode)
    return GemAgentLoopOutput(
        prompt_ids=p.prompt_ids,
        response_ids=p.response_ids,
        response_mask=p.response_mask,
        response_logprobs=p.response_logprobs if with_logprobs else None,
        token_rewards=p.token_rewards,
        reward_score=p.reward_score,
        num_turns=2 * p.num_turns,
        metrics=metrics or AgentLoopMetrics(),
        extra_fields={
            "turn_scores": p.turn_rewards,
            "tool_rewards": [],
            "reward_extra_info": {
                "success": float(bool(episode.success)),
                "num_turns": p.num_turns,
                "episode_return": p.reward_score,
            },
        },
    )


def _plain(value: Any) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.create(value or {}), resolve=True)


@register(AGENT_NAME)
class GemAgentLoop(AgentLoopBase):
    """Plays one gem_core env episode per dataset row (see the module docs).

    Arguments (besides verl's): set them in the file named by
    ``actor_rollout_ref.rollout.agent.agent_loop_config_path``, e.g.::

        - name: gem_agent
          _target_: gem_verl.agent_loop.GemAgentLoop
          max_turns: 8
          max_tokens_per_turn: 256
          system_prompt: "You are playing a game."
          env_kwargs: {}

    Args:
        max_turns: the engine's turn limit (``None``: the env's own limit only).
        max_tokens_per_turn: the most tokens one response may have (``None``:
            ``rollout.response_length``); the response budget caps it further.
        system_prompt: text of a leading system message, or ``None``.
        env_kwargs: keyword arguments for ``gem_core.make`` of every row's env.
        truncated_response: ``"pass"`` a response cut by the token cap to the env, or
            ``"penalize"`` it (reward ``truncation_reward``, the episode ends).
        truncation_reward: see above.
    """

    def __init__(
        self,
        *args: Any,
        max_turns: int | None = None,
        max_tokens_per_turn: int | None = None,
        system_prompt: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        truncated_response: str = "pass",
        truncation_reward: float = -1.0,
        **kwargs: Any,
    ):
        kwargs.pop("tools", None)
        super().__init__(*args, **kwargs)
        warn_if_legacy_rebn(self.config)
        self.max_turns = None if max_turns is None else int(max_turns)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        self.max_tokens_per_turn = int(max_tokens_per_turn or self.response_length)
        self.system_prompt = system_prompt
        self.env_kwargs = _plain(env_kwargs)
        self.truncated_response = truncated_response
        self.truncation_reward = float(truncation_reward)
        self.template_kwargs = _plain(self.apply_chat_template_kwargs)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play the row's episode; ``kwargs`` are the dataset row's fields."""
        priority = int(row_value(kwargs, "priority") or 0)
        full_determinism = getattr(self.rollout_config, "full_determinism", False)
        request_id = f"det-{priority}" if full_determinism else uuid4().hex
        preempted = [-1]
        extra: dict[str, Any] = {}

        async def generate(prompt_ids: list[int], max_tokens: int) -> tuple[Any, Any, None]:
            out = await self.server_manager.generate(
                request_id=request_id,
                prompt_ids=prompt_ids,
                sampling_params={**sampling_params, "max_tokens": max_tokens},
                priority=priority,
            )
            if out.num_preempted is not None:
                preempted[0] = max(preempted[0], 0) + int(out.num_preempted)
            fields = out.extra_fields or {}
            if "min_global_steps" in fields:
                extra.setdefault("min_global_steps", fields["min_global_steps"])
            if "max_global_steps" in fields:
                extra["max_global_steps"] = fields["max_global_steps"]
            return out.token_ids, out.log_probs, None

        formatter = ChatFormatter(
            self.tokenizer, system_prompt=self.system_prompt, template_kwargs=self.template_kwargs
        )
        policy = BudgetedPolicy(
            generate,
            formatter,
            prompt_length=self.prompt_length,
            response_length=self.response_length,
            max_tokens_per_turn=self.max_tokens_per_turn,
            prompt_length_key="actor_rollout_ref.rollout.prompt_length",
            prompt_length_fix="raise data.max_prompt_length (and with it rollout.prompt_length)",
        )
        start = time.perf_counter()
        episode = await play_row(
            kwargs,
            policy,
            formatter,
            env_kwargs=self.env_kwargs,
            max_turns=self.max_turns,
            truncated_response=self.truncated_response,
            truncation_reward=self.truncation_reward,
            hint="; write the dataset with recipes/verl_rebn.py",
        )
        wall = time.perf_counter() - start
        metrics = AgentLoopMetrics(
            generate_sequences=policy.generate_s,
            tool_calls=max(0.0, wall - policy.generate_s),
            num_preempted=preempted[0],
        )
        output = episode_to_output(episode, with_logprobs=policy.has_logprobs, metrics=metrics)
        output.extra_fields.update(extra)
        return output
