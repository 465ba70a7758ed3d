"""gem-openrlhf through the shared adapter suite: every scenario of gem_core.testing.conformance.

The rollout hook plays each scenario's rows with the agent executor loaded by OpenRLHF's own
``_load_agent_executor`` and run by OpenRLHF's ``RolloutRayActor.generate_responses``, the
scripted policy behind the ``llm_engine`` interface (a tiny model scores the tokens), then
turns each response into an ``Experience`` with the trainer's samples generator (OpenRLHF's
``_process_response_into_experience`` + the per-turn rewards) and splits them into
micro-batches with the trainer's experience maker (``Experience.concat_experiences``); the
packed rows are read back from those micro-batches. The advantages hook builds one
``Experience`` per row, concatenates them into micro-batches of 2 rows (different widths,
right-padded by OpenRLHF) and runs the trainer's ``compute_advantages_and_returns``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip("openrlhf", reason="gem-openrlhf's tests need openrlhf (make test-openrlhf builds its venv)")

import torch  # noqa: E402
from gem_openrlhf.agent import ERROR_FLAG, TOKEN_REWARDS, make_label  # noqa: E402
from openrlhf_harness import MICRO_BATCH, harness  # noqa: E402

from gem_core.rl import PackedEpisode  # noqa: E402
from gem_core.testing.adapter_suite import AdapterSuite  # noqa: E402
from gem_core.testing.conformance import scenario_script  # noqa: E402


def read_back(batches) -> list[PackedEpisode]:
    """The packed rows as OpenRLHF stores them: ``sequences`` / ``action_mask`` (shifted by one) / info."""
    rows = []
    for b in batches:
        for i in range(b.sequences.shape[0]):
            n = int(b.attention_mask[i].sum())
            seq = b.sequences[i, :n].tolist()
            start = int(b.info["gem_prompt_tokens"][i])
            rows.append(
                PackedEpisode(
                    prompt_ids=seq[:start],
                    response_ids=seq[start:],
                    response_mask=b.action_mask[i, start - 1 : n - 1].long().tolist(),
                    response_logprobs=b.rollout_log_probs[i, start - 1 : n - 1].tolist(),
                    token_rewards=b.info[TOKEN_REWARDS][i, start - 1 : n - 1].tolist(),
                    reward_score=float(b.rewards[i]),
                    num_turns=int(b.info["gem_num_turns"][i]),
                )
            )
    return rows


def rows_as_experiences(token_rewards: np.ndarray, response_mask: np.ndarray):
    """One ``Experience`` per row (trailing padding cut, so widths differ), in micro-batches of 2."""
    from openrlhf.trainer.ppo_utils.experience import Experience

    h = harness()
    singles = []
    for r, m in zip(token_rewards, response_mask, strict=True):
        width = max(1, int(np.flatnonzero(m).max()) + 1 if m.any() else 1)
        singles.append(
            Experience(
                action_mask=torch.as_tensor(m[:width] != 0).unsqueeze(0),
                rewards=torch.tensor([float(r.sum())]),
                info={TOKEN_REWARDS: torch.as_tensor(r[:width], dtype=torch.float32).unsqueeze(0),
                      ERROR_FLAG: torch.tensor([0.0])},
            )
        )
    pad = h.tokenizer.pad_token_id
    return [Experience.concat_experiences(singles[i : i + MICRO_BATCH], pad) for i in range(0, len(singles), MICRO_BATCH)]


class TestOpenRLHFAdapter(AdapterSuite):
    def tokenizer(self):
        return harness().tokenizer

    def rollout(self, scenario):
        h = harness()
        engine = h.engine(script=functools.partial(scenario_script, scenario.name))
        labels = [
            make_label(row["env_id"], row["seed"], env_kwargs=scenario.env_kwargs_dict or None,
                       max_tokens_per_turn=scenario.max_new_tokens, truncated_response=scenario.truncated_response,
                       truncation_reward=scenario.truncation_reward)
            for row in scenario.rows()
        ]
        batches = h.micro_batches(h.experiences(h.responses(engine, labels)))
        assert all(b.sequences.shape[0] <= MICRO_BATCH for b in batches)
        return read_back(batches)

    def advantages(self, token_rewards, response_mask, *, gamma):
        batches = harness().advantages(rows_as_experiences(token_rewards, response_mask), gamma)
        out = np.zeros(response_mask.shape)
        row = 0
        for b in batches:
            n, width = b.advantages.shape
            out[row : row + n, :width] = b.advantages.double().numpy()
            assert TOKEN_REWARDS not in b.info, "the per-token rewards must leave info (OpenRLHF logs every value)"
            row += n
        return out
