"""A local Hugging Face causal LM as a `Policy`, and `sequence_logprobs` for training."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Sequence
from typing import Any

from gem_core.errors import InvalidArgument, check_positive_int, import_optional
from gem_core.rl.sampling import GenerationResult, PolicyError, SamplingParams

__all__ = ["TransformersPolicy", "sequence_logprobs"]


def _torch() -> Any:
    return import_optional("torch", extra="rl", purpose="local transformers policies")


def sequence_logprobs(
    model: Any, input_ids: Any, attention_mask: Any | None = None, *, temperature: float = 1.0
) -> Any:
    """Per-token log-probabilities of ``input_ids`` under ``model``, aligned with them.

    Entry ``[i, t]`` is ``log p(input_ids[i, t] | input_ids[i, :t])`` for ``t >= 1`` and
    0 at ``t = 0``: multiply by `TrainingBatch.loss_mask` directly. Gradients flow
    (call it under ``torch.no_grad()`` for old/reference log-probabilities).

    Args:
        model: a causal LM (``model(input_ids, attention_mask=...).logits``).
        input_ids: ``[N, L]`` long tensor (right-padded).
        attention_mask: ``[N, L]`` tensor, 1 on real tokens (``None``: all ones).
        temperature: divide the logits by it first (match the sampling temperature).

    Returns:
        ``[N, L]`` float32 tensor.
    """
    torch = _torch()
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    if temperature != 1.0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.nn.functional.pad(picked, (1, 0), value=0.0)


class _LoopState:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.pending: list[tuple[list[int], SamplingParams, asyncio.Future]] = []
        self.worker: asyncio.Task | None = None
        self.full = asyncio.Event()


class TransformersPolicy:
    """A local Hugging Face causal LM as a `Policy` (CPU or GPU).

    Concurrent ``generate`` calls are gathered into batches (up to ``max_batch_size``;
    the batcher waits ``batch_wait_s`` for more requests once the first arrives) and
    decoded together with a KV cache, left-padded, in a worker thread, so the event loop
    stays free. Each request keeps its own sampling parameters: greedy when
    ``temperature == 0``; otherwise temperature and top-p sampling from a
    ``torch.Generator`` seeded with ``sampling.seed`` (unseeded: the global torch RNG).
    Greedy results are the same whatever the batch; seeded sampling is reproducible for
    the same batch composition (float rounding differs slightly across batch shapes;
    use ``max_batch_size=1`` for exact batch invariance).

    Returned log-probabilities are those of the model at temperature 1 (the raw
    distribution, like vLLM's default), whatever the sampling temperature.

    The policy holds a reference to ``model``: a training loop that updates the model
    in place samples from the updated weights on the next call (decoding switches the
    model to eval mode and restores its mode afterwards).

    Args:
        model: a causal LM, or a path / hub id for ``AutoModelForCausalLM.from_pretrained``.
        tokenizer: its tokenizer (or a path); gives the EOS and padding ids. Default: the
            model path's tokenizer, when ``model`` is a path.
        device: torch device for the model.
        max_batch_size: the most requests decoded together.
        batch_wait_s: how long the batcher waits for more requests.
        stop_token_ids: ids that end a response (default: the EOS ids of the model's
            generation config and of the tokenizer).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any | None = None,
        *,
        device: str = "cpu",
        max_batch_size: int = 32,
        batch_wait_s: float = 0.002,
        stop_token_ids: Sequence[int] | None = None,
    ):
        torch = _torch()
        transformers = import_optional("transformers", extra="rl", purpose="local transformers policies")
        if isinstance(model, (str, os.PathLike)):
            path = model
            model = transformers.AutoModelForCausalLM.from_pretrained(path)
            if tokenizer is None:
                tokenizer = path
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer)
        check_positive_int("max_batch_size", max_batch_size)
        self.torch = torch
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.model.eval()
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.batch_wait_s = float(batch_wait_s)
        if stop_token_ids is None:
            ids: list[int] = []
            gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
            for source in (
                gen_eos,
                getattr(tokenizer, "eos_token_id", None),
                getattr(model.config, "eos_token_id", None),
            ):
                if source is None:
                    continue
                for t in source if isinstance(source, (list, tuple)) else [source]:
                    if int(t) not in ids:
                        ids.append(int(t))
            stop_token_ids = ids
        self.stop_token_ids = tuple(int(t) for t in stop_token_ids)
        pad = getattr(tokenizer, "pad_token_id", None)
        if pad is None:
            pad = getattr(model.config, "pad_token_id", None)
        if pad is None:
            pad = self.stop_token_ids[0] if self.stop_token_ids else 0
        self.pad_token_id = int(pad)
        self.max_positions = getattr(model.config, "max_position_embeddings", None)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="gem-policy"
        )
        self._state: _LoopState | None = None
        self.num_batches = 0

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams) -> GenerationResult:
        """Generate one response (batched with other concurrent calls)."""
        self._validate(prompt_ids, sampling)  # a bad request fails alone, not its batch
        loop = asyncio.get_running_loop()
        state = self._state
        if state is None or state.loop is not loop:
            state = self._state = _LoopState(loop)
        fut: asyncio.Future = loop.create_future()
        state.pending.append((list(prompt_ids), sampling, fut))
        if len(state.pending) >= self.max_batch_size:
            state.full.set()
        if state.worker is None or state.worker.done():
            state.worker = loop.create_task(self._drain(state))
        return await fut

    async def _drain(self, state: _LoopState) -> None:
        loop = state.loop
        while state.pending:
            if len(state.pending) < self.max_batch_size and self.batch_wait_s > 0:
                try:
                    await asyncio.wait_for(state.full.wait(), self.batch_wait_s)
                except asyncio.TimeoutError:
                    pass
            state.full.clear()
            batch = [b for b in state.pending[: self.max_batch_size] if not b[2].done()]
            del state.pending[: self.max_batch_size]
            if len(state.pending) >= self.max_batch_size:
                state.full.set()
            if not batch:
                continue
            try:
                results = await loop.run_in_executor(
                    self._executor,
                    self.generate_batch,
                    [b[0] for b in batch],
                    [b[1] for b in batch],
                )
            except Exception as exc:
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, _, fut), result in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(result)

    def generate_batch(
        self, prompts: Sequence[Sequence[int]], samplings: Sequence[SamplingParams]
    ) -> list[GenerationResult]:
        """Decode several prompts together (synchronous; the core of `generate`)."""
        torch = self.torch
        if len(prompts) != len(samplings):
            raise InvalidArgument(
                f"got {len(prompts)} prompts and {len(samplings)} sampling params"
            )
        if not prompts:
            return []
        for p, s in zip(prompts, samplings, strict=True):
            self._validate(p, s)
        self.num_batches += 1
        n = len(prompts)
        width = max(len(p) for p in prompts)
        ids = torch.full((n, width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            mask[i, width - len(p) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        generators = []
        for s in samplings:
            g = None
            if not s.greedy and s.seed is not None:
                g = torch.Generator(device=self.device)
                g.manual_seed(s.seed)
            generators.append(g)
        stops = [set(self.stop_token_ids) | set(s.stop_token_ids) for s in samplings]
        tokens: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        reasons: list[str | None] = [None] * n
        steps = max(s.max_new_tokens for s in samplings)
        ids, mask, positions = ids.to(self.device), mask.to(self.device), positions.to(self.device)
        past = None
        cur_ids, cur_pos = ids, positions
        was_training = self.model.training
        self.model.eval()  # no dropout while sampling, even mid-training
        try:
            with torch.inference_mode():
                for _ in range(steps):
                    out = self.model(
                        input_ids=cur_ids,
                        attention_mask=mask,
                        position_ids=cur_pos,
                        past_key_values=past,
                        use_cache=True,
                    )
                    past = out.past_key_values
                    logits = out.logits[:, -1, :].float()
                    logp = torch.log_softmax(logits, dim=-1)
                    nxt: list[int] = []
                    for i in range(n):
                        if reasons[i] is not None:
                            nxt.append(self.pad_token_id)
                            continue
                        tok = self._choose(logits[i], samplings[i], generators[i])
                        tokens[i].append(tok)
                        logprobs[i].append(float(logp[i, tok]))
                        if tok in stops[i]:
                            reasons[i] = "stop"
                        elif len(tokens[i]) >= samplings[i].max_new_tokens:
                            reasons[i] = "length"
                        nxt.append(tok)
                    if all(r is not None for r in reasons):
                        break
                    cur_ids = torch.tensor(nxt, dtype=torch.long, device=self.device).unsqueeze(-1)
                    mask = torch.cat(
                        [mask, torch.ones((n, 1), dtype=mask.dtype, device=self.device)], dim=1
                    )
                    cur_pos = cur_pos[:, -1:] + 1
        finally:
            self.model.train(was_training)
        return [GenerationResult(tokens[i], logprobs[i], reasons[i] or "length") for i in range(n)]

    def _validate(self, prompt: Sequence[int], sampling: SamplingParams) -> None:
        if not prompt:
            raise PolicyError("empty prompt: a policy needs at least one prompt token")
        if (
            self.max_positions is not None
            and len(prompt) + sampling.max_new_tokens > self.max_positions
        ):
            raise PolicyError(
                f"prompt ({len(prompt)} tokens) + max_new_tokens ({sampling.max_new_tokens}) "
                f"exceeds the model's {self.max_positions} positions"
            )

    def _choose(self, logits: Any, sampling: SamplingParams, generator: Any) -> int:
        torch = self.torch
        if sampling.greedy:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / sampling.temperature, dim=-1)
        if sampling.top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            cum = torch.cumsum(sorted_p, dim=-1)
            drop = (cum - sorted_p) >= sampling.top_p  # keep the smallest prefix reaching top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        return int(torch.multinomial(probs, 1, generator=generator))

    def close(self) -> None:
        """Stop the worker thread (the model stays usable through `generate_batch`)."""
        self._executor.shutdown(wait=False)
