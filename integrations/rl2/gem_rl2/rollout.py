r"""GEM episodes behind both RL2 env APIs (the logic of `gem_rl2.env`, the file RL2 loads).

RL2 loads ``rollout.env_path`` with ``importlib`` as a fresh module, so the env file is
thin and everything with state lives here (imported once, as a normal module).

**HEAD** (``generate(config, tokenizer, router_url, sample)``): the env file owns the
loop. `head_generate` plays the row's episode with the adapter kit (`play_row`, a
`BudgetedPolicy` over SGLang's ``/generate`` through RL2's own ``async_request``,
``input_ids`` in, ``output_token_logprobs`` out), packs it with `pack_episode` and writes
the packed row into the ``Sample`` token for token: the generated ids as generated, each
observation as the chat template's token delta, each turn's reward on its last
generated token, SGLang's log-probs on generated tokens. ``sample.metrics["rewards"]``
holds the episode return (RL2's own ``add_env_response`` logs only the last reward of
each sequence, and dynamic filtering reads that value).

**0.0.2** (``reset(extra_info)`` / ``step(state_text, action_text, extra_info)``): RL2
owns the loop and passes text only. `v002_reset` starts the row's episode (the same
`play_row`) as a task whose policy hands each prompt to RL2 and waits for RL2's next
``step`` to bring the action; ``step`` returns that turn's reward (on the turn's last
token, where RL2 puts it), ``done`` when the kit's episode ended, and as ``next_state``
the text so far plus the chat template's delta for the next observation, which RL2
tokenizes and appends. RL2 decodes the action from SGLang; the kit needs the stop token
to see where a turn ended, so the sampling params must keep it
(``skip_special_tokens: false``, ``no_stop_trim: true``; `configure` checks).

Row keys (columns or ``extra_info``): ``env_id`` (required), ``seed``; optional
``env_kwargs`` (a mapping or its JSON), ``system_prompt``, ``max_turns``,
``truncated_response`` (``"pass"``/``"penalize"``), ``truncation_reward``,
``prompt_length``, ``response_length`` (token budgets of the first prompt and of the
packed response; default unbounded).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gem_core.errors import InvalidArgument, InvalidRow
from gem_core.rl import BudgetedPolicy, ChatFormatter, Episode, pack_turns, play_row
from gem_core.rl.play import row_value

__all__ = [
    "HINT",
    "RowSettings",
    "configure",
    "configure_from_rl2",
    "head_generate",
    "v002_reset",
    "v002_step",
]

logger = logging.getLogger(__name__)

#: Appended to errors about a dataset row.
HINT = "; write the dataset with recipes/rl2_rebn.py (extra_info: env_id, seed, ...)"

#: Budgets when the row sets none: in effect unbounded (RL2's own per-turn
#: ``max_new_tokens`` and ``actor.max_length_per_device`` still apply).
UNBOUNDED = 1 << 30

#: Seconds a 0.0.2 episode waits for RL2's next ``step`` before it is dropped.
STEP_TIMEOUT_S = float(os.environ.get("GEM_RL2_STEP_TIMEOUT", "3600"))


@dataclass
class RowSettings:
    """The gem settings of one dataset row (see the module docs)."""

    env_id: str
    seed: int | None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None
    max_turns: int | None = None
    truncated_response: str = "pass"
    truncation_reward: float = -1.0
    prompt_length: int = UNBOUNDED
    response_length: int = UNBOUNDED

    @classmethod
    def from_row(cls, row: Mapping[str, Any], label: str) -> RowSettings:
        """Read the settings of ``row`` (``label`` names it in errors).

        Raises:
            InvalidRow: no env id, or a setting of the wrong type.
        """
        if not isinstance(row, Mapping):
            raise InvalidRow(f"{label}: expected a mapping (extra_info), got {type(row).__name__}{HINT}")
        env_id = row_value(row, "env_id")
        if not isinstance(env_id, str) or not env_id:
            raise InvalidRow(
                f"{label} has no env id: expected extra_info.env_id (a gem_core env id such as "
                f"'game:GuessTheNumber-v0-easy'), got {env_id!r} in {_preview(row)}{HINT}"
            )
        kwargs = row_value(row, "env_kwargs")
        if isinstance(kwargs, str):
            try:
                kwargs = json.loads(kwargs) if kwargs.strip() else {}
            except json.JSONDecodeError as exc:
                raise InvalidRow(f"{label}: env_kwargs is not valid JSON ({exc}): {kwargs[:200]!r}{HINT}") from None
        if kwargs is not None and not isinstance(kwargs, Mapping):
            raise InvalidRow(f"{label}: env_kwargs must be a mapping or its JSON, got {type(kwargs).__name__}{HINT}")

        def number(key: str, kind: type, default: Any) -> Any:
            value = row_value(row, key)
            if value is None:
                return default
            try:
                if isinstance(value, bool) or (kind is int and int(value) != value):
                    raise ValueError
                return kind(value)
            except (TypeError, ValueError):
                raise InvalidRow(f"{label}: {key} must be {kind.__name__}, got {value!r}{HINT}") from None

        truncated = row_value(row, "truncated_response") or "pass"
        if truncated not in ("pass", "penalize"):
            raise InvalidRow(f"{label}: truncated_response must be 'pass' or 'penalize', got {truncated!r}{HINT}")
        system_prompt = row_value(row, "system_prompt")
        return cls(
            env_id=env_id,
            seed=row_value(row, "seed"),
            env_kwargs=dict(kwargs or {}),
            system_prompt=None if system_prompt in (None, "") else str(system_prompt),
            max_turns=number("max_turns", int, None),
            truncated_response=truncated,
            truncation_reward=number("truncation_reward", float, -1.0),
            prompt_length=number("prompt_length", int, UNBOUNDED),
            response_length=number("response_length", int, UNBOUNDED),
        )


def _preview(row: Mapping[str, Any]) -> str:
    text = repr(dict(row))
    return text if len(text) <= 300 else text[:300] + "...}"


async def _play(
    settings: RowSettings,
    tokenizer: Any,
    generate: Any,
    *,
    max_tokens_per_turn: int | None,
    max_turns: int | None,
    template_kwargs: Mapping[str, Any] | None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> tuple[Episode, BudgetedPolicy]:
    formatter = ChatFormatter(tokenizer, system_prompt=settings.system_prompt, template_kwargs=template_kwargs)
    policy = BudgetedPolicy(
        generate,
        formatter,
        prompt_length=settings.prompt_length,
        response_length=settings.response_length,
        max_tokens_per_turn=max_tokens_per_turn,
        prompt_length_key="extra_info.prompt_length",
    )
    episode = await play_row(
        {"env_id": settings.env_id, "seed": settings.seed},
        policy,
        formatter,
        env_kwargs={**settings.env_kwargs, **(env_kwargs or {})},
        max_turns=settings.max_turns if settings.max_turns is not None else max_turns,
        truncated_response=settings.truncated_response,
        truncation_reward=settings.truncation_reward,
        hint=HINT,
    )
    return episode, policy


# ---------------------------------------------------------------------------- HEAD


def _plain(value: Any) -> Any:
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:  # pragma: no cover - RL2 depends on omegaconf
        pass
    return value


def _parse_sglang(response: Any, where: str) -> tuple[list[int], list[float], str]:
    """``(ids, logprobs, finish type)`` of an SGLang ``/generate`` answer (``return_logprob``)."""
    try:
        meta = response["meta_info"]
        triples = meta.get("output_token_logprobs") or []
        ids = [int(t[1]) for t in triples]
        logprobs = [float(t[0]) if t[0] is not None else 0.0 for t in triples]
        finish = meta.get("finish_reason") or {}
        reason = finish.get("type") if isinstance(finish, Mapping) else str(finish)
    except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
        raise InvalidArgument(
            f"{where}: unexpected /generate answer ({type(exc).__name__}: {exc}): expected "
            "SGLang's {'text', 'meta_info': {'output_token_logprobs': [[logp, id, _], ...], "
            f"'finish_reason': {{'type': ...}}}}}} (return_logprob=True), got {str(response)[:300]}"
        ) from None
    if reason == "abort":
        raise InvalidArgument(
            f"{where}: SGLang aborted the request (RL2's partial rollout pauses generation): "
            "gem_rl2's env file plays whole episodes; set rollout.train.partial_rollout=false"
        )
    return ids, logprobs, str(reason or "stop")


async def head_generate(config: Any, tokenizer: Any, router_url: str, sample: Any) -> None:
    """RL2 HEAD's ``generate`` hook: play ``sample.sample``'s episode and fill ``sample``.

    Args:
        config: RL2's ``rollout.train`` (or ``rollout.test``) config: ``sampling_params``
            (``max_new_tokens`` is the per-turn cap), ``partial_rollout``.
        tokenizer: RL2's tokenizer (its chat template renders the turns).
        router_url: the SGLang router.
        sample: an ``RL2.datasets.rl.Sample``; its ``sample`` is the dataset row.

    Raises:
        InvalidRow: the row names no env id (or has a malformed setting).
        PlayRowError: the env could not be made or the episode failed.
    """
    from RL2.datasets import rl as rl2_data

    status = getattr(sample, "status", None)
    if status is not None and status == rl2_data.Sample.Status.DONE:
        return
    cfg = dict(_plain(config) or {})
    if cfg.get("partial_rollout"):
        raise InvalidArgument(
            "gem_rl2's env file plays whole episodes and does not resume aborted ones: set "
            "rollout.train.partial_rollout=false"
        )
    row = sample.sample
    label = f"dataset row {_preview(row) if isinstance(row, Mapping) else repr(row)}"
    settings = RowSettings.from_row(row, label)
    sampling = dict(cfg.get("sampling_params") or {})
    per_turn = sampling.get("max_new_tokens")
    template_kwargs = cfg.get("apply_chat_template_kwargs")
    metrics_turns: list[tuple[int, bool]] = []

    async def generate(prompt_ids: list[int], max_tokens: int) -> tuple[list[int], list[float], str]:
        from RL2.utils import communication

        payload = {
            "input_ids": list(prompt_ids),
            "sampling_params": {**sampling, "max_new_tokens": int(max_tokens), "no_stop_trim": True},
            "return_logprob": True,
        }
        response = await communication.async_request(router_url, "generate", json=payload)
        ids, logprobs, reason = _parse_sglang(response, f"{settings.env_id} (seed {settings.seed})")
        metrics_turns.append((len(ids), reason == "length"))
        return ids, logprobs, reason

    episode, policy = await _play(
        settings,
        tokenizer,
        generate,
        max_tokens_per_turn=None if per_turn is None else int(per_turn),
        max_turns=None,
        template_kwargs=template_kwargs,
    )
    fill_head_sample(sample, episode, tokenizer, with_logprobs=policy.has_logprobs)
    for n, clipped in metrics_turns:
        sample.metrics["response_length"].append(n)
        sample.metrics["length_clip_ratio"].append(clipped)


def fill_head_sample(sample: Any, episode: Episode, tokenizer: Any, *, with_logprobs: bool = True) -> None:
    """Write ``episode`` into an RL2 HEAD ``Sample``: one state dict per packed sample.

    ``states`` = prompt + response ids, ``actions`` the generated ids (0 elsewhere),
    ``action_mask`` 1 on them, ``logps`` the server's log-probs, ``rewards`` each turn's
    credited reward on its last generated id (`gem_core.rl.packing`). ``metrics``:
    ``turns``, ``rewards`` (the episode return, not RL2's last-reward sum), ``success``.
    ``state_text`` is the first prompt and ``action_text`` the rest of the first sample
    (what RL2 prints and saves).
    """
    from RL2.datasets import rl as rl2_data

    label = f"episode of {episode.env_id} (seed {episode.seed})"
    samples = episode.samples()
    if not samples:
        raise InvalidArgument(f"{label} has no turn (end_reason {episode.end_reason!r}): nothing to train on")
    state_dicts = []
    for turns in samples:
        p = pack_turns(turns, label=label)
        n = len(p.prompt_ids)
        mask = [0] * n + [int(m) for m in p.response_mask]
        ids = [*p.prompt_ids, *p.response_ids]
        state_dicts.append(
            {
                "states": ids,
                "actions": [t if m else 0 for t, m in zip(ids, mask, strict=True)],
                "action_mask": mask,
                "logps": [0.0] * n + ([float(x) for x in p.response_logprobs] if with_logprobs else [0.0] * len(p.response_ids)),
                "rewards": [0.0] * n + [float(r) for r in p.token_rewards],
            }
        )
    sample.state_dicts = state_dicts
    sample.state_dict = state_dicts[-1]
    first = pack_turns(samples[0], label=label)
    sample.state_text = tokenizer.decode(first.prompt_ids, skip_special_tokens=False)
    sample.action_text = tokenizer.decode(first.response_ids, skip_special_tokens=False)
    sample.turn = episode.num_turns
    sample.metrics["turns"].append(episode.num_turns)
    sample.metrics["rewards"].append(float(episode.episode_return))
    sample.metrics["success"].append(float(bool(episode.success)))
    sample.status = rl2_data.Sample.Status.DONE


# ---------------------------------------------------------------------------- 0.0.2

_CONFIG: dict[str, Any] = {"tokenizer": None, "max_turns": None, "template_kwargs": None, "max_new_tokens": None}


def configure(
    tokenizer: Any = None,
    *,
    model_path: str | None = None,
    max_turns: int | None = None,
    sampling_params: Mapping[str, Any] | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
) -> None:
    """Settings of the 0.0.2 env API, which passes the env no tokenizer and no config.

    `gem_rl2.train` calls it from RL2's ``Rollout.prepare_environment`` with the
    rollout config (``server_args.model_path``, ``max_turns``, ``train_sampling_params``).
    Without it, ``GEM_RL2_TOKENIZER`` (a tokenizer path) is read at the first ``reset``.

    Raises:
        InvalidArgument: the sampling params drop the stop token from the action text.
    """
    if sampling_params is not None:
        sp = dict(_plain(sampling_params))
        if sp.get("skip_special_tokens", True) is not False or sp.get("no_stop_trim", False) is not True:
            raise InvalidArgument(
                "gem_rl2's env file (RL2 0.0.2 API) needs the stop token in the action text to "
                "see where a turn ended: set rollout.train_sampling_params.skip_special_tokens=false "
                "and rollout.train_sampling_params.no_stop_trim=true (and the same for "
                f"test_sampling_params); got {sp}"
            )
        if sp.get("max_new_tokens") is not None:
            _CONFIG["max_new_tokens"] = int(sp["max_new_tokens"])
    if tokenizer is None and model_path is not None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_path, trust_remote_code=True)
    if tokenizer is not None:
        _CONFIG["tokenizer"] = tokenizer
    if max_turns is not None:
        _CONFIG["max_turns"] = int(max_turns)
    if template_kwargs is not None:
        _CONFIG["template_kwargs"] = dict(template_kwargs)


def configure_from_rl2(config: Any) -> None:
    """`configure` from RL2 0.0.2's ``rollout`` config (called by `gem_rl2.train`'s hook).

    Sets ``skip_special_tokens: false`` and ``no_stop_trim: true`` in
    ``train_sampling_params`` and ``test_sampling_params`` (RL2 reads them after loading
    the env file), so the action text ends with the stop token when the model emitted it.
    """
    from omegaconf import open_dict

    caps = []
    with open_dict(config):
        for key in ("train_sampling_params", "test_sampling_params"):
            if config.get(key) is not None:
                config[key]["skip_special_tokens"] = False
                config[key]["no_stop_trim"] = True
                if config[key].get("max_new_tokens") is not None:
                    caps.append(int(config[key]["max_new_tokens"]))
    configure(
        model_path=config.server_args.model_path,
        max_turns=config.get("max_turns"),
        sampling_params={**_plain(config.train_sampling_params), "max_new_tokens": max(caps, default=None)},
    )


def _tokenizer() -> Any:
    if _CONFIG["tokenizer"] is None:
        path = os.environ.get("GEM_RL2_TOKENIZER")
        if not path:
            raise InvalidArgument(
                "gem_rl2's env file (RL2 0.0.2 API) has no tokenizer: launch RL2 with "
                "`python -m gem_rl2.train ...` (it passes rollout.server_args.model_path), or set "
                "GEM_RL2_TOKENIZER to the model path"
            )
        configure(model_path=path)
    return _CONFIG["tokenizer"]


class _Session:
    """One 0.0.2 episode: the kit's loop in a task, RL2's reset/step on the other side."""

    def __init__(self, key: str, tokenizer: Any):
        self.key = key
        self.tokenizer = tokenizer
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.actions: asyncio.Queue[list[int]] = asyncio.Queue()
        self.prompt_ids: list[int] = []
        self.last_reward = 0.0
        self.turns = 0
        self.task: asyncio.Task[Any] | None = None
        eos = tokenizer.eos_token_id
        self.eos_ids = [] if eos is None else [int(eos)]
        self.eos_text = "" if eos is None else tokenizer.decode([int(eos)], skip_special_tokens=False)

    async def generate(self, prompt_ids: list[int], max_tokens: int) -> tuple[list[int], None, str | None]:
        self.prompt_ids = list(prompt_ids)
        await self.events.put(("prompt", list(prompt_ids)))
        try:
            ids = await asyncio.wait_for(self.actions.get(), STEP_TIMEOUT_S)
        except asyncio.TimeoutError:  # RL2 stopped stepping this episode: drop it
            _SESSIONS.pop(self.key, None)
            raise
        stopped = bool(ids) and ids[-1:] == self.eos_ids
        # No stop token: a stop string when shorter than SGLang's max_new_tokens, else cut.
        cap = _CONFIG["max_new_tokens"]
        return ids, None, "stop" if stopped or (cap is not None and len(ids) < cap) else None

    def action_ids(self, action_text: str) -> list[int]:
        """The ids of RL2's action text (the stop token's text, when it ends with it, as its id)."""
        if self.eos_text and action_text.endswith(self.eos_text):
            body = action_text[: -len(self.eos_text)]
            return [*self.tokenizer(body, add_special_tokens=False)["input_ids"], *self.eos_ids]
        return list(self.tokenizer(action_text, add_special_tokens=False)["input_ids"])


_SESSIONS: dict[str, _Session] = {}
_COUNTER = itertools.count()
SESSION_KEY = "gem_session"


def _tap(session: _Session) -> Any:
    """A wrapper recording each env step's reward on ``session`` (``make(..., wrappers=[...])``)."""
    from gem_core import Wrapper

    class _RewardTap(Wrapper):
        def step(self, action: Any) -> Any:
            out = self.env.step(action)
            session.last_reward = float(out[1])
            return out

    return _RewardTap


async def _run(session: _Session, settings: RowSettings) -> None:
    # RL2 stops stepping at rollout.max_turns: the kit's episode must end there too.
    limits = [m for m in (settings.max_turns, _CONFIG["max_turns"]) if m is not None]
    settings = dataclasses.replace(settings, max_turns=min(limits) if limits else None)
    try:
        episode, _ = await _play(
            settings,
            session.tokenizer,
            session.generate,
            max_tokens_per_turn=None,  # SGLang caps each turn; the policy must not cut RL2's tokens
            max_turns=_CONFIG["max_turns"],
            template_kwargs=_CONFIG["template_kwargs"],
            env_kwargs={"wrappers": [*settings.env_kwargs.get("wrappers", []), _tap(session)]},
        )
    except BaseException as exc:
        await session.events.put(("error", exc))
        if not isinstance(exc, Exception):
            _SESSIONS.pop(session.key, None)
            raise
        return
    await session.events.put(("end", episode))


async def _next_event(session: _Session) -> tuple[str, Any]:
    kind, value = await session.events.get()
    if kind == "error":
        _SESSIONS.pop(session.key, None)
        raise value
    if kind == "end":
        _SESSIONS.pop(session.key, None)
    return kind, value


async def v002_reset(extra_info: Any) -> tuple[str, dict[str, Any]]:
    """RL2 0.0.2's ``reset``: start the row's episode; ``(first prompt text, extra_info)``."""
    shown = _preview(extra_info) if isinstance(extra_info, Mapping) else repr(extra_info)
    label = f"dataset row (extra_info {shown})"
    settings = RowSettings.from_row(extra_info, label)
    tokenizer = _tokenizer()
    key = f"{os.getpid()}-{next(_COUNTER)}"
    session = _Session(key, tokenizer)
    _SESSIONS[key] = session
    session.task = asyncio.get_running_loop().create_task(_run(session, settings))
    kind, value = await _next_event(session)
    if kind != "prompt":
        raise InvalidArgument(
            f"{label}: the episode of {settings.env_id} (seed {settings.seed}) ended before its "
            f"first turn (end_reason {getattr(value, 'end_reason', None)!r})"
        )
    state_text = tokenizer.decode(value, skip_special_tokens=False)
    return state_text, {**dict(extra_info), SESSION_KEY: key}


async def v002_step(state_text: str, action_text: str, extra_info: Mapping[str, Any]) -> dict[str, Any]:
    """RL2 0.0.2's ``step``: hand the action to the episode; its reward and next state."""
    key = extra_info.get(SESSION_KEY) if isinstance(extra_info, Mapping) else None
    session = _SESSIONS.get(key) if key is not None else None
    if session is None:
        raise InvalidArgument(
            f"gem_rl2 step: no live episode for extra_info {SESSION_KEY}={key!r} (reset was not "
            "called through gem_rl2's env file, the episode already ended, or it timed out after "
            f"{STEP_TIMEOUT_S:.0f} s; GEM_RL2_STEP_TIMEOUT sets it)"
        )
    action = session.action_ids(action_text)
    before = session.prompt_ids
    turn = session.turns
    session.turns += 1
    session.last_reward = 0.0
    await session.actions.put(action)
    kind, value = await _next_event(session)
    if kind == "end":
        episode: Episode = value
        reward = float(episode.turns[turn].reward) if turn < len(episode.turns) else 0.0
        return {
            "next_state": state_text + action_text,
            "reward": reward,
            "score": reward,
            "done": True,
            "extra_info": {**dict(extra_info), "success": bool(episode.success), "end_reason": episode.end_reason},
        }
    ids = value
    prefix = [*before, *action]
    if ids[: len(prefix)] == prefix:
        next_state = state_text + action_text + session.tokenizer.decode(ids[len(prefix) :], skip_special_tokens=False)
    else:  # the template rewrote the chat: RL2 starts a new sequence from the full text
        next_state = session.tokenizer.decode(ids, skip_special_tokens=False)
    reward = session.last_reward
    return {"next_state": next_state, "reward": reward, "score": reward, "done": False, "extra_info": dict(extra_info)}
