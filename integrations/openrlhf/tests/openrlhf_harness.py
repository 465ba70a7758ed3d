"""Shared set-up of the tests: a tiny offline model, the recipe's flags parsed by OpenRLHF's real
parser, OpenRLHF's strategy and the real trainer class (`GemPPOTrainerClass`) built in-process
(no Ray cluster: the trainer's own ``__init__`` with no model groups), and helpers running the
agent executor through OpenRLHF's own ``RolloutRayActor.generate_responses``."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "openrlhf_rebn.py"
MAX_LEN = 1024
MICRO_BATCH = 2


def load_recipe() -> Any:
    spec = importlib.util.spec_from_file_location("openrlhf_rebn_recipe", RECIPE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=1)
def harness() -> Any:
    """The shared set-up (built once per session)."""
    import torch
    from gem_openrlhf.train import AGENT_FILE, parse_args
    from gem_openrlhf.trainer import GemPPOTrainerClass
    from openrlhf.trainer.ray.vllm_engine import _load_agent_executor
    from openrlhf.utils import get_strategy
    from transformers import AutoTokenizer

    from gem_core.rl.testing import build_tiny_model

    torch.set_num_threads(1)
    path = str(build_tiny_model())
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    data = Path(tempfile.mkdtemp(prefix="gem-openrlhf-test-"))
    recipe = load_recipe()
    rargs, _ = recipe.parse_args([
        "--model-path", path, "--data-dir", str(data), "--train-seeds", "4", "--eval-seeds", "0",
        "--max-len", str(MAX_LEN), "--max-tokens-per-turn", "16", "--rollout-batch-size", "4",
        "--train-batch-size", "4", "--n-gpus-per-node", "1",
    ])
    train = data / "train.jsonl"
    recipe.write_dataset(train, rargs, range(rargs.train_seeds))
    flags = recipe.openrlhf_flags(rargs, train, None) + ["--rollout.micro_batch_size", str(MICRO_BATCH)]
    args = parse_args(flags)
    strategy = get_strategy(args)
    trainer = GemPPOTrainerClass(  # what OpenRLHF's train() passes to PPOTrainer.remote
        path, strategy, None, None, None, None, None,
        do_sample=True, max_len=args.data.max_len, max_new_tokens=args.rollout.max_new_tokens,
        temperature=args.rollout.temperature, top_p=args.rollout.top_p,
    )
    executor = _load_agent_executor(AGENT_FILE)  # OpenRLHF's own loader, as in every vLLM actor
    return _Harness(path, tokenizer, args, trainer, executor, flags)


class _Harness:
    def __init__(self, path, tokenizer, args, trainer, executor, flags):
        self.model_path, self.tokenizer, self.args = path, tokenizer, args
        self.trainer, self.executor, self.flags = trainer, executor, flags

    def engine(self, script=None):
        from gem_openrlhf.testing import TinyVLLMEngine

        return TinyVLLMEngine(self.model_path, self.tokenizer, script=script, executor=self.executor)

    def responses(self, engine, labels, *, logprobs=True, num_samples=1, max_length=MAX_LEN):
        """OpenRLHF's ``RolloutRayActor.generate_responses`` (``engine`` as its ``self``), per label."""
        from gem_openrlhf.testing import EngineSamplingParams
        from openrlhf.trainer.ray.vllm_engine import RolloutRayActor

        generate = RolloutRayActor.__ray_actor_class__.generate_responses
        params = EngineSamplingParams(max_tokens=self.args.rollout.max_new_tokens, logprobs=1 if logprobs else None)

        async def run():
            calls = [
                generate(engine, prompt=f"play {i}", label=label, sampling_params=params, max_length=max_length,
                         hf_tokenizer=self.tokenizer, num_samples=num_samples)
                for i, label in enumerate(labels)
            ]
            return [r for group in await asyncio.gather(*calls) for r in group]

        return asyncio.run(run())

    def experiences(self, responses):
        """OpenRLHF's samples generator (the trainer's: GemSamplesGenerator) on each response."""
        gen = self.trainer.samples_generator
        return [gen._process_response_into_experience(r, **self.trainer.generate_kwargs) for r in responses]

    def micro_batches(self, experiences):
        """The trainer's experience maker splits samples into micro-batches (Experience.concat_experiences)."""
        return self.trainer.experience_maker.split_rollout_samples(experiences)

    def advantages(self, batches, gamma):
        self.args.algo.advantage.gamma = gamma
        return self.trainer.experience_maker.compute_advantages_and_returns(batches)
