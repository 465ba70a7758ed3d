r"""`GemActor`: oat's ``PPOMultiTurnActor`` playing gem_core episodes with oat's vLLM engine.

oat calls ``collect_experience()`` once per learner step (``PPOMultiTurnActor.step``
ignores the prompt dataset). `GemActor` plays ``episodes_per_step`` episodes (env ids
drawn from the ``--env_ids``/``--env_weights`` mixture, seeds derived from ``--seed``,
the actor id and the step) with the adapter kit of `gem_core.rl`, all concurrently:

- `gem_core.rl.play_row` makes the env, plays one episode with a
  `gem_core.rl.BudgetedPolicy` (the first observation fits ``--prompt_max_length``,
  each turn at most ``--generate_max_length`` tokens, the whole episode at most
  ``--max_response_length`` tokens after the first prompt) and closes the env;
- the turn requests of all episodes waiting on the model go out together through oat's
  own ``ActorBase.generate`` (token-id prompts, one ``vllm.SamplingParams`` per prompt:
  oat's ``sampling_params`` with that turn's ``max_tokens``), so vLLM batches them;
- every generated turn becomes one oat ``Transition``: ``prompt_ids`` the whole
  context the model saw (token-exact, never re-tokenized), ``response_ids`` and
  ``response_logprobs`` as vLLM returned them, ``rewards`` the turn's reward,
  ``done`` on the episode's last transition, ``response_is_truncated`` and
  ``action_is_formatted`` from the turn; ``info`` holds ``gem/turn``,
  ``gem/num_turns``, ``gem/episode_return``, ``gem/success`` and
  ``gem/first_prompt_len`` (the episode's first prompt, a prefix of every context). A turn that generated no token is not a
  transition: its reward is credited to the neighbouring generated turn (the empty-turn
  rule of `gem_core.rl.packing`), as oat's learner cannot train an empty response.

A failed episode (the env or the engine raised) is dropped with a warning and counted
in the metrics (``actor/gem_failed_episodes``); collection goes on. Only when every
episode of a step fails does ``collect_experience`` raise.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from oat.algorithms.ppo_multiturn import PPOMultiTurnActor
from oat.types import Transition

from gem_core.errors import PlayRowError, UnregisteredEnv
from gem_core.rl import BudgetedPolicy, ChatFormatter, play_row
from gem_core.rl.packing import credited_rewards, pack_turns
from gem_core.rl.sampling import derive_seed
from gem_oat.args import EnvPlan, validate_args

__all__ = ["GemActor", "episode_transitions"]

logger = logging.getLogger(__name__)


def _run(coro: Any) -> Any:
    """Run ``coro`` to completion, also from a thread that already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class _EngineQueue:
    """Collects the turn requests of concurrent episodes into batched engine calls.

    A batch goes out when every live episode is waiting for the model, or ``wait_s``
    after its first request (some episodes are still stepping their envs). ``call``
    (blocking: oat's ``ActorBase.generate``) runs in one worker thread, one batch at a time.
    """

    def __init__(self, call: Any, live: int, wait_s: float):
        self.call = call
        self.live = live
        self.wait_s = wait_s
        self.pending: list[tuple[list[int], int, asyncio.Future]] = []
        self.calls = 0
        self.generate_s = 0.0
        self._wake = asyncio.Event()
        self._full = asyncio.Event()
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gem-oat-engine")
        self._task: asyncio.Task | None = None

    def _update(self) -> None:
        if self.pending and len(self.pending) >= self.live:
            self._full.set()
        if self.pending or self.live <= 0:
            self._wake.set()

    async def generate(self, prompt_ids: list[int], max_tokens: int) -> Any:
        """The `gem_core.rl.BudgetedPolicy` generate call."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._serve())
        fut = asyncio.get_running_loop().create_future()
        self.pending.append((list(prompt_ids), int(max_tokens), fut))
        self._update()
        return await fut

    def done(self) -> None:
        """One episode finished (it will send no more requests)."""
        self.live -= 1
        self._update()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            if not self.pending:
                if self.live <= 0:
                    return
                self._wake.clear()
                continue
            if len(self.pending) < self.live and self.wait_s > 0:
                try:
                    await asyncio.wait_for(self._full.wait(), timeout=self.wait_s)
                except asyncio.TimeoutError:
                    pass
            batch, self.pending = self.pending, []
            self._full.clear()
            self._wake.clear()
            start = time.perf_counter()
            try:
                outs = await loop.run_in_executor(self._pool, self.call, [(p, m) for p, m, _ in batch])
            except Exception as exc:  # the engine failed: every request of the batch fails
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            finally:
                self.calls += 1
                self.generate_s += time.perf_counter() - start
            for (_, _, fut), out in zip(batch, outs, strict=True):
                if not fut.done():
                    fut.set_result(out)

    async def close(self) -> None:
        self.live = 0
        self._update()
        if self._task is not None:
            await self._task
        self._pool.shutdown(wait=False)


def episode_transitions(episode: Any, tokenizer: Any) -> list[Transition]:
    """One oat ``Transition`` per generated turn of a `gem_core.rl.Episode` (module docs).

    Args:
        episode: a finished packed-layout episode (``episode.error is None``).
        tokenizer: decodes the prompt and response texts (for oat's logs).

    Returns:
        The transitions in turn order (empty when no turn generated a token).
    """
    turns = list(episode.turns)
    generated = [len(t.response_ids) > 0 for t in turns]
    credited, _ = credited_rewards([t.reward for t in turns], generated)
    contexts: list[list[int]] = []  # the whole prompt of each turn, token-exact
    for sample in episode.samples():
        packed = pack_turns(sample, label=f"episode of {episode.env_id} (seed {episode.seed})")
        for s, _ in packed.turn_spans:
            contexts.append(list(packed.prompt_ids) + list(packed.response_ids[:s]))
    ret = float(episode.episode_return)
    out: list[Transition] = []
    slots = [k for k, g in enumerate(generated) if g]
    for j, k in enumerate(slots):
        turn = turns[k]
        prompt_ids = [int(t) for t in contexts[k]]
        out.append(
            Transition(
                obs=turn.observation,
                action=turn.action,
                rewards=float(credited[j]),
                done=j == len(slots) - 1,
                prompt=tokenizer.decode(prompt_ids, skip_special_tokens=False),
                prompt_ids=prompt_ids,
                response=tokenizer.decode(list(turn.response_ids), skip_special_tokens=True),
                response_ids=[int(t) for t in turn.response_ids],
                response_logprobs=[float(x) for x in turn.response_logprobs],
                response_is_truncated=bool(turn.response_truncated),
                action_is_formatted=not turn.format_error,
                loss_mask=True,
                info={
                    "gem/turn": float(k),
                    "gem/num_turns": float(len(turns)),
                    "gem/episode_return": ret,
                    "gem/success": float(episode.success),
                    "gem/first_prompt_len": float(len(contexts[0])) if contexts else 0.0,
                },
            )
        )
    return out


class GemActor(PPOMultiTurnActor):
    """oat's multi-turn actor over gem_core envs (module docs). Arguments: `gem_oat.args.GemArgs`.

    The env settings are checked (every env made once) in ``__init__``, before oat loads
    the vLLM engine in ``init``.

    Attributes:
        plan: the checked `gem_oat.args.EnvPlan`.
        last_failures: ``(env_id, seed, error)`` of the episodes the last step dropped.
    """

    def __init__(self, ipc_server: Any, vllm_args: Any, args: Any) -> None:
        self.plan: EnvPlan = validate_args(args)
        super().__init__(ipc_server, vllm_args, args)
        self.actor_id = 0
        self.collect_calls = 0
        self.last_failures: list[tuple[str, int | None, str]] = []

    def init(self, actor_id: int, save_path: str) -> None:
        """oat's actor setup (the vLLM engine, ``self.tokenizer``, ``self.sampling_params``)."""
        super().init(actor_id, save_path)

    # ---- generation through oat's engine -------------------------------------------

    def turn_sampling_params(self, max_tokens: int) -> Any:
        """oat's ``sampling_params`` for one turn: one sample, ``max_tokens``, the sampled token's log-prob."""
        params = self.sampling_params.clone()
        params.n = 1
        params.max_tokens = int(max_tokens)
        if not params.logprobs:
            params.logprobs = 1
        return params

    def engine_call(self, requests: Sequence[tuple[list[int], int]]) -> list[tuple[list[int], list[float] | None, str | None]]:
        """One batched generation through oat's ``ActorBase.generate`` (token-id prompts)."""
        prompts = [list(p) for p, _ in requests]
        params = [self.turn_sampling_params(m) for _, m in requests]
        outputs = self.generate(prompts, params)
        out = []
        for res in outputs:
            o = res.outputs[0]
            ids = [int(t) for t in o.token_ids]
            lps = None
            if o.logprobs is not None:
                lps = [float(step[t].logprob) for step, t in zip(o.logprobs, ids, strict=False)]
            out.append((ids, lps, o.finish_reason))
        return out

    # ---- collection ----------------------------------------------------------------

    def episode_specs(self) -> list[tuple[str, int]]:
        """The ``(env_id, seed)`` of each episode of this step (deterministic in ``--seed``)."""
        args = self.args
        fixed = [int(s) for s in args.env_seeds]
        n = args.episodes_per_step or len(fixed) or args.rollout_batch_size_per_device
        base = derive_seed(int(args.seed), "gem-oat", int(getattr(self, "actor_id", 0)), self.collect_calls)
        rng = np.random.default_rng(base)
        w = np.asarray(self.plan.weights, dtype=np.float64)
        picks = [0] * n if len(w) == 1 else rng.choice(len(w), size=n, p=w / w.sum()).tolist()
        seeds = [fixed[i % len(fixed)] if fixed else int(derive_seed(base, i) % (2**31)) for i in range(n)]
        return [(self.plan.env_ids[int(k)], s) for k, s in zip(picks, seeds, strict=True)]

    def collect_experience(self) -> tuple[list[list[Transition]], dict[str, Any]]:
        """Play this step's episodes; one list of ``Transition`` per episode, and metrics."""
        specs = self.episode_specs()
        self.collect_calls += 1
        start = time.perf_counter()
        results, stats = _run(self._play(specs))
        episodes: list[list[Transition]] = []
        failures: list[tuple[str, int | None, str]] = []
        empty = 0
        for (env_id, seed), res in zip(specs, results, strict=True):
            if isinstance(res, UnregisteredEnv):
                raise res  # the id is unknown in this actor's process: a deployment error
            if isinstance(res, BaseException):
                failures.append((env_id, seed, f"{type(res).__name__}: {res}"))
                continue
            transitions = episode_transitions(res, self.tokenizer)
            if transitions:
                episodes.append(transitions)
            else:
                empty += 1
        self.last_failures = failures
        for env_id, seed, err in failures:
            logger.warning("gem-oat: episode of %s (seed %s) dropped: %s", env_id, seed, err)
        if not episodes:
            first = failures[0][2] if failures else "no episode generated a token"
            raise PlayRowError(
                f"gem-oat: all {len(specs)} episodes of this step failed or generated nothing "
                f"(first: {first}); check the env settings and the engine"
            )
        n_tr = sum(len(e) for e in episodes)
        metrics = {
            "actor/gem_episodes": float(len(episodes)),
            "actor/gem_failed_episodes": float(len(failures)),
            "actor/gem_empty_episodes": float(empty),
            "actor/gem_transitions": float(n_tr),
            "actor/gem_success": float(np.mean([e[-1].info["gem/success"] for e in episodes])),
            "actor/gem_generate_calls": float(stats["calls"]),
            "actor/gem_generate_time": float(stats["generate_s"]),
            "actor/gem_collect_time": time.perf_counter() - start,
        }
        return episodes, metrics

    async def _play(self, specs: list[tuple[str, int]]) -> tuple[list[Any], dict[str, float]]:
        args = self.args
        template_kwargs = json.loads(args.template_kwargs)
        queue = _EngineQueue(self.engine_call, live=len(specs), wait_s=float(args.batch_wait_s))
        env_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=min(32, max(1, len(specs))), thread_name_prefix="gem-oat-env"
        )

        async def one(env_id: str, seed: int) -> Any:
            try:
                formatter = ChatFormatter(
                    self.tokenizer, system_prompt=args.system_prompt, template_kwargs=template_kwargs
                )
                policy = BudgetedPolicy(
                    queue.generate,
                    formatter,
                    prompt_length=int(args.prompt_max_length),
                    response_length=int(args.max_response_length),
                    max_tokens_per_turn=int(args.generate_max_length),
                    prompt_length_key="--prompt_max_length",
                )
                return await play_row(
                    {"env_id": env_id, "seed": seed},
                    policy,
                    formatter,
                    env_kwargs=self.plan.make_kwargs(env_id),
                    max_turns=args.max_turns,
                    truncated_response=args.truncated_response,
                    truncation_reward=float(args.truncation_reward),
                    executor=env_pool,
                )
            except Exception as exc:  # this episode is dropped; the others go on
                return exc
            finally:
                queue.done()

        try:
            results = await asyncio.gather(*(one(e, s) for e, s in specs))
        finally:
            await queue.close()
            env_pool.shutdown(wait=False)
        return list(results), {"calls": queue.calls, "generate_s": queue.generate_s}
