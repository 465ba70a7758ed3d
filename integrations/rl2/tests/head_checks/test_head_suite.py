"""RL2 HEAD through the shared adapter suite (run by ../test_head.py with GEM_RL2_SRC).

The rollout hook builds one RL2 ``SampleGroup`` per row (``responses_per_prompt=1``),
runs its ``generate(router_url, env.generate)`` with our env file loaded the way RL2's
``Rollout._prepare_environment`` loads ``rollout.env_path``, inside RL2's
``with_session`` (its aiohttp session for ``async_request``), against
`gem_rl2.testing.SGLangStandIn`; the rows are read back from
``to_all_tensor_dicts_and_metrics`` packed by RL2's ``pack_tensor_dicts``. The
advantages hook is ``RL2.trainer.ppo.compute_advantages`` after `gem_rl2.train.install`,
called as HEAD's trainer calls it (the whole config).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util

import pytest
import torch
from gem_rl2.testing import SGLangStandIn
from omegaconf import OmegaConf

from gem_core.errors import InvalidRow
from gem_core.testing.adapter_suite import AdapterSuite
from gem_core.testing.conformance import SCENARIO, scenario_script

from ..conftest import init_rl2_process
from ..rl2_v002 import read_back

RL2 = pytest.importorskip("RL2")
if not hasattr(importlib.import_module("RL2.datasets"), "SampleGroup"):
    pytest.skip("the RL2 on sys.path is not HEAD (no RL2.datasets.SampleGroup)", allow_module_level=True)


@functools.lru_cache(maxsize=1)
def _setup():
    from transformers import AutoTokenizer

    from gem_core.rl.testing import build_tiny_model

    torch.set_num_threads(1)
    init_rl2_process()
    path = str(build_tiny_model())
    return path, AutoTokenizer.from_pretrained(path, local_files_only=True)


def head_config(model_path: str, *overrides: str):
    """RL2 HEAD's ``ppo.yaml`` (without its Hydra defaults list) with gem settings."""
    import os

    import gem_rl2.env
    import RL2.trainer

    base = OmegaConf.load(os.path.join(os.path.dirname(RL2.trainer.__file__), "config", "ppo.yaml"))
    base.pop("defaults", None)
    ours = [
        f"actor.model_name={model_path}",
        "actor.dtype=float32",
        "actor.max_length_per_device=4096",
        f"rollout.env_path={gem_rl2.env.__file__}",
        "rollout.train.sampling_params.max_new_tokens=16",
        "adv.estimator=rebn",
        "adv.gamma=0.9",
        "trainer.use_wandb=false",
    ]
    return OmegaConf.merge(base, OmegaConf.from_dotlist(ours + list(overrides)))


def load_env_file(path: str):
    """The env file as RL2 loads it (``spec_from_file_location("custom_module", path)``)."""
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate_rows(rows, config, tokenizer, url):
    """Each row through ``SampleGroup.generate`` with our env file; the groups, in row order."""
    from RL2.datasets import SampleGroup
    from RL2.utils.communication import with_session

    env = load_env_file(config.rollout.env_path)

    @with_session
    async def run():
        groups = [SampleGroup(config.rollout.train, tokenizer, row) for row in rows]
        return await asyncio.gather(*(g.generate(url, env.generate) for g in groups))

    return asyncio.run(run())


def to_tensors(groups):
    """RL2's ``Rollout.__call__`` packing: ``(tensor_dict, cu_seqs, metrics)``."""
    from RL2.datasets import pack_tensor_dicts

    all_tensor_dicts, metrics = [], {}
    for group in groups:
        tds, m = group.to_all_tensor_dicts_and_metrics()
        all_tensor_dicts.extend(tds)
        for k, v in m.items():
            metrics.setdefault(k, []).extend(v)
    flat = [td for tds in all_tensor_dicts for td in tds]
    seqs = torch.LongTensor([len(tds) for tds in all_tensor_dicts])
    cu_seqs = torch.cumsum(torch.cat((torch.LongTensor([0]), seqs)), dim=0)
    return pack_tensor_dicts(flat), cu_seqs, metrics


def play_scenario(scenario):
    path, tokenizer = _setup()
    config = head_config(path, f"rollout.train.sampling_params.max_new_tokens={scenario.max_new_tokens}")
    rows = [
        {
            "extra_info": {
                **row,
                "env_kwargs": scenario.env_kwargs_dict,
                "truncated_response": scenario.truncated_response,
                "truncation_reward": scenario.truncation_reward,
            }
        }
        for row in scenario.rows()
    ]
    with SGLangStandIn(path, script=functools.partial(scenario_script, scenario.name)) as server:
        groups = generate_rows(rows, config, tokenizer, server.url)
    tensor_dict, cu_seqs, metrics = to_tensors(groups)
    # RL2 tokenizes Sample.state_text (the first prompt) the same way to start a sequence.
    metrics["prompt_lengths"] = [
        len(tokenizer.encode(g.samples[0].state_text, add_special_tokens=False)) for g in groups
    ]
    return tensor_dict, cu_seqs, metrics


class TestRL2Head(AdapterSuite):
    def tokenizer(self):
        return _setup()[1]

    def rollout(self, scenario):
        tensor_dict, cu_seqs, metrics = play_scenario(scenario)
        return read_back(tensor_dict, cu_seqs, metrics["prompt_lengths"])

    def advantages(self, token_rewards, response_mask, *, gamma):
        import RL2.trainer.ppo as ppo
        from gem_rl2.train import install

        install()
        n, width = token_rewards.shape
        config = head_config(_setup()[0], f"adv.gamma={gamma}")
        tensor_dict = {
            "states": torch.zeros((n, width), dtype=torch.long),
            "action_mask": torch.as_tensor(response_mask, dtype=torch.long),
            "rewards": torch.as_tensor(token_rewards, dtype=torch.float32),
        }
        ppo.compute_advantages(config, tensor_dict, torch.arange(n + 1), 1)
        return tensor_dict["advantages"].double().numpy()


def test_logged_reward_is_the_episode_return():
    """HEAD's own add_env_response logs each sequence's last reward; our env file logs the return."""
    tensor_dict, cu_seqs, metrics = play_scenario(SCENARIO)
    reference = SCENARIO.run_reference(_setup()[1])
    want = [ep.episode_return for ep in reference.episodes]
    assert metrics["rewards"] == pytest.approx(want, abs=1e-6), (
        f"sample.metrics['rewards'] {metrics['rewards']} != the episode returns {want}"
    )
    assert metrics["turns"] == [ep.num_turns for ep in reference.episodes]
    got = [float(tensor_dict["rewards"][i].sum()) for i in range(len(want))]
    assert got == pytest.approx(want, abs=1e-6), "the per-turn rewards in the tensors do not sum to the returns"


def test_wrapped_compute_advantages_on_rl2_tensors_equals_reference():
    """HEAD's tensors from SampleGroup.generate straight into the wrapped compute_advantages."""
    import RL2.trainer.ppo as ppo
    from gem_rl2.train import install

    from gem_core.testing.conformance import assert_matches_reference, per_turn_values

    install()
    tensor_dict, cu_seqs, _ = play_scenario(SCENARIO)
    ppo.compute_advantages(head_config(_setup()[0]), tensor_dict, cu_seqs, 1)
    reference = SCENARIO.run_reference(_setup()[1])
    values = [per_turn_values(tensor_dict["advantages"][i], tensor_dict["action_mask"][i]) for i in range(5)]
    assert_matches_reference(values, reference)


def test_row_without_env_id_names_the_row():
    path, tokenizer = _setup()
    config = head_config(path)
    with SGLangStandIn(path, script=functools.partial(scenario_script, "guess")) as server:
        with pytest.raises(InvalidRow, match=r"has no env id.*'seed': 7"):
            generate_rows([{"extra_info": {"seed": 7}}], config, tokenizer, server.url)
        assert not server.requests, "a bad row must fail before any generate call"


def test_reinforce_still_runs_rl2s_own_code():
    """Other estimators go to RL2's compute_advantages (one value per trajectory)."""
    import RL2.trainer.ppo as ppo
    from gem_rl2.train import install

    install()
    mask = torch.tensor([[0, 1, 1, 0, 1], [0, 1, 0, 0, 0]])
    rewards = torch.tensor([[0, 0, 0.5, 0, 1.0], [0, 2.0, 0, 0, 0]])
    tensor_dict = {"states": torch.zeros(2, 5, dtype=torch.long), "action_mask": mask, "rewards": rewards}
    ppo.compute_advantages(head_config(_setup()[0], "adv.estimator=reinforce"), tensor_dict, torch.arange(3), 1)
    adv = tensor_dict["advantages"]
    assert torch.allclose(adv[0][mask[0] == 1], torch.tensor(-0.25)) and torch.allclose(adv[1][1], torch.tensor(0.25))
