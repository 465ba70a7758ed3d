r"""The agent file for OpenRLHF's ``--train.agent_func_path``: one gem_core env episode per call.

OpenRLHF loads this file (by path) in every vLLM Ray actor and builds its
``AgentExecutor`` with no arguments; each ``execute`` call plays one episode with the
adapter kit of `gem_core.rl`:

- the sample's **label** (``--data.label_key``) is a JSON object naming the env and the
  seed (`make_label` writes it; ``recipes/openrlhf_rebn.py`` writes the dataset), plus
  optional per-sample settings (`LABEL_OPTIONS`); the prompt (``--data.input_key``) is
  only a placeholder, the env's reset observation is the real prompt;
- generation goes through the ``llm_engine`` OpenRLHF passes in (``await
  llm_engine.generate(prompt_ids, sampling_params)`` returning a vLLM ``RequestOutput``),
  within a `gem_core.rl.BudgetedPolicy`: the whole sequence fits ``--data.max_len``;
  each turn is capped at ``max_tokens_per_turn`` from the label, else
  ``--rollout.max_new_tokens``, else what is left;
- the result is the packed layout (`gem_core.rl.pack_episode`): ``observation_tokens``
  = the rendered first observation, then every turn's generated ids as generated and
  each next observation as the chat template's token delta; ``action_ranges`` = the
  generated runs; ``rollout_log_probs`` when the sampling params ask for log-probs and
  the engine returned them; ``reward`` = ``scores`` = the episode return;
  ``extra_logs`` (logged by OpenRLHF, one value per sample): ``gem_success``,
  ``gem_num_turns``, ``gem_prompt_tokens`` (where the first generated turn may start)
  and ``gem_error``.

OpenRLHF's ``SamplesGenerator._process_response_into_experience`` keeps only its own
keys, so the per-turn rewards travel in extra keys (`TOKEN_REWARDS`: one reward per
token of ``observation_tokens``, each turn's reward on its last generated token) that
`gem_openrlhf.experience.GemSamplesGenerator` moves into ``Experience.info``.

Bad input: a label that names no env (or is not a JSON object) raises
`gem_core.errors.InvalidRow` naming the sample. An episode that fails (the env raised,
the env could not be made) does not fail the batch: it comes back flagged
(``extra_logs["gem_error"] = 1``, reward 0, one placeholder action token that the
ReBN step leaves out of its statistics, advantage 0) and is logged as a warning.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from typing import Any

from openrlhf.utils.agent import AgentExecutorBase

import gem_openrlhf  # noqa: F401  (checks the OpenRLHF version)
from gem_core.errors import InvalidArgument, InvalidRow, PlayRowError
from gem_core.rl import BudgetedPolicy, ChatFormatter, pack_episode, play_row, turn_spans

__all__ = [
    "AgentExecutor",
    "ERROR_FLAG",
    "LABEL_OPTIONS",
    "TOKEN_REWARDS",
    "TURN_REWARDS",
    "make_label",
    "parse_label",
]

logger = logging.getLogger(__name__)

#: Response key: one reward per token of ``observation_tokens`` (the executor's extra key).
TOKEN_REWARDS = "gem_token_rewards"
#: Response key: the env's per-turn rewards.
TURN_REWARDS = "gem_turn_rewards"
#: ``extra_logs`` key (and ``Experience.info`` key): 1.0 for a failed episode, else 0.0.
ERROR_FLAG = "gem_error"

#: Optional label keys besides ``env_id`` and ``seed``, with their meaning.
LABEL_OPTIONS = {
    "env_kwargs": "keyword arguments of gem_core.make (a JSON object)",
    "max_turns": "the engine's turn limit (default: the env's own)",
    "max_tokens_per_turn": "the most tokens one turn may generate (default: --rollout.max_new_tokens)",
    "system_prompt": "text of a leading system message",
    "template_kwargs": "keyword arguments of the tokenizer's chat template (e.g. enable_thinking)",
    "truncated_response": '"pass" a response cut by the cap to the env, or "penalize" it',
    "truncation_reward": "the reward of a penalized truncated response (default -1.0)",
}

_HINT = "; write the dataset with recipes/openrlhf_rebn.py (labels from gem_openrlhf.agent.make_label)"


def make_label(env_id: str, seed: int | None = None, **options: Any) -> str:
    """The label of one sample: a JSON object with the env id, the seed and `LABEL_OPTIONS`.

    Raises:
        InvalidArgument: an option is not one of `LABEL_OPTIONS`.
    """
    unknown = sorted(set(options) - set(LABEL_OPTIONS))
    if unknown:
        raise InvalidArgument(
            f"make_label got unknown options {unknown}; expected some of {sorted(LABEL_OPTIONS)}"
        )
    row: dict[str, Any] = {"env_id": env_id, "seed": seed}
    row.update({k: v for k, v in options.items() if v is not None})
    return json.dumps(row, sort_keys=True)


def _sample_name(prompt: Any, label: Any) -> str:
    def short(x: Any) -> str:
        text = repr(x)
        return text if len(text) <= 120 else text[:117] + "..."

    return f"sample with label {short(label)} (prompt {short(prompt)})"


def parse_label(label: Any, *, prompt: Any = None) -> dict[str, Any]:
    """The row `gem_core.rl.play_row` plays: the sample's label as a dict (see `make_label`).

    Args:
        label: the label OpenRLHF passes (a JSON string; a mapping is accepted as is).
        prompt: the sample's prompt, named in errors.

    Raises:
        InvalidRow: the label is not a JSON object, has unknown keys, or names no env id.
    """
    where = _sample_name(prompt, label)
    if isinstance(label, Mapping):
        row = dict(label)
    else:
        try:
            row = json.loads(label) if isinstance(label, (str, bytes)) else None
        except ValueError:
            row = None
        if not isinstance(row, dict):
            raise InvalidRow(
                f"gem-openrlhf: the {where} is not a JSON object; expected a label like "
                '{"env_id": "game:GuessTheNumber-v0-easy", "seed": 0} in --data.label_key' + _HINT
            )
    unknown = sorted(set(row) - {"env_id", "seed"} - set(LABEL_OPTIONS))
    if unknown:
        raise InvalidRow(
            f"gem-openrlhf: the {where} has unknown keys {unknown}; expected env_id, seed and "
            f"some of {sorted(LABEL_OPTIONS)}" + _HINT
        )
    env_id = row.get("env_id")
    if not isinstance(env_id, str) or not env_id:
        raise InvalidRow(
            f"gem-openrlhf: the {where} names no env id: expected a non-empty string in its "
            f'"env_id" key, got {env_id!r}' + _HINT
        )
    return row


class _TotalBudgetPolicy(BudgetedPolicy):
    """`BudgetedPolicy` with OpenRLHF's one budget: prompt + response <= ``max_length``."""

    def __init__(self, generate: Any, formatter: Any, *, max_length: int, max_tokens_per_turn: int | None):
        super().__init__(
            generate,
            formatter,
            prompt_length=max(1, max_length - 1),
            response_length=max_length,
            max_tokens_per_turn=max_tokens_per_turn,
            prompt_length_key="--data.max_len",
            prompt_length_fix="raise --data.max_len (prompt and response share it)",
        )
        self.max_length = max_length

    async def generate(self, prompt_ids: list[int], sampling: Any) -> Any:
        if self.first_prompt_len is None and len(prompt_ids) < self.max_length:
            self.response_length = self.max_length - len(prompt_ids)
        return await super().generate(prompt_ids, sampling)


def _logprob(entry: Any, token: int) -> float:
    """The log-prob of ``token`` in one vLLM ``outputs[0].logprobs`` entry (a dict of ``Logprob``)."""
    value = entry.get(token) if isinstance(entry, Mapping) else entry
    value = getattr(value, "logprob", value)
    return 0.0 if value is None else float(value)


class AgentExecutor(AgentExecutorBase):
    """OpenRLHF's agent executor for gem_core envs (see the module docs); built with no arguments."""

    async def execute(
        self,
        prompt: Any,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> dict[str, Any]:
        """Play the episode the label names; returns OpenRLHF's response dict plus `TOKEN_REWARDS`.

        Raises:
            InvalidRow: the label names no env (see `parse_label`).
            InvalidArgument: the first observation does not fit ``--data.max_len``, or
                the chat template rewrites earlier turns.
        """
        row = parse_label(label, prompt=prompt)
        with_logprobs = getattr(sampling_params, "logprobs", None) is not None
        cap = row.get("max_tokens_per_turn") or getattr(sampling_params, "max_tokens", None)

        async def generate(prompt_ids: list[int], max_tokens: int) -> tuple[Any, Any, Any]:
            params = copy.deepcopy(sampling_params)
            params.max_tokens = int(max_tokens)
            out = (await llm_engine.generate(prompt_ids, params)).outputs[0]
            ids = [int(t) for t in out.token_ids]
            logprobs = None
            if with_logprobs and out.logprobs is not None:
                logprobs = [_logprob(entry, t) for t, entry in zip(ids, out.logprobs, strict=False)]
            return ids, logprobs, out.finish_reason

        formatter = ChatFormatter(
            hf_tokenizer,
            system_prompt=row.get("system_prompt"),
            template_kwargs=row.get("template_kwargs") or {},
        )
        policy = _TotalBudgetPolicy(
            generate, formatter, max_length=int(max_length), max_tokens_per_turn=int(cap) if cap else None
        )
        try:
            episode = await play_row(
                row,
                policy,
                formatter,
                env_kwargs=row.get("env_kwargs") or {},
                max_turns=row.get("max_turns"),
                truncated_response=row.get("truncated_response", "pass"),
                truncation_reward=float(row.get("truncation_reward", -1.0)),
                hint=f" ({_sample_name(prompt, label)}){_HINT}",
            )
        except InvalidRow:
            raise
        except PlayRowError as exc:
            if "more than --data.max_len" in str(exc):
                raise  # a configuration error (the first observation does not fit), not a failed episode
            logger.warning("gem-openrlhf: %s; the sample is flagged (%s = 1) and trains nothing", exc, ERROR_FLAG)
            return self._flagged(prompt, label, images, hf_tokenizer, with_logprobs, str(exc))
        if not episode.turns and episode.end_reason == "context":  # the engine's check, before any call
            raise InvalidArgument(
                f"the first observation of {episode.env_id} (seed {episode.seed}) renders to "
                f"{int(episode.stats.get('tokens_encoded', 0))} tokens, more than --data.max_len={max_length} "
                "leaves room for; raise --data.max_len (prompt and response share it)"
            )
        if episode.template_rewrite:
            raise InvalidArgument(
                f"episode of {episode.env_id} (seed {episode.seed}): the chat template rewrites earlier "
                "turns (e.g. strips <think>), so one packed sequence cannot hold the episode; give the "
                "model directory a chat template that only appends (its tokenizer's chat_template: "
                "OpenRLHF's PPO CLI has no flag for it)"
            )
        packed = pack_episode(episode)
        start = len(packed.prompt_ids)
        tokens = list(packed.prompt_ids) + list(packed.response_ids)
        ranges = [(start + s, start + e) for s, e in turn_spans(packed.response_mask)]
        logprobs = None
        if with_logprobs and policy.has_logprobs:
            logprobs = [0.0] * start + [float(x) for x in packed.response_logprobs]
        last = episode.turns[-1] if episode.turns else None
        return {
            "prompt": prompt,
            "label": label,
            "images": images,
            "mm_train_inputs": None,
            "reward": float(packed.reward_score),
            "scores": float(packed.reward_score),
            "observation_tokens": tokens,
            "action_ranges": ranges,
            "rollout_log_probs": logprobs,
            "truncated": bool(last is not None and last.response_truncated),
            "extra_logs": {
                "gem_success": float(bool(episode.success)),
                "gem_num_turns": float(packed.num_turns),
                "gem_prompt_tokens": float(start),
                ERROR_FLAG: 0.0,
            },
            TOKEN_REWARDS: [0.0] * start + [float(r) for r in packed.token_rewards],
            TURN_REWARDS: [float(r) for r in packed.turn_rewards],
        }

    @staticmethod
    def _flagged(prompt: Any, label: Any, images: Any, tokenizer: Any, with_logprobs: bool, error: str) -> dict[str, Any]:
        """The response of a failed episode: the prompt's ids and one placeholder action token (EOS)."""
        text = prompt if isinstance(prompt, str) else json.dumps(prompt, default=str)
        ids = [int(t) for t in tokenizer(text=text, add_special_tokens=False)["input_ids"]] or [0]
        eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else ids[-1]
        tokens = ids + [int(eos)]
        return {
            "prompt": prompt,
            "label": label,
            "images": images,
            "mm_train_inputs": None,
            "reward": 0.0,
            "scores": 0.0,
            "observation_tokens": tokens,
            "action_ranges": [(len(ids), len(tokens))],
            "rollout_log_probs": [0.0] * len(tokens) if with_logprobs else None,
            "truncated": False,
            "extra_logs": {"gem_success": 0.0, "gem_num_turns": 0.0, "gem_prompt_tokens": float(len(ids)), ERROR_FLAG: 1.0},
            TOKEN_REWARDS: [0.0] * len(tokens),
            TURN_REWARDS: [],
            "gem_error_message": error,
        }
