"""The vLLM generation path of `GemRollout`, behind a stand-in for TRL's vLLM server client.

vLLM does not run on this CPU machine; only the server is replaced (an object with
``VLLMClient.generate``'s signature and answer layout, scoring scripted tokens with the
tiny model), everything above it is gem-trl's: the turns of concurrent episodes are
batched into one ``generate`` call per wave and the packed rows equal the reference.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("trl", reason="gem-trl's tests need TRL installed (make test-trl builds its venv)")

from gem_core.rl.testing import TinyModelGenerator  # noqa: E402
from gem_core.testing.adapter_suite import reference_for  # noqa: E402
from gem_core.testing.conformance import SCENARIOS, scenario_script  # noqa: E402

from .conftest import make_trainer, tiny_model_path, tiny_tokenizer  # noqa: E402


class FakeVLLMClient:
    """``VLLMClient.generate`` (TRL 1.16): token-id prompts in; ids and ``[[logprob]]`` per token out."""

    def __init__(self) -> None:
        self.model = TinyModelGenerator(tiny_model_path(), script=functools.partial(scenario_script, "guess"))
        self.calls: list[dict[str, Any]] = []

    def generate(self, prompts: list[list[int]], n: int = 1, max_tokens: int = 16, logprobs: int | None = 0, **kw: Any) -> dict[str, Any]:
        assert n == 1 and logprobs == 0, (n, logprobs)
        self.calls.append({"prompts": len(prompts), "max_tokens": max_tokens, **kw})
        ids, lps = zip(*(self.model.complete(p, max_tokens) for p in prompts), strict=True)
        return {"prompt_ids": prompts, "completion_ids": list(ids), "logprobs": [[[x] for x in lp] for lp in lps]}


def test_vllm_server_turns_are_batched_and_rows_equal_the_reference(tmp_path) -> None:
    from gem_trl import GemRollout

    scenario = SCENARIOS["guess"]
    trainer = make_trainer(tmp_path, num_generations=5, per_device_train_batch_size=5, max_tokens_per_turn=scenario.max_new_tokens)
    client = FakeVLLMClient()
    trainer.use_vllm = True
    trainer.vllm_generation = SimpleNamespace(mode="server", vllm_client=client)
    trainer.gem_rows = [{"prompt": "play", **r} for r in scenario.rows()]
    out = GemRollout(max_tokens_per_turn=scenario.max_new_tokens)(["play"] * 5, trainer)

    reference = reference_for(scenario, tiny_tokenizer())
    for i, want in enumerate(reference.rows):
        assert out["prompt_ids"][i] == want.prompt_ids and out["completion_ids"][i] == want.response_ids, f"row {i}"
        assert out["env_mask"][i] == want.response_mask and out["gem_token_rewards"][i] == pytest.approx(want.token_rewards)
    turns = sum(want.num_turns for want in reference.rows)
    assert sum(c["prompts"] for c in client.calls) == turns
    assert len(client.calls) < turns, f"one server call per turn: {client.calls}"
    assert client.calls[0]["temperature"] == trainer.args.temperature
