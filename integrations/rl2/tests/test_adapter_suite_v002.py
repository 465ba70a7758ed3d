"""rl-square 0.0.2 through the shared adapter suite.

The rollout hook writes each scenario's rows as a JSONL dataset, reads it with RL2's
``RLDataset`` and runs RL2's ``Rollout.__call__`` (its ``Rollout.rollout`` loop calling
our env file's ``reset``/``step``) against `gem_rl2.testing.SGLangStandIn`, a local
``/generate`` server answered by the tiny model scoring the scripted tokens; the rows
are read back from the ``tensor_dict`` RL2 returns. The advantages hook is
``RL2.trainer.ppo.compute_advantages`` after `gem_rl2.train.install`, called the way
0.0.2's trainer calls it (``config.adv``, ``step`` positional), ``adv.estimator=rebn``.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pytest

RL2 = pytest.importorskip("RL2", reason="gem-rl2's tests need rl-square (make test-rl2 builds its venv)")

import torch  # noqa: E402
from gem_rl2.testing import SGLangStandIn  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from gem_core.testing.adapter_suite import AdapterSuite  # noqa: E402
from gem_core.testing.conformance import SCENARIOS, scenario_script  # noqa: E402

from .rl2_v002 import data_list, make_rollout, play, read_back, rl2_config, write_rows  # noqa: E402


@functools.lru_cache(maxsize=1)
def _setup():
    from transformers import AutoTokenizer

    from gem_core.rl.testing import build_tiny_model

    torch.set_num_threads(1)
    path = str(build_tiny_model())
    return path, AutoTokenizer.from_pretrained(path, local_files_only=True)


def play_scenario(scenario, *overrides: str):
    """``scenario.rows()`` through RL2 0.0.2's rollout worker: ``(tensor_dict, cu_seqs, server)``."""
    path, tokenizer = _setup()
    rows = [
        {
            **row,
            "env_kwargs": scenario.env_kwargs_dict,
            "truncated_response": scenario.truncated_response,
            "truncation_reward": scenario.truncation_reward,
        }
        for row in scenario.rows()
    ]
    config = rl2_config(
        path, f"rollout.train_sampling_params.max_new_tokens={scenario.max_new_tokens}", *overrides
    )
    with SGLangStandIn(path, script=functools.partial(scenario_script, scenario.name)) as server:
        rollout = make_rollout(config, server.url)
        with tempfile.TemporaryDirectory() as tmp:
            data = data_list(config, tokenizer, write_rows(Path(tmp) / "rows.jsonl", rows))
        tensor_dict, cu_seqs = play(rollout, data)
    return tensor_dict, cu_seqs, server


class TestRL2v002(AdapterSuite):
    # RL2 0.0.2's Rollout.rollout unpacks SGLang's output_token_logprobs with zip(*...):
    # a generation with no token (the empty_turn scenario) raises inside RL2; a real
    # SGLang server always generates at least one token.
    scenarios = tuple(name for name in SCENARIOS if name != "empty_turn")

    def tokenizer(self):
        return _setup()[1]

    def rollout(self, scenario):
        tensor_dict, cu_seqs, _ = play_scenario(scenario)
        return read_back(tensor_dict, cu_seqs)

    def advantages(self, token_rewards, response_mask, *, gamma):
        import RL2.trainer.ppo as ppo
        from gem_rl2.train import install

        install()
        n, width = token_rewards.shape
        config = rl2_config(_setup()[0], f"adv.gamma={gamma}")
        tensor_dict = {
            "states": torch.zeros((n, width), dtype=torch.long),
            "action_mask": torch.as_tensor(response_mask, dtype=torch.long),
            "rewards": torch.as_tensor(token_rewards, dtype=torch.float32),
        }
        adv = OmegaConf.create(OmegaConf.to_container(config.adv, resolve=True))
        ppo.compute_advantages(adv, tensor_dict, torch.arange(n + 1), 1)
        return tensor_dict["advantages"].double().numpy()
