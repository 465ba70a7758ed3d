"""Test doubles for gem-oat's tests: the LLM engine behind oat's ``generate``, and oat's data read back.

- `ScriptedLLM`: answers ``vllm.LLM.generate(prompt_token_ids=..., sampling_params=...)``
  the way vLLM 0.8.4 does (``RequestOutput``-shaped results: ``prompt_token_ids``,
  ``outputs[0].token_ids/.text/.finish_reason/.logprobs``), with a
  `gem_core.rl.testing.TinyModelGenerator` (scripted tokens, the tiny model's log-probs);
- `SamplingParamsDouble`: the ``vllm.SamplingParams`` fields oat and `gem_oat.GemActor` set;
- `attach_engine`: what oat's ``ActorBase.init`` sets for generation, with the double
  engine in place of ``vllm.LLM`` (nothing else of the actor is replaced);
- `packed_from_transitions`: one episode's oat ``Transition`` list as a
  `gem_core.rl.PackedEpisode` (the adapter suite's read-back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from gem_core.errors import InvalidArgument
from gem_core.rl.packing import PackedEpisode

__all__ = ["ScriptedLLM", "SamplingParamsDouble", "attach_engine", "packed_from_transitions"]


@dataclass
class SamplingParamsDouble:
    """The fields of ``vllm.SamplingParams`` used on gem-oat's path (with vLLM's ``clone``)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 16
    logprobs: int | None = None

    def clone(self) -> SamplingParamsDouble:
        return SamplingParamsDouble(**self.__dict__)


class ScriptedLLM:
    """``vllm.LLM`` with token-id prompts answered by a `TinyModelGenerator` (see module docs).

    Args:
        generator: the generator (``script=`` a scenario's scripted policy).
        fail_on: a callable ``(prompt_ids) -> bool``; a batch holding such a prompt raises
            (an engine failure), for the bad-input tests.

    Attributes:
        batches: the number of prompts of each ``generate`` call.
    """

    def __init__(self, generator: Any, *, fail_on: Any = None):
        self.generator = generator
        self.fail_on = fail_on
        self.batches: list[int] = []

    def get_tokenizer(self) -> Any:
        return self.generator.load()[1]

    def generate(
        self,
        prompts: Any = None,
        sampling_params: Any = None,
        prompt_token_ids: Sequence[Sequence[int]] | None = None,
        lora_request: Any = None,
        use_tqdm: bool = False,
    ) -> list[Any]:
        if prompt_token_ids is None:
            raise InvalidArgument("ScriptedLLM serves token-id prompts only (prompt_token_ids=...)")
        params = list(sampling_params) if isinstance(sampling_params, list | tuple) else [sampling_params] * len(prompt_token_ids)
        if len(params) != len(prompt_token_ids):
            raise InvalidArgument(f"{len(params)} sampling params for {len(prompt_token_ids)} prompts")
        self.batches.append(len(prompt_token_ids))
        tokenizer = self.get_tokenizer()
        out = []
        for prompt, sp in zip(prompt_token_ids, params, strict=True):
            if self.fail_on is not None and self.fail_on(list(prompt)):
                raise RuntimeError("ScriptedLLM: injected engine failure")
            ids, lps = self.generator.complete(list(prompt), int(sp.max_tokens))
            finish = "stop" if ids and ids[-1] == tokenizer.eos_token_id else "length"
            logprobs = None
            if sp.logprobs is not None:
                logprobs = [{t: SimpleNamespace(logprob=lp)} for t, lp in zip(ids, lps, strict=True)]
            completion = SimpleNamespace(
                token_ids=ids,
                text=tokenizer.decode(ids, skip_special_tokens=True),
                finish_reason=finish,
                logprobs=logprobs,
            )
            out.append(SimpleNamespace(prompt_token_ids=list(prompt), outputs=[completion]))
        return out


def attach_engine(actor: Any, llm: ScriptedLLM) -> Any:
    """Set what oat's ``ActorBase.init`` / ``RewardActor.init`` set for generation, with ``llm`` as the engine."""
    args = actor.args
    actor.llm = llm
    actor.tokenizer = llm.get_tokenizer()
    actor.sampling_params = SamplingParamsDouble(
        n=args.num_samples,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        max_tokens=args.generate_max_length,
        logprobs=1,  # RewardActor.init
    )
    actor.use_lora_req = False
    actor.lora_path = None
    actor.actor_id = 0
    return actor


def packed_from_transitions(transitions: Sequence[Any]) -> PackedEpisode:
    """One episode's transitions as a packed row: the first prompt (``info["gem/first_prompt_len"]``), then each turn's
    observation delta (mask 0) and response (mask 1), the reward on each turn's last token.

    Raises:
        AssertionError: a transition's prompt does not extend the previous context (the
            actor did not keep the contexts token-exact).
    """
    if not transitions:
        raise InvalidArgument("an episode without transitions has no packed row")
    first = list(transitions[0].prompt_ids)[: int(transitions[0].info["gem/first_prompt_len"])]
    context = list(first)
    response: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    rewards: list[float] = []
    for k, t in enumerate(transitions):
        prompt = list(t.prompt_ids)
        assert prompt[: len(context)] == context, (
            f"transition {k}: its prompt_ids do not extend the previous turn's context"
        )
        delta = prompt[len(context) :]
        response += delta + list(t.response_ids)
        mask += [0] * len(delta) + [1] * len(t.response_ids)
        logprobs += [0.0] * len(delta) + [float(x) for x in t.response_logprobs]
        rewards += [0.0] * (len(delta) + len(t.response_ids))
        rewards[-1] = float(t.rewards)
        context = prompt + list(t.response_ids)
    return PackedEpisode(
        prompt_ids=first,
        response_ids=response,
        response_mask=mask,
        response_logprobs=logprobs,
        token_rewards=rewards,
        reward_score=float(sum(t.rewards for t in transitions)),
        num_turns=len(transitions),
    )
