"""Test support: verl's LLM client with the server replaced by an in-process tiny model.

`TinyModelClient` subclasses verl's ``LLMServerClient`` and answers its
``generate(request_id, *, prompt_ids, sampling_params, ...) -> TokenOutput`` with a real
transformers causal LM running in the calling process (no vLLM/SGLang server, no GPU,
no load balancer). Everything above that call (agent loop workers, the agent loop,
TransferQueue, the trainer's advantage step) is verl's own code.

Two modes:

- free: greedy decoding by the model (``temperature`` is ignored; stops at the
  tokenizer's EOS or ``max_tokens``);
- scripted: ``script(tokenizer, prompt_ids) -> token ids`` chooses the tokens (e.g. the
  conformance scenario's policy) and the model scores them, so ``log_probs`` are the
  model's real log-probabilities of the returned tokens.

The model is loaded lazily from ``model_path`` in the process that generates, so the
client pickles small and works inside Ray actors.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from verl.workers.rollout.llm_server import LLMServerClient
from verl.workers.rollout.replica import TokenOutput

__all__ = ["TinyModelClient", "conformance_script"]


def conformance_script(tokenizer: Any, prompt_ids: list[int]) -> list[int]:
    """The conformance scenario's scripted response to ``prompt_ids``."""
    from gem_core.testing.conformance import SCENARIO

    return SCENARIO.response_ids(tokenizer, SCENARIO.turn_of_prompt(tokenizer, prompt_ids))


class TinyModelClient(LLMServerClient):
    """An ``LLMServerClient`` whose server is a tiny transformers model in this process.

    Args:
        config: verl's whole trainer config.
        model_path: a Hugging Face model directory (e.g. `gem_core.rl.testing.build_tiny_model`).
        script: optional ``script(tokenizer, prompt_ids) -> ids`` choosing the tokens
            (scripted mode); ``None`` decodes greedily.
        default_max_tokens: the cap when ``sampling_params`` has no ``max_tokens``.
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
        self.model_path = str(model_path)
        self.script = script
        self.default_max_tokens = int(default_max_tokens)
        self.requests: list[dict[str, Any]] = []
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_model=None, _tokenizer=None, _lock=None, requests=[])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._model is None:
                import torch
                from transformers import AutoModelForCausalLM, AutoTokenizer

                torch.set_num_threads(1)
                self._tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
                model = AutoModelForCausalLM.from_pretrained(self.model_path, local_files_only=True)
                self._model = model.eval()
        return self._model, self._tokenizer

    def _logprobs(self, prompt_ids: list[int], ids: list[int]) -> list[float]:
        import torch

        model, _ = self._load()
        if not ids:
            return []
        seq = torch.tensor([list(prompt_ids) + list(ids)], dtype=torch.long)
        with torch.no_grad():
            logits = model(seq).logits[0, len(prompt_ids) - 1 : -1].float()
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(1, torch.tensor(ids).unsqueeze(1)).squeeze(1).tolist()

    def _greedy(self, prompt_ids: list[int], max_tokens: int) -> list[int]:
        import torch

        model, tokenizer = self._load()
        eos = tokenizer.eos_token_id
        out: list[int] = []
        past = None
        inp = torch.tensor([list(prompt_ids)], dtype=torch.long)
        with torch.no_grad():
            for _ in range(max_tokens):
                res = model(inp, past_key_values=past, use_cache=True)
                past = res.past_key_values
                tok = int(res.logits[0, -1].argmax())
                out.append(tok)
                if tok == eos:
                    break
                inp = torch.tensor([[tok]], dtype=torch.long)
        return out

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: Any = None,
        video_data: Any = None,
        audio_data: Any = None,
        mm_processor_kwargs: Any = None,
        **kwargs: Any,
    ) -> TokenOutput:
        """verl's ``generate`` contract: the response's token ids and their log-probs."""
        _, tokenizer = self._load()
        max_tokens = int(sampling_params.get("max_tokens") or self.default_max_tokens)
        prompt = [int(t) for t in prompt_ids]
        if self.script is not None:
            ids = [int(t) for t in self.script(tokenizer, prompt)][:max_tokens]
        else:
            ids = self._greedy(prompt, max_tokens)
        logprobs = self._logprobs(prompt, ids)
        self.requests.append(
            {"request_id": request_id, "prompt_ids": prompt, "token_ids": ids, "sampling_params": dict(sampling_params)}
        )
        return TokenOutput(
            token_ids=ids,
            log_probs=logprobs if sampling_params.get("logprobs", True) else None,
            stop_reason="completed",
            extra_fields={"global_steps": 0, "min_global_steps": 0, "max_global_steps": 0},
        )
