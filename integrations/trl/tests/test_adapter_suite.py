"""gem-trl through the shared adapter suite: every scenario of gem_core.testing.conformance.

The rollout hook builds a `GemGRPOTrainer` per scenario and calls TRL's own
``_generate_and_score_completions`` on the scenario's rows (one GRPO group of 5): the
rollout function plays them with the scripted policy behind the generate call (the tiny
model scores the scripted tokens: `TinyModelGenerator`), and the rows are read back from
the tensors TRL hands its loss (``prompt_ids``/``prompt_mask``, ``completion_ids``/
``completion_mask``, ``tool_mask`` = the env mask, ``sampling_per_token_logps``,
``gem_token_rewards``). The advantages hook is the trainer's `rebn_advantages`; a
further test checks the ``advantages`` tensor TRL's loss receives against the reference.
"""

from __future__ import annotations

import functools
import tempfile
from typing import Any, ClassVar

import numpy as np
import pytest

pytest.importorskip("trl", reason="gem-trl's tests need TRL installed (make test-trl builds its venv)")

import torch  # noqa: E402

from gem_core.rl import PackedEpisode  # noqa: E402
from gem_core.rl.testing import TinyModelGenerator  # noqa: E402
from gem_core.testing.adapter_suite import AdapterSuite, Case, reference_for  # noqa: E402
from gem_core.testing.conformance import (  # noqa: E402
    SCENARIOS,
    assert_matches_reference,
    per_turn_values,
    scenario_script,
)

from .conftest import make_trainer, tiny_model_path, tiny_tokenizer  # noqa: E402

_TMP = tempfile.mkdtemp(prefix="gem-trl-suite-")


@functools.lru_cache(maxsize=1)
def _estimator_trainer() -> Any:
    return make_trainer(_TMP, per_device_train_batch_size=2, num_generations=2)


def _played(scenario: Any) -> tuple[list[PackedEpisode], dict[str, Any]]:
    from gem_trl import GemRollout

    n = len(scenario.seeds)
    rollout = GemRollout(
        generate=TinyModelGenerator(tiny_model_path(), script=functools.partial(scenario_script, scenario.name)),
        max_tokens_per_turn=scenario.max_new_tokens,
        env_kwargs=scenario.env_kwargs_dict,
        truncated_response=scenario.truncated_response,
        truncation_reward=scenario.truncation_reward,
    )
    trainer = make_trainer(
        _TMP, rollout=rollout, per_device_train_batch_size=n, num_generations=n, gamma=scenario.gamma,
        max_completion_length=512,
    )  # fmt: skip
    trainer.model.train()
    output = trainer._generate_and_score_completions([{"prompt": "play", **row} for row in scenario.rows()])
    rows = []
    for i in range(n):
        pm, cm = output["prompt_mask"][i].bool(), output["completion_mask"][i].bool()
        rows.append(
            PackedEpisode(
                prompt_ids=output["prompt_ids"][i][pm].tolist(),
                response_ids=output["completion_ids"][i][cm].tolist(),
                response_mask=output["tool_mask"][i][cm].tolist(),
                response_logprobs=output["sampling_per_token_logps"][i][cm].tolist(),
                token_rewards=output["gem_token_rewards"][i][cm].tolist(),
                reward_score=float(trainer._gem_output["gem_return"][i]),
                num_turns=int(trainer._gem_output["gem_num_turns"][i]),
                turn_rewards=list(trainer._gem_output["gem_turn_rewards"][i]),
            )
        )
    return rows, output


class TestTrlAdapter(AdapterSuite):
    outputs: ClassVar[dict[str, dict[str, Any]]] = {}

    def tokenizer(self) -> Any:
        return tiny_tokenizer()

    def rollout(self, scenario: Any) -> list[PackedEpisode]:
        rows, output = _played(scenario)
        TestTrlAdapter.outputs[scenario.name] = output
        return rows

    def advantages(self, token_rewards: np.ndarray, response_mask: np.ndarray, *, gamma: float) -> np.ndarray:
        trainer = _estimator_trainer()
        adv = trainer.rebn_advantages(torch.as_tensor(token_rewards), torch.as_tensor(response_mask), gamma=gamma)
        return adv.numpy()

    def test_trainer_output_advantages_equal_the_reference(self, case: Case) -> None:
        """The ``(B, T)`` advantages TRL's loss receives are the reference ReBN (1e-6)."""
        output = TestTrlAdapter.outputs[case.scenario.name]
        adv = output["advantages"].double().numpy()
        mask = (output["completion_mask"] * output["tool_mask"]).numpy()
        assert adv.shape == mask.shape, f"advantages {adv.shape} are not per token {mask.shape}"
        values = [per_turn_values(adv[i], mask[i], atol=case.scenario.atol) for i in range(len(case.rows))]
        assert_matches_reference(values, case.reference)
        assert not np.abs(adv[mask == 0]).max(initial=0.0) > case.scenario.atol, "env tokens carry advantages"


def test_every_scenario_is_run() -> None:
    assert set(TestTrlAdapter.scenarios) == set(SCENARIOS)
    assert reference_for(SCENARIOS["guess"], tiny_tokenizer()).num_transitions == 14
