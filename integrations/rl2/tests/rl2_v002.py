"""Drive rl-square 0.0.2's real rollout worker on CPU (helpers of the 0.0.2 tests).

`make_rollout` builds RL2's ``Rollout`` the way its ``__init__`` does, minus launching
SGLang and its router (the one part replaced: `gem_rl2.testing.SGLangStandIn` serves
``/generate``): RL2's shipped ``ppo.yaml``, its ``prepare_device_mesh`` and
``prepare_environment`` (hooked by `gem_rl2.train.install`, which hands our env file the
config), the tokenizer and the sampling params. `play` runs ``Rollout.__call__`` (RL2's
``Rollout.rollout`` per row, metrics, packing, ``cu_seqs``) on rows read by RL2's
``RLDataset``.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import gem_rl2.env

from gem_core.rl import PackedEpisode

from .conftest import init_rl2_process


def rl2_config(model_path: str, *overrides: str) -> Any:
    """RL2 0.0.2's ``ppo.yaml`` with gem settings and ``overrides`` (dotlist)."""
    import RL2.trainer
    from omegaconf import OmegaConf

    base = OmegaConf.load(os.path.join(os.path.dirname(RL2.trainer.__file__), "config", "ppo.yaml"))
    ours = [
        f"actor.model_name={model_path}",
        f"rollout.env_path={gem_rl2.env.__file__}",
        "rollout.max_turns=8",
        "rollout.train_sampling_params.max_new_tokens=16",
        "adv.estimator=rebn",
        "adv.gamma=0.9",
        "trainer.use_wandb=false",
    ]
    return OmegaConf.merge(base, OmegaConf.from_dotlist(ours + list(overrides)))


def make_rollout(config: Any, url: str) -> Any:
    """RL2's ``Rollout`` with its ``__init__`` steps, the SGLang processes replaced by ``url``."""
    from gem_rl2.train import install
    from omegaconf import OmegaConf
    from RL2.workers.rollout import Rollout
    from transformers import AutoTokenizer

    init_rl2_process()
    install()
    rollout = Rollout.__new__(Rollout)
    rollout.config = config.rollout
    rollout.prepare_device_mesh()
    rollout.worker_url = url
    rollout.prepare_environment()
    rollout.tokenizer = AutoTokenizer.from_pretrained(config.rollout.server_args.model_path, trust_remote_code=True)
    rollout.router_url = url
    rollout.train_sampling_params = OmegaConf.to_container(config.rollout.train_sampling_params)
    rollout.test_sampling_params = OmegaConf.to_container(config.rollout.test_sampling_params)
    return rollout


def write_rows(path: Path, rows: list[dict[str, Any]]) -> str:
    """A JSONL dataset of ``{"extra_info": row}`` records (what recipes/rl2_rebn.py writes)."""
    path.write_text("".join(json.dumps({"extra_info": r}) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def data_list(config: Any, tokenizer: Any, path: str) -> list[dict[str, Any]]:
    """The rows of ``path`` as RL2's ``RLDataset`` and its ``collate_fn`` hand them to the rollout."""
    from omegaconf import OmegaConf
    from RL2.datasets import RLDataset

    dataset = RLDataset(OmegaConf.merge(config.train_data, {"path": path}), tokenizer)
    return dataset.collate_fn([dataset[i] for i in range(len(dataset))])


def play(rollout: Any, data: list[dict[str, Any]], step: int = 1) -> tuple[dict[str, Any], Any]:
    """``Rollout.__call__(data, train=True, step)``: RL2's packed ``tensor_dict`` and ``cu_seqs``.

    RL2 runs the rollout with ``asyncio.get_event_loop()``: a fresh loop is set for it
    (an earlier ``asyncio.run`` in this thread leaves none).
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return rollout(data, True, step)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def read_back(tensor_dict: dict[str, Any], cu_seqs: Any, prompt_lengths: list[int] | None = None) -> list[PackedEpisode]:
    """One `PackedEpisode` per trajectory from RL2's tensors (one sequence each).

    RL2 stores ``states[:-1]``, ``actions[1:]``, ``action_mask[1:]``, ``rewards[1:]`` and
    ``llm_logps[1:]`` of each sequence (right-padded); the sequence ends with its last
    action token. RL2 has no prompt/response split: the prompt is the tokens before the
    first action, or ``prompt_lengths[i]`` tokens (a first turn that generated nothing).
    """
    rows = []
    bounds = [int(x) for x in cu_seqs]
    for a, b in zip(bounds, bounds[1:], strict=False):
        assert b - a == 1, f"trajectory {a}..{b} has {b - a} sequences; expected one packed sequence"
        n = int(tensor_dict["eos_mask"][a].argmax()) + 1
        mask = [0, *tensor_dict["action_mask"][a][:n].tolist()]
        states = [*tensor_dict["states"][a][:n].tolist(), int(tensor_dict["actions"][a][n - 1])]
        rewards = [0.0, *tensor_dict["rewards"][a][:n].tolist()]
        logps = [0.0, *tensor_dict["llm_logps"][a][:n].tolist()]
        k = mask.index(1) if prompt_lengths is None else int(prompt_lengths[len(rows)])
        rows.append(
            PackedEpisode(
                prompt_ids=states[:k],
                response_ids=states[k:],
                response_mask=mask[k:],
                response_logprobs=logps[k:],
                token_rewards=rewards[k:],
                reward_score=float(sum(rewards)),
                num_turns=0,
            )
        )
    return rows
