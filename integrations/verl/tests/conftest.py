"""Fixtures for the gem-verl tests: verl's shipped trainer config over a tiny offline model."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")
# Before any `import ray`: the local Ray of the v1 test advertises 127.0.0.1, not the
# machine's interface address.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

PROMPT_LENGTH = 512
RESPONSE_LENGTH = 512


def compose_config(model_path: str, *overrides: str):
    """verl's shipped ``ppo_trainer`` config (Hydra) with gem-verl's settings and overrides."""
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    base = [
        f"actor_rollout_ref.model.path={model_path}",
        f"actor_rollout_ref.rollout.prompt_length={PROMPT_LENGTH}",
        f"actor_rollout_ref.rollout.response_length={RESPONSE_LENGTH}",
        f"data.max_prompt_length={PROMPT_LENGTH}",
        f"data.max_response_length={RESPONSE_LENGTH}",
        "actor_rollout_ref.rollout.name=vllm",  # the server kind; TinyModelClient replaces it
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        "actor_rollout_ref.rollout.agent.default_agent_loop=gem_agent",
        "algorithm.adv_estimator=rebn",
        "algorithm.gamma=0.9",
    ]
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose("ppo_trainer", overrides=base + list(overrides))


def make_loop(config, client, tokenizer, **loop_kwargs):
    """A gem_agent instance built the way AgentLoopWorker builds it (Hydra, from the registry)."""
    import hydra
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry

    return hydra.utils.instantiate(
        {**_agent_loop_registry["gem_agent"], **loop_kwargs},
        trainer_config=DictConfigWrap(config),
        server_manager=client,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
        hf_model_type="llama",
    )


@pytest.fixture(scope="session")
def tiny_model_path() -> str:
    import torch

    from gem_core.rl.testing import build_tiny_model

    torch.set_num_threads(1)
    return str(build_tiny_model())


@pytest.fixture(scope="session")
def tokenizer(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path, local_files_only=True)


@pytest.fixture(scope="session")
def verl_config(tiny_model_path):
    return compose_config(tiny_model_path)


@pytest.fixture(scope="session")
def reference(tokenizer):
    from gem_core.testing.conformance import SCENARIO

    return SCENARIO.run_reference(tokenizer)
