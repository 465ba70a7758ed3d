r"""`GemRollout`: TRL's ``rollout_func`` playing one gem_core episode per dataset row.

TRL calls ``rollout_func(prompts, trainer)`` with the prompts of the process's slice of
the generation batch, already repeated ``num_generations`` times, and does not check how
many completions come back. `GemRollout` plays one episode per entry with the adapter
kit of `gem_core.rl`: `play_row` (the row's ``env_id``/``seed``, which
`gem_trl.trainer.GemGRPOTrainer` hands over as ``trainer.gem_rows``; the ``prompt``
column is only a placeholder, the env's reset observation is the real prompt), a
`BudgetedPolicy` (the first observation fits ``max_prompt_length``, the packed response
fits ``max_completion_length``, each turn at most ``max_tokens_per_turn``) and
`pack_episode`. It returns exactly one entry per prompt:

- ``prompt_ids``, ``completion_ids`` (every turn's generated ids as generated and,
  between turns, the next observation's chat-template token delta), ``logprobs`` (the
  sampling log-probs, 0.0 on env tokens) and ``env_mask`` (1 on generated tokens, 0 on
  env tokens; TRL's loss mask);
- extra fields, which TRL passes to the reward functions: ``gem_token_rewards`` (each
  turn's reward on its last generated token), ``gem_turn_rewards``, ``gem_return``,
  ``gem_success``, ``gem_num_turns``.

Generation, all episodes of the call concurrently:

- ``generate=`` given: that call (`gem_core.rl.budget.GenerateFn`), e.g. a test's
  `gem_core.rl.testing.TinyModelGenerator`;
- TRL runs with vLLM (``use_vllm=True``): the trainer's vLLM client (server mode) or
  engine (colocate mode), the turns of concurrent episodes batched per request;
- otherwise the trainer's own model through `gem_core.rl.TransformersPolicy`, which
  decodes concurrent requests together (one batched decode per turn wave, not one
  ``generate`` per episode), sampling with the trainer's ``temperature`` and ``top_p``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.rl import BudgetedPolicy, ChatFormatter, pack_episode, play_row
from gem_core.rl.sampling import derive_seed

__all__ = ["GemRollout", "ROLLOUT_KEYS", "run_coroutine"]

#: The keys of `GemRollout`'s output (TRL pops ``env_mask``; the others reach the reward functions).
ROLLOUT_KEYS = (
    "prompt_ids",
    "completion_ids",
    "logprobs",
    "env_mask",
    "gem_token_rewards",
    "gem_turn_rewards",
    "gem_return",
    "gem_success",
    "gem_num_turns",
)

_HINT = "; write the dataset with gem_trl.make_dataset(env_id, seeds) (columns prompt, env_id, seed)"


def run_coroutine(coro: Any) -> Any:
    """Run ``coro`` to completion from synchronous code, also when this thread runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class _TurnBatcher:
    """Gathers concurrent ``(prompt_ids, max_tokens)`` requests into batched calls of ``fn``.

    ``fn(prompts, max_tokens) -> [(ids, logprobs)]`` runs in a worker thread, once per
    wave of requests with the same cap (the batch waits ``wait_s`` for more requests).
    """

    def __init__(self, fn: Callable[[list[list[int]], int], list[tuple[list[int], list[float]]]], wait_s: float = 0.005):
        self.fn = fn
        self.wait_s = wait_s
        self.pending: list[tuple[list[int], int, asyncio.Future]] = []
        self.task: asyncio.Task | None = None
        self.batches = 0

    async def __call__(self, prompt_ids: list[int], max_tokens: int) -> tuple[list[int], list[float], None]:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.pending.append((list(prompt_ids), int(max_tokens), fut))
        if self.task is None or self.task.done():
            self.task = loop.create_task(self._drain())
        ids, logprobs = await fut
        return ids, logprobs, None

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self.pending:
            seen = -1
            while seen != len(self.pending):  # wait until no new request arrives
                seen = len(self.pending)
                await asyncio.sleep(self.wait_s)
            batch, self.pending = self.pending, []
            for cap in sorted({b[1] for b in batch}):
                group = [b for b in batch if b[1] == cap]
                self.batches += 1
                try:
                    results = await loop.run_in_executor(None, self.fn, [b[0] for b in group], cap)
                    if len(results) != len(group):
                        raise RuntimeError(f"the generation backend answered {len(results)} of {len(group)} prompts")
                except Exception as exc:
                    for *_, fut in group:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                for (*_, fut), result in zip(group, results, strict=True):
                    if not fut.done():
                        fut.set_result(result)


def _vllm_generate_fn(trainer: Any) -> Callable[[list[list[int]], int], list[tuple[list[int], list[float]]]]:
    """The trainer's vLLM backend as ``fn(prompts, max_tokens)`` (sampling from its config)."""
    gen = trainer.vllm_generation
    args = trainer.args
    sampling = {
        "temperature": float(args.temperature),
        "top_p": float(args.top_p),
        "top_k": int(args.top_k or 0),
        "min_p": float(args.min_p or 0.0),
        "repetition_penalty": float(args.repetition_penalty),
    }
    if gen.mode == "server":
        client = getattr(gen, "vllm_client", None)
        if client is None:  # TRL builds the weight-syncing client on the main process only
            from trl.generation.vllm_client import VLLMClient

            base_url = args.vllm_server_base_url or f"http://{args.vllm_server_host}:{args.vllm_server_port}"
            client = VLLMClient(base_url=base_url, connection_timeout=args.vllm_server_timeout)
            gen.vllm_client = client

        def server(prompts: list[list[int]], max_tokens: int) -> list[tuple[list[int], list[float]]]:
            out = client.generate(
                prompts=prompts, n=1, max_tokens=max_tokens, logprobs=0,
                generation_kwargs=args.generation_kwargs, **sampling,
            )  # fmt: skip
            return [
                (list(ids), [float(lp[0]) if lp and lp[0] is not None else float("nan") for lp in lps])
                for ids, lps in zip(out["completion_ids"], out["logprobs"], strict=True)
            ]

        return server

    from vllm import SamplingParams

    def colocate(prompts: list[list[int]], max_tokens: int) -> list[tuple[list[int], list[float]]]:
        params = SamplingParams(n=1, max_tokens=max_tokens, logprobs=0, **sampling, **(args.generation_kwargs or {}))
        outs = gen.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        results = []
        for o in outs:
            c = o.outputs[0]
            ids = list(c.token_ids)
            lps = [float(d[t].logprob) if d and t in d else float("nan") for t, d in zip(ids, c.logprobs or [{}] * len(ids), strict=True)]
            results.append((ids, lps))
        return results

    return colocate


class GemRollout:
    """TRL's ``rollout_func`` for gem_core envs (see the module docs).

    Args:
        generate: the generation call (`gem_core.rl.budget.GenerateFn`); ``None``: the
            trainer's vLLM backend when it uses vLLM, else its own model, batched.
        max_prompt_length: the most tokens the env's first observation may render to.
        max_tokens_per_turn: the most tokens one response may have (``None``: the
            trainer's ``max_completion_length``, the budget of the packed response).
        max_turns: the engine's turn limit (``None``: the env's own).
        system_prompt: text of a leading system message, or ``None``.
        env_kwargs: keyword arguments of ``gem_core.make`` for every row's env.
        truncated_response: ``"pass"`` a response cut by the token cap to the env, or
            ``"penalize"`` it (reward ``truncation_reward``, the episode ends).
        truncation_reward: see above.
        template_kwargs: variables of the chat template (default: the trainer's
            ``chat_template_kwargs``).
        max_batch_size: the most requests the transformers policy decodes together
            (``None``: all episodes of the call).

    Attributes:
        stats: of the last call: ``episodes``, ``generate_calls`` (turns generated) and
            ``batches`` (batched decodes they took), ``generate_s``.
    """

    def __init__(
        self,
        *,
        generate: Any = None,
        max_prompt_length: int = 512,
        max_tokens_per_turn: int | None = None,
        max_turns: int | None = None,
        system_prompt: str | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        truncated_response: str = "pass",
        truncation_reward: float = -1.0,
        template_kwargs: Mapping[str, Any] | None = None,
        max_batch_size: int | None = None,
    ):
        if truncated_response not in ("pass", "penalize"):
            raise InvalidArgument(f"truncated_response must be 'pass' or 'penalize', got {truncated_response!r}")
        self.generate = generate
        self.max_prompt_length = int(max_prompt_length)
        self.max_tokens_per_turn = None if max_tokens_per_turn is None else int(max_tokens_per_turn)
        self.max_turns = None if max_turns is None else int(max_turns)
        self.system_prompt = system_prompt
        self.env_kwargs = dict(env_kwargs or {})
        self.truncated_response = truncated_response
        self.truncation_reward = float(truncation_reward)
        self.template_kwargs = None if template_kwargs is None else dict(template_kwargs)
        self.max_batch_size = max_batch_size
        self.stats: dict[str, float] = {}
        self._policy: Any = None
        self._policy_model: Any = None
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, args: Any, **overrides: Any) -> GemRollout:
        """A rollout set up from a `gem_trl.trainer.GemGRPOConfig`'s fields."""
        kwargs = dict(
            max_prompt_length=args.max_prompt_length,
            max_tokens_per_turn=args.max_tokens_per_turn,
            max_turns=args.max_turns,
            system_prompt=args.system_prompt,
            env_kwargs=args.env_kwargs,
            truncated_response=args.truncated_response,
            truncation_reward=args.truncation_reward,
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    # ---- generation backends ------------------------------------------------------------
    def _transformers_policy(self, trainer: Any, n: int) -> Any:
        from gem_core.rl import TransformersPolicy

        model = trainer.accelerator.unwrap_model(trainer.model)
        if self._policy is None or self._policy_model is not model:
            was_training = model.training
            self._policy = TransformersPolicy(
                model,
                trainer.processing_class,
                device=str(trainer.accelerator.device),
                max_batch_size=max(1, self.max_batch_size or n),
                batch_wait_s=0.005,
            )
            model.train(was_training)  # TransformersPolicy switches it to eval
            self._policy_model = model
        elif self.max_batch_size is None:
            self._policy.max_batch_size = max(1, n)
        return self._policy

    def _backend(self, trainer: Any, n: int) -> tuple[Callable[..., Any], Callable[[], int]]:
        """``(make_generate(row_index), batches_so_far)`` for this call."""
        if self.generate is not None:
            return (lambda i: self.generate), (lambda: 0)
        if getattr(trainer, "use_vllm", False):
            batcher = _TurnBatcher(_vllm_generate_fn(trainer))
            return (lambda i: batcher), (lambda: batcher.batches)
        from gem_core.rl import SamplingParams

        policy = self._transformers_policy(trainer, n)
        start = policy.num_batches
        args = trainer.args
        base = derive_seed(int(args.seed), int(trainer.state.global_step), "gem-trl")

        def make(i: int) -> Callable[..., Any]:
            turn = [0]

            async def generate(prompt_ids: list[int], max_tokens: int) -> tuple[list[int], list[float], str]:
                sampling = SamplingParams(
                    temperature=float(args.temperature),
                    top_p=float(args.top_p),
                    max_new_tokens=int(max_tokens),
                    seed=derive_seed(base, i, turn[0]),
                )
                turn[0] += 1
                out = await policy.generate(prompt_ids, sampling)
                return out.token_ids, out.logprobs, out.finish_reason

            return generate

        return make, (lambda: policy.num_batches - start)

    # ---- the rollout function -----------------------------------------------------------
    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per entry of ``prompts``; see the module docs for the output."""
        rows = getattr(trainer, "gem_rows", None)
        if rows is None:
            raise InvalidArgument(
                "GemRollout reads each prompt's env id and seed from the dataset rows, which "
                "gem_trl.GemGRPOTrainer hands it as trainer.gem_rows; got a trainer without them "
                f"({type(trainer).__name__}): train with gem_trl.GemGRPOTrainer"
            )
        if len(rows) != len(prompts):
            raise InvalidArgument(
                f"GemRollout got {len(prompts)} prompts but {len(rows)} dataset rows; expected one row per prompt"
            )
        with self._lock:
            return run_coroutine(self._play_all(list(rows), trainer))

    async def _play_all(self, rows: list[Mapping[str, Any]], trainer: Any) -> dict[str, list[Any]]:
        make_generate, batches = self._backend(trainer, len(rows))
        tokenizer = trainer.processing_class
        template_kwargs = self.template_kwargs
        if template_kwargs is None:
            template_kwargs = dict(getattr(trainer, "chat_template_kwargs", None) or {})
        response_length = int(trainer.args.max_completion_length)
        per_turn = min(self.max_tokens_per_turn or response_length, response_length)
        policies: list[BudgetedPolicy] = []

        async def play(i: int, row: Mapping[str, Any]) -> Any:
            formatter = ChatFormatter(tokenizer, system_prompt=self.system_prompt, template_kwargs=template_kwargs)
            policy = BudgetedPolicy(
                make_generate(i),
                formatter,
                prompt_length=self.max_prompt_length,
                response_length=response_length,
                max_tokens_per_turn=per_turn,
                prompt_length_key="GemGRPOConfig.max_prompt_length",
            )
            policies.append(policy)
            return await play_row(
                row,
                policy,
                formatter,
                env_kwargs=self.env_kwargs,
                max_turns=self.max_turns,
                truncated_response=self.truncated_response,
                truncation_reward=self.truncation_reward,
                hint=_HINT,
            )

        episodes = await asyncio.gather(*(play(i, row) for i, row in enumerate(rows)))
        self.stats = {
            "episodes": len(episodes),
            "generate_calls": sum(p.calls for p in policies),
            "batches": batches(),
            "generate_s": sum(p.generate_s for p in policies),
        }
        return self._pack(episodes, pad_id=_pad_id(tokenizer))

    @staticmethod
    def _pack(episodes: Sequence[Any], *, pad_id: int) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {k: [] for k in ROLLOUT_KEYS}
        for ep in episodes:
            if ep.template_rewrite:
                raise InvalidArgument(
                    f"episode of {ep.env_id} (seed {ep.seed}): the chat template rewrites earlier turns "
                    "(e.g. strips <think>), so one completion cannot hold the episode; pass the trainer a "
                    "tokenizer whose chat template only appends"
                )
            p = pack_episode(ep)
            ids, mask, lps, rewards = list(p.response_ids), list(p.response_mask), list(p.response_logprobs), list(p.token_rewards)
            if not ids:  # TRL reads completion_ids[i][-1]: one padding token, masked out of the loss
                ids, mask, lps, rewards = [pad_id], [0], [0.0], [0.0]
            out["prompt_ids"].append(list(p.prompt_ids))
            out["completion_ids"].append(ids)
            out["logprobs"].append(lps)
            out["env_mask"].append(mask)
            out["gem_token_rewards"].append(rewards)
            out["gem_turn_rewards"].append(list(p.turn_rewards))
            out["gem_return"].append(float(p.reward_score))
            out["gem_success"].append(float(bool(ep.success)))
            out["gem_num_turns"].append(int(p.num_turns))
        return out


def _pad_id(tokenizer: Any) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None:
        pad = getattr(tokenizer, "eos_token_id", None)
    return int(pad or 0)
