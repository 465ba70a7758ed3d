"""gem-verl through the shared adapter suite: every scenario of gem_core.testing.conformance.

The rollout hook plays each scenario's rows with the ``gem_agent`` loop built the way
verl's ``AgentLoopWorker`` builds it (Hydra, from the registry), the scripted policy
behind verl's ``LLMServerClient`` (the tiny model scores the tokens), and reads the
packed row back from ``as_dict()`` (what the v1 worker stores in TransferQueue). The
advantages hook is verl's v1 advantage step (``compute_advantage_for_multi_trajectories``
dispatching to the registered ``rebn``).
"""

from __future__ import annotations

import asyncio
import functools

import numpy as np
import pytest

pytest.importorskip("verl", reason="gem-verl's tests need verl installed (make test-verl builds its venv)")

import torch  # noqa: E402
from gem_verl.testing import TinyModelClient  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402

from gem_core.rl import PackedEpisode  # noqa: E402
from gem_core.testing.adapter_suite import AdapterSuite  # noqa: E402
from gem_core.testing.conformance import scenario_script  # noqa: E402

from .conftest import compose_config, make_loop  # noqa: E402

SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


@functools.lru_cache(maxsize=1)
def _setup():
    from transformers import AutoTokenizer

    from gem_core.rl.testing import build_tiny_model

    torch.set_num_threads(1)
    path = str(build_tiny_model())
    return path, compose_config(path), AutoTokenizer.from_pretrained(path, local_files_only=True)


class TestVerlAdapter(AdapterSuite):
    def tokenizer(self):
        return _setup()[2]

    def rollout(self, scenario):
        path, config, tokenizer = _setup()
        client = TinyModelClient(config, path, script=functools.partial(scenario_script, scenario.name))
        rows = []
        for row in scenario.rows():
            loop = make_loop(
                config,
                client,
                tokenizer,
                max_tokens_per_turn=scenario.max_new_tokens,
                env_kwargs=scenario.env_kwargs_dict,
                truncated_response=scenario.truncated_response,
                truncation_reward=scenario.truncation_reward,
            )
            out = asyncio.run(loop.run(dict(SAMPLING), raw_prompt=[{"role": "user", "content": "play"}], **row))
            stored = out.as_dict()  # what AgentLoopWorkerTQ puts in TransferQueue
            rows.append(
                PackedEpisode(
                    prompt_ids=stored["prompts"].tolist(),
                    response_ids=stored["responses"].tolist(),
                    response_mask=stored["response_mask"].tolist(),
                    response_logprobs=stored["rollout_log_probs"].tolist(),
                    token_rewards=stored["rm_scores"].tolist(),
                    reward_score=float(out.reward_score),
                    num_turns=int(stored["num_turns"]) // 2,
                    turn_rewards=list(stored["extra_fields"]["turn_scores"]),
                )
            )
        return rows

    def advantages(self, token_rewards, response_mask, *, gamma):
        from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

        _, config, _ = _setup()
        algorithm = OmegaConf.merge(config.algorithm, {"gamma": gamma})
        n = token_rewards.shape[0]
        data = DataProto(
            batch=TensorDict(
                {
                    "response_mask": torch.as_tensor(response_mask, dtype=torch.int64),
                    "token_level_rewards": torch.as_tensor(token_rewards, dtype=torch.float32),
                },
                batch_size=n,
            ),
            non_tensor_batch={"uid": np.array([f"u{i}" for i in range(n)], dtype=object)},
        )
        data = compute_advantage_for_multi_trajectories(
            data,
            batch_keys=[f"u{i}_0_0" for i in range(n)],
            adv_estimator=algorithm.adv_estimator,
            gamma=gamma,
            lam=algorithm.lam,
            config=algorithm,
        )
        return data.batch["advantages"].double().numpy()
