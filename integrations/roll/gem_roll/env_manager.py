"""ROLL env managers for gem_core envs (``custom_envs.<tag>.env_manager_cls``).

ROLL's managers build the env with ``gem.make(env_id=env_type, **env_config)``; these
subclasses register gem_core's ids first (`gem_roll.envs.register_envs`), so a gem_core id
works as ``env_type``, and fix what ROLL's own managers get wrong on a gem_core env:

- **truncated ends the episode.** ROLL ends an episode only on ``terminated`` or its own
  ``max_steps``; a gem_core env that truncates (turn limit, context) would be stepped again
  and raise ``ResetNeeded``. Here ``terminated or truncated`` ends it (the rollout cache
  keeps which one), and a finished env is never stepped again.
- **``info["env_instruction"]``** (which ``StepEnvManager`` reads on every turn) is set to
  ``""`` when the env gives none: a gem_core observation holds the whole task.
- **the action** the env gets is the response text without its stop token and without
  special tokens, as in `gem_core.rl` (ROLL passes the raw decode, ``<|im_end|>`` included).

`GemStepEnvManager` (one training sample per turn: what ``adv_estimator: step_reinforce``
needs) also plays the conversation token-exactly as `gem_core.rl.run_episode` does: the
prompt of turn ``t`` is the chat template's rendering of every observation and response so
far, the generated ids kept as generated (never re-tokenized), each new observation added
as the template's token delta. Its ``agent_template`` may use ``{observation}`` (default:
the observation alone), ``{env_instruction}`` and ``{turn_idx}``; ``agent_system_template``
is an optional system message. `GemTrajEnvManager` keeps ROLL's trajectory formatting (one
packed sample per episode, the episode's reward sum on the last token) with the fixes above.

Needs ROLL on ``PYTHONPATH`` (and its requirements).
"""

from __future__ import annotations

from typing import Any

import torch
from roll.distributed.scheduler.protocol import DataProto
from roll.pipeline.agentic.env_manager.base_env_manager import RolloutCache
from roll.pipeline.agentic.env_manager.step_env_manager import StepEnvManager
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.utils.constants import GenerateStopReason
from roll.utils.hash_utils import compute_object_hash
from tensordict import TensorDict

from gem_core.core import observation_text
from gem_core.errors import InvalidArgument
from gem_core.rl import TokenConversation
from gem_core.rl.chat import ChatFormatter
from gem_roll.envs import register_envs

__all__ = ["GemStepEnvManager", "GemTrajEnvManager"]


def _check_env_type(env_config: Any) -> None:
    """An ``env_type`` neither gem-llm nor gem_core knows in this (env worker) process: gem_core's
    lookup error (the id, the process, how a user's env reaches ROLL's workers) instead of
    gem-llm's bare "not found in registry"."""
    env_type = env_config.get("env_type") if hasattr(env_config, "get") else None
    if not isinstance(env_type, str):
        return
    from gem.envs.registration import ENV_REGISTRY

    if env_type not in ENV_REGISTRY:
        import gem_core

        gem_core.spec(env_type)  # raises NameNotFound with the fixes


class _GemEpisode:
    """The episode fixes shared by both managers (mixed in before ROLL's class)."""

    tokenizer: Any
    env: Any
    env_config: Any
    rollout_cache: RolloutCache | None

    def __init__(self, *args: Any, **kwargs: Any):
        register_envs()
        _check_env_type(kwargs.get("env_config"))
        self._gem_finished = False
        super().__init__(*args, **kwargs)

    def reset(self) -> RolloutCache | None:
        self._gem_finished = False
        cache = super().reset()
        if cache is not None:
            cache.history[0].setdefault("env_instruction", "")
        return cache

    def _gem_action(self, response_ids: list[int]) -> str:
        """The response text the env gets: stop token and special tokens left out."""
        eos = getattr(self.tokenizer, "eos_token_id", None)
        body = response_ids[:-1] if response_ids and eos is not None and response_ids[-1] == eos else response_ids
        return self.tokenizer.decode(body, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def step(self, llm_output: DataProto) -> RolloutCache:
        cache = self.rollout_cache
        entry = cache.history[-1]
        if self._gem_finished:
            # ROLL asked for a step after the env ended: record nothing new, end the episode.
            entry.setdefault("reward", 0.0)
            entry.setdefault("metrics", {})
            entry.setdefault("llm_response", "")
            cache.terminated = True
            return cache
        response_ids = [int(t) for t in entry.get("response_ids", llm_output.batch["responses"][0].tolist())]
        action = entry.pop("gem_action", None)
        if action is None:
            action = self._gem_action(response_ids)
        with self.thread_lock, self.env_step_limiter:
            observation, reward, terminated, truncated, info = self.env.step(action=action)
        info = dict(info or {})
        suffix = info.pop("suffix", None)
        max_steps = self.env_config.max_steps
        cache.step += 1
        ended = bool(terminated) or bool(truncated)
        self._gem_finished = ended
        cache.terminated = ended or cache.step >= max_steps  # ROLL's loop reads only `terminated`
        cache.truncated = (bool(truncated) and not terminated) or (not ended and cache.step >= max_steps)
        entry["reward"] = float(reward)
        entry["llm_response"] = action
        entry.update(info)
        entry.setdefault("metrics", {})
        nxt: dict[str, Any] = {"observation": observation, "actions_left": max_steps - cache.step, "messages": None}
        if suffix is not None:
            nxt["suffix"] = suffix
        cache.history.append(nxt)
        return cache


class GemTrajEnvManager(_GemEpisode, TrajEnvManager):
    """ROLL's ``TrajEnvManager`` (one packed sample per episode) on gem_core envs.

    ``agent_system_template: ~`` (no system prompt) becomes an empty system message: ROLL's
    trajectory formatting concatenates it as a string.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.agent_system_template is None:
            self.agent_system_template = ""


class GemStepEnvManager(_GemEpisode, StepEnvManager):
    """One sample per turn, the conversation token-exact as in `gem_core.rl` (see the module docs)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        system = self.agent_system_template or None
        self._gem_formatter = ChatFormatter(
            self.tokenizer, system_prompt=system, max_context=max(2, int(self.pipeline_config.sequence_length))
        )
        self._gem_turns = TokenConversation(self._gem_formatter, "packed")

    def reset(self) -> RolloutCache | None:
        self._gem_turns = TokenConversation(self._gem_formatter, "packed")
        return super().reset()

    def _gem_observation_text(self, cache: RolloutCache) -> str:
        entry = cache.history[-1]
        template = self.agent_template
        obs = observation_text(entry["observation"])  # image envs: the text part
        if not template:
            return obs
        values = {
            "observation": obs,
            "current_observation": obs,
            "env_instruction": cache.history[0].get("env_instruction", ""),
            "turn_idx": cache.step + 1,
        }
        try:
            return template.format(**values)
        except (KeyError, IndexError, ValueError) as e:
            raise InvalidArgument(
                f"custom_envs.{self.env_config['tag']}.agent_template {template!r} could not be "
                f"rendered ({type(e).__name__}: {e}); GemStepEnvManager fills {sorted(values)} "
                "(escape literal braces as {{ }})"
            ) from e

    def format_messages(self, rollout_cache: RolloutCache) -> DataProto:
        entry = rollout_cache.history[-1]
        text = self._gem_observation_text(rollout_cache)
        first = not self._gem_turns.observations
        self._gem_turns.add_observation(text)
        prompt_ids = list(self._gem_turns.prompt_ids)
        input_ids = torch.tensor(prompt_ids, dtype=torch.long).unsqueeze(0)
        attention_mask = torch.ones_like(input_ids)
        lm_input = DataProto()
        lm_input.batch = TensorDict(
            {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": attention_mask.cumsum(-1) - 1},
            batch_size=1,
        )
        messages = []
        if first and self._gem_formatter.system_prompt is not None:
            messages.append({"role": "system", "content": self._gem_formatter.system_prompt})
        messages.append({"role": "user", "content": text})
        entry["prompt_ids"] = prompt_ids
        entry["state_hash"] = compute_object_hash(text)
        entry["messages"] = messages  # only the new ones: the history's messages join into the chat
        return lm_input

    def make_decision(self, rollout_cache: RolloutCache) -> DataProto:
        out = super().make_decision(rollout_cache)
        if out.meta_info.get("stop_reason") == GenerateStopReason.FINISH:
            entry = rollout_cache.history[-1]
            _content, action = self._gem_turns.add_response([int(t) for t in entry["response_ids"]])
            entry["gem_action"] = action
        return out
