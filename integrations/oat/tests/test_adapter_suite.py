"""The adapter suite through oat 0.2.4's real classes: GemActor.collect_experience for the rollout,
oat's process_feedback_data + learn()/learning_step whitening for the advantages."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("oat", reason="gem-oat's tests need oat-llm 0.2.4 (make venv-oat)")

import numpy as np  # noqa: E402

from gem_core.testing.adapter_suite import AdapterSuite  # noqa: E402
from tests.conftest import tiny_tokenizer  # noqa: E402
from tests.oat_harness import CapturingLearner, row_transitions, scripted_actor  # noqa: E402

_LEARNER: list[CapturingLearner] = []


def learner() -> CapturingLearner:
    if not _LEARNER:
        _LEARNER.append(CapturingLearner())
    return _LEARNER[0]


class TestOat(AdapterSuite):
    def tokenizer(self):
        return tiny_tokenizer()

    def rollout(self, scenario):
        from gem_oat.testing import packed_from_transitions

        actor = scripted_actor(
            scenario.name,
            env_ids=[scenario.env_id],
            env_seeds=list(scenario.seeds),
            env_kwargs=json.dumps(scenario.env_kwargs_dict),
            generate_max_length=scenario.max_new_tokens,
            truncated_response=scenario.truncated_response,
            truncation_reward=scenario.truncation_reward,
        )
        episodes, metrics = actor.collect_experience()
        assert metrics["actor/gem_failed_episodes"] == 0, actor.last_failures
        assert len(episodes) == len(scenario.seeds)
        for ep in episodes:
            assert [t.done for t in ep] == [False] * (len(ep) - 1) + [True]
        return [packed_from_transitions(ep) for ep in episodes]

    def advantages(self, token_rewards, response_mask, *, gamma):
        lrn = learner()
        lrn.learner.args.gamma = float(gamma)
        episodes, index = row_transitions(np.asarray(token_rewards, dtype=np.float64), np.asarray(response_mask))
        captured = lrn.learn(episodes)
        out = np.zeros(np.asarray(response_mask).shape, dtype=np.float64)
        for i, turns in enumerate(index):
            for s, e, key in turns:
                out[i, s:e] = captured[key]
        return out
