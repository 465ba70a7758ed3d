r"""The ``gem_agent`` agent loop: one gem_core env episode per dataset row, packed for verl.

`GemAgentLoop` is a verl ``AgentLoopBase`` registered as ``"gem_agent"``. Each call of
``run`` plays one episode of the row's env with `gem_core.rl.run_episode` (the core's
rollout engine, packed layout), with verl's LLM server as the policy, and returns a
`GemAgentLoopOutput`:

- ``prompt_ids``: the chat template's rendering of the first observation (plus the
  optional system prompt) with the generation header;
- ``response_ids``: the generated tokens of every turn exactly as the server returned
  them, and between turns the env's next observation as the token delta of the chat
  template (``<|im_end|>``-style turn end, user message, generation header);
- ``response_mask``: 1 on generated tokens, 0 on observation tokens;
- ``token_rewards``: each turn's reward on the last generated token of the turn, 0
  elsewhere; on verl's v1 (TransferQueue) path they become ``rm_scores``, the
  ``token_level_rewards`` the ``"rebn"`` estimator reads;
- ``reward_score``: the episode return (sum of turn rewards); ``num_turns``: verl's
  count of chat messages (2 per turn: observation and response);
- ``extra_fields["reward_extra_info"]``: ``success`` (0/1), ``num_turns`` (agent turns)
  and ``episode_return``, logged by verl per data source; ``extra_fields["turn_scores"]``:
  the per-turn rewards.

Dataset rows name the env and seed: columns ``env_id`` and ``seed`` (or the same keys in
``extra_info``), as written by ``recipes/verl_rebn.py``. The row's ``prompt`` column is
only a placeholder verl's dataset needs; the env's reset observation is the real
prompt.

Budget: the whole response (generated plus observation tokens) fits
``rollout.response_length``: a turn is generated with at most the tokens left (and at
most ``max_tokens_per_turn``); when none are left the episode ends (``end_reason
"context"``, a truncation). A first observation longer than ``rollout.prompt_length``
is an error (raise ``data.max_prompt_length`` / ``rollout.prompt_length``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from uuid import uuid4

import torch
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from gem_core.errors import InvalidArgument
from gem_core.rl.rollout import ChatFormatter, GenerationResult, SamplingParams, run_episode
from gem_core.rl.types import Episode

__all__ = ["AGENT_NAME", "GemAgentLoop", "GemAgentLoopOutput", "episode_to_output"]

logger = logging.getLogger(__name__)

#: The name rows use in their ``agent_name`` column (and ``rollout.agent.default_agent_loop``).
AGENT_NAME = "gem_agent"


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


class _ChatFormatter(ChatFormatter):
    """`ChatFormatter` passing verl's ``data.apply_chat_template_kwargs`` to the template."""

    def __init__(self, tokenizer: Any, *, template_kwargs: dict[str, Any], **kwargs: Any):
        super().__init__(tokenizer, **kwargs)
        self.template_kwargs = dict(template_kwargs)

    def render(self, messages: Any, *, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages),
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **self.template_kwargs,
        )


class _ServerPolicy:
    """A `gem_core.rl.Policy` over verl's server manager (``generate(...) -> TokenOutput``).

    It also enforces verl's token budget: the first prompt must fit ``prompt_length``
    and every response turn is capped so that the packed response stays within
    ``response_length`` (the formatter's ``max_context`` is set from the first prompt,
    so `run_episode` ends the episode when no token is left).
    """

    def __init__(
        self,
        server_manager: Any,
        *,
        sampling_params: dict[str, Any],
        request_id: str,
        formatter: ChatFormatter,
        prompt_length: int,
        response_length: int,
        max_tokens_per_turn: int,
        priority: int = 0,
    ):
        self.server = server_manager
        self.sampling_params = dict(sampling_params)
        self.request_id = request_id
        self.formatter = formatter
        self.prompt_length = prompt_length
        self.response_length = response_length
        self.max_tokens_per_turn = max_tokens_per_turn
        self.priority = priority
        self.first_prompt_len: int | None = None
        self.has_logprobs = True
        self.generate_s = 0.0
        self.num_preempted = -1
        self.extra_fields: dict[str, Any] = {}

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerationResult:
        if self.first_prompt_len is None:
            self.first_prompt_len = len(prompt_ids)
            if self.first_prompt_len > self.prompt_length:
                raise InvalidArgument(
                    f"the env's first observation renders to {self.first_prompt_len} tokens, more "
                    f"than actor_rollout_ref.rollout.prompt_length={self.prompt_length}; raise "
                    "data.max_prompt_length (and with it rollout.prompt_length)"
                )
            self.formatter.max_context = self.first_prompt_len + self.response_length
        left = self.first_prompt_len + self.response_length - len(prompt_ids)
        max_tokens = max(1, min(self.max_tokens_per_turn, left))
        params = dict(self.sampling_params)
        params["max_tokens"] = max_tokens
        start = time.perf_counter()
        out = await self.server.generate(
            request_id=self.request_id,
            prompt_ids=list(prompt_ids),
            sampling_params=params,
            priority=self.priority,
        )
        self.generate_s += time.perf_counter() - start
        ids = [int(t) for t in out.token_ids][:max_tokens]
        logprobs = out.log_probs
        if logprobs is None or len(logprobs) < len(ids):
            self.has_logprobs = False
            logprobs = [0.0] * len(ids)
        if out.num_preempted is not None:
            self.num_preempted = max(self.num_preempted, 0) + int(out.num_preempted)
        fields = dict(out.extra_fields or {})
        if "min_global_steps" in fields and "min_global_steps" not in self.extra_fields:
            self.extra_fields["min_global_steps"] = fields["min_global_steps"]
        if "max_global_steps" in fields:
            self.extra_fields["max_global_steps"] = fields["max_global_steps"]
        stopped = bool(ids) and ids[-1] in self.formatter.stop_token_ids
        return GenerationResult(ids, [float(x) for x in logprobs[: len(ids)]], "stop" if stopped else "length")


def episode_to_output(
    episode: Episode, *, with_logprobs: bool = True, metrics: AgentLoopMetrics | None = None
) -> GemAgentLoopOutput:
    """A packed single-sample episode as a `GemAgentLoopOutput` (see the module docs).

    A turn with no generated token (an empty or aborted generation) has nowhere to hold
    its reward: the reward is added to the previous turn's last generated token (a
    warning is logged); an episode whose first turn is empty keeps that reward only in
    ``reward_score``.

    Raises:
        InvalidArgument: the episode has no turn, or several samples (a chat template
            that rewrites earlier turns cannot be packed: set a custom chat template,
            ``actor_rollout_ref.model.custom_chat_template``, that only appends).
    """
    if not episode.turns:
        raise InvalidArgument(
            f"episode of {episode.env_id} (seed {episode.seed}) has no turn "
            f"(end_reason {episode.end_reason!r}); the first prompt left no room to generate"
        )
    samples = episode.samples()
    if len(samples) > 1:
        raise InvalidArgument(
            f"episode of {episode.env_id} (seed {episode.seed}) needs {len(samples)} samples: "
            "the chat template rewrites earlier turns (e.g. strips <think>), so one packed "
            "row cannot hold the episode; set actor_rollout_ref.model.custom_chat_template "
            "to a template that only appends"
        )
    turns = samples[0]
    response: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    token_rewards: list[float] = []
    last_generated = -1
    for i, turn in enumerate(turns):
        if i > 0:
            n = len(turn.prompt_ids)
            response.extend(turn.prompt_ids)
            mask.extend([0] * n)
            logprobs.extend([0.0] * n)
            token_rewards.extend([0.0] * n)
        n = len(turn.response_ids)
        response.extend(turn.response_ids)
        mask.extend([1] * n)
        logprobs.extend(turn.response_logprobs)
        token_rewards.extend([0.0] * n)
        if n:
            last_generated = len(response) - 1
            token_rewards[last_generated] += float(turn.reward)
        elif last_generated >= 0:
            logger.warning("gem_agent: turn %d generated no token; its reward moves to turn %d", i, i - 1)
            token_rewards[last_generated] += float(turn.reward)
    success = bool(episode.success)
    rewards = [float(t.reward) for t in turns]
    return GemAgentLoopOutput(
        prompt_ids=list(turns[0].prompt_ids),
        response_ids=response,
        response_mask=mask,
        response_logprobs=logprobs if with_logprobs else None,
        token_rewards=token_rewards,
        reward_score=episode.episode_return,
        num_turns=2 * len(turns),
        metrics=metrics or AgentLoopMetrics(),
        extra_fields={
            "turn_scores": rewards,
            "tool_rewards": [],
            "reward_extra_info": {
                "success": float(success),
                "num_turns": len(turns),
                "episode_return": episode.episode_return,
            },
        },
    )


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _row_value(kwargs: dict[str, Any], key: str) -> Any:
    if key in kwargs and kwargs[key] is not None:
        return _scalar(kwargs[key])
    extra = kwargs.get("extra_info") or {}
    if isinstance(extra, dict) and extra.get(key) is not None:
        return _scalar(extra[key])
    return None


def _plain(value: Any) -> Any:
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:  # pragma: no cover - omegaconf comes with verl
        return value
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


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
        self.max_turns = None if max_turns is None else int(max_turns)
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        self.max_tokens_per_turn = int(max_tokens_per_turn or self.response_length)
        self.system_prompt = system_prompt
        self.env_kwargs = dict(_plain(env_kwargs) or {})
        self.truncated_response = truncated_response
        self.truncation_reward = float(truncation_reward)
        self.template_kwargs = dict(_plain(self.apply_chat_template_kwargs) or {})

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play the row's episode; ``kwargs`` are the dataset row's fields."""
        import gem_core

        env_id = _row_value(kwargs, "env_id")
        seed = _row_value(kwargs, "seed")
        if not isinstance(env_id, str) or not env_id:
            raise InvalidArgument(
                "gem_agent needs the env id in the row's 'env_id' column (or extra_info.env_id), "
                f"got {env_id!r} among keys {sorted(kwargs)}; write the dataset with "
                "recipes/verl_rebn.py"
            )
        seed = None if seed is None else int(seed)
        priority = int(_scalar(kwargs.get("priority", 0)) or 0)
        if getattr(self.rollout_config, "full_determinism", False):
            request_id = f"det-{priority}"
        else:
            request_id = uuid4().hex
        formatter = _ChatFormatter(
            self.tokenizer,
            template_kwargs=self.template_kwargs,
            system_prompt=self.system_prompt,
            max_context=self.prompt_length + self.response_length,
        )
        policy = _ServerPolicy(
            self.server_manager,
            sampling_params=sampling_params,
            request_id=request_id,
            formatter=formatter,
            prompt_length=self.prompt_length,
            response_length=self.response_length,
            max_tokens_per_turn=self.max_tokens_per_turn,
            priority=priority,
        )
        start = time.perf_counter()
        loop = asyncio.get_running_loop()
        env = await loop.run_in_executor(None, lambda: gem_core.make(env_id, **self.env_kwargs))
        try:
            # max_new_tokens=1: run_episode's context check then ends the episode only when
            # no token is left; the policy caps each turn at the tokens actually left.
            episode = await run_episode(
                env,
                policy,
                formatter,
                seed=seed,
                max_turns=self.max_turns,
                sampling=SamplingParams(max_new_tokens=1),
                layout="packed",
                truncated_response=self.truncated_response,
                truncation_reward=self.truncation_reward,
                env_id=env_id,
            )
        finally:
            await loop.run_in_executor(None, env.close)
        if episode.error is not None:
            raise RuntimeError(f"gem_agent: episode of {env_id} (seed {seed}) failed: {episode.error}")
        wall = time.perf_counter() - start
        metrics = AgentLoopMetrics(
            generate_sequences=policy.generate_s,
            tool_calls=max(0.0, wall - policy.generate_s),
            num_preempted=policy.num_preempted,
        )
        output = episode_to_output(episode, with_logprobs=policy.has_logprobs, metrics=metrics)
        output.extra_fields.update(policy.extra_fields)
        return output
