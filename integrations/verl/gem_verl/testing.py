"""Test support: verl's LLM client with the server replaced by an in-process tiny model.

`TinyModelClient` subclasses verl's ``LLMServerClient`` and answers its
``generate(request_id, *, prompt_ids, sampling_params, ...) -> TokenOutput`` with
`gem_core.rl.testing.TinyModelGenerator`: a real transformers causal LM in the calling
process (greedy, or scripted tokens scored by the model). Everything above that call
(agent loop workers, the agent loop, TransferQueue, the trainer's advantage step) is
verl's own code. The client pickles small and works inside Ray actors.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from verl.workers.rollout.llm_server import LLMServerClient
from verl.workers.rollout.replica import TokenOutput

from gem_core.rl.testing import TinyModelGenerator
from gem_core.testing.conformance import scenario_script

__all__ = ["TinyModelClient", "conformance_script"]

#: The conformance scenario's scripted response to ``prompt_ids``: ``(tokenizer, prompt_ids) -> ids``.
conformance_script = functools.partial(scenario_script, "guess")


class TinyModelClient(LLMServerClient):
    """An ``LLMServerClient`` whose server is a tiny transformers model in this process.

    Args:
        config: verl's whole trainer config.
        model_path: a Hugging Face model directory (e.g. `gem_core.rl.testing.build_tiny_model`).
        script: optional ``script(tokenizer, prompt_ids) -> ids`` choosing the tokens
            (scripted mode); ``None`` decodes greedily.
        default_max_tokens: the cap when ``sampling_params`` has no ``max_tokens``.

    ``client.generator.requests`` records every call made in this process.
    """

    def __init__(
        self,
        config: Any,
        model_path: str,
        *,
        script: Callable[[Any, list[int]], list[int]] | None = None,
        default_max_tokens: int = 64,
    ):
        super().__init__(config, load_balancer_handle=None)
        self.generator = TinyModelGenerator(model_path, script=script)
        self.default_max_tokens = int(default_max_tokens)

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any
    ) -> TokenOutput:
        """verl's ``generate`` contract: the response's token ids and their log-probs."""
        max_tokens = int(sampling_params.get("max_tokens") or self.default_max_tokens)
        ids, logprobs = self.generator.complete([int(t) for t in prompt_ids], max_tokens)
        return TokenOutput(
            token_ids=ids,
            log_probs=logprobs if sampling_params.get("logprobs", True) else None,
            stop_reason="completed",
            extra_fields={"global_steps": 0, "min_global_steps": 0, "max_global_steps": 0},
        )
