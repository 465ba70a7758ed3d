"""Drive ROLL's real classes for the tests: config through Hydra + dacite, env managers'
``run_rollout_loop`` against ROLL's ``GroupQueueManager`` on a local Ray, the step_reinforce chain.

Only the LLM is replaced: ``gem_scripted``, an LLM proxy in ROLL's own registry
(``llm_proxy.proxy_type``), answers with a conformance scenario's scripted tokens scored
by a tiny real model (`gem_core.rl.testing.TinyModelGenerator`).
"""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch
from dacite import from_dict
from gem_roll.config import roll_config, write_config
from gem_roll.pipeline import exact_reward_norm
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from roll.distributed.scheduler.protocol import DataProto
from roll.distributed.scheduler.rollout_scheduler import GroupQueueManager
from roll.pipeline.agentic.agentic_config import AgenticConfig
from roll.pipeline.agentic.llm_proxy import BaseLLMProxy, register_llm_proxy
from roll.pipeline.agentic.utils import (
    agentic_compute_advantage,
    compute_discounted_returns,
    compute_response_level_rewards,
)
from roll.utils.functionals import compute_token_reward
from roll.utils.import_utils import safe_import_class
from roll.utils.kl_controller import get_kl_controller
from tensordict import TensorDict

from gem_core.rl import Turn, pack_turns, turn_spans
from gem_core.rl.testing import TinyModelGenerator
from gem_core.testing.conformance import scenario_script

_GENERATORS: dict[tuple[str, str], TinyModelGenerator] = {}
_GENERATORS_LOCK = threading.Lock()


def _generator(model_path: str, scenario: str) -> TinyModelGenerator:
    # One per (model, scenario), loaded under a lock: transformers' from_pretrained is not
    # thread-safe (concurrent loads can leave a model on the meta device).
    with _GENERATORS_LOCK:
        key = (model_path, scenario)
        if key not in _GENERATORS:
            gen = TinyModelGenerator(model_path, script=functools.partial(scenario_script, scenario))
            gen.load()
            _GENERATORS[key] = gen
        return _GENERATORS[key]


@register_llm_proxy("gem_scripted")
class ScriptedProxy(BaseLLMProxy):
    """The scenario's scripted responses, scored by the tiny model (``proxy_config``: scenario, model_path)."""

    def __init__(self, generate_scheduler, llm_proxy_config, tokenizer, env):
        super().__init__(generate_scheduler, llm_proxy_config, tokenizer, env)
        cfg = llm_proxy_config.proxy_config
        self.generator = _generator(cfg["model_path"], cfg["scenario"])

    def generate(self, messages, lm_input, generation_config):
        prompt = [int(t) for t in lm_input.batch["input_ids"][0].tolist()]
        ids, logprobs = self.generator.complete(prompt, int(generation_config["max_new_tokens"]))
        lm_input.batch["responses"] = torch.tensor([ids], dtype=torch.long).reshape(1, len(ids))
        lm_input.batch["infer_logprobs"] = torch.tensor([logprobs], dtype=torch.float).reshape(1, len(ids))
        return lm_input


def load_config(path: Path) -> AgenticConfig:
    """What ``start_agentic_pipeline.py`` does: Hydra compose, then dacite into ``AgenticConfig``."""
    with initialize_config_dir(config_dir=str(path.parent.resolve()), version_base=None, job_name="gem_roll_test"):
        cfg = compose(config_name=path.stem)
    return from_dict(data_class=AgenticConfig, data=OmegaConf.to_container(cfg, resolve=True))


def scenario_yaml(directory: Path, scenario: Any, model_path: str, env_manager_cls: str, *, exact: bool = True) -> Path:
    """The recipe's YAML for one scenario: one group per seed, one episode each, the scripted proxy."""
    config = roll_config(
        model=model_path,
        envs=[scenario.env_id],
        gamma=scenario.gamma,
        exact=exact,
        env_manager_cls=env_manager_cls,
        num_env_groups=len(scenario.seeds),
        max_tokens_per_step=scenario.max_new_tokens,
        sequence_length=2048,
        env_kwargs=scenario.env_kwargs_dict,
        output_dir=str(directory / "output"),
        exp_name=f"test_{scenario.name}",
        num_gpus_per_node=1,
    )
    manager = config["train_env_manager"]
    manager["max_traj_per_env"] = 1
    manager["max_env_num_per_worker"] = len(scenario.seeds)
    manager["llm_proxy"] = {"proxy_type": "gem_scripted", "proxy_config": {"scenario": scenario.name, "model_path": model_path}}
    config["actor_infer"]["generating_args"]["temperature"] = 0.0
    name = f"{scenario.name}_{env_manager_cls.rsplit('.', 1)[-1]}_{'exact' if exact else 'native'}"
    return write_config(config, directory / f"{name}.yaml")


def run_rollouts(pipeline_config: AgenticConfig, tokenizer: Any, seeds: list[int], timeout: float = 120.0) -> list[DataProto]:
    """ROLL's env managers' ``run_rollout_loop``, one thread per env (as ROLL's EnvironmentWorker
    runs them), collected through ROLL's ``GroupQueueManager``; one DataProto per group, by group."""
    manager_config = pipeline_config.train_env_manager
    env_configs = [ec for rank in manager_config.env_configs.values() for ec in rank.values()]
    for ec in env_configs:  # ROLL draws group seeds at random: pin them to the scenario's
        ec["group_seed"] = int(seeds[ec["group_id"]])
    queue = GroupQueueManager.options(max_concurrency=len(env_configs) + 4).remote(pipeline_config, manager_config, "train")
    ray.get(queue.advance_step.remote(0))
    lock = threading.Lock()
    managers = []
    for ec in env_configs:
        cls = safe_import_class(ec["env_manager_cls"])
        m = cls(
            worker_config=manager_config,
            pipeline_config=pipeline_config,
            env_config=ec,
            tokenizer=tokenizer,
            generate_scheduler=None,
            output_queue=queue,
            thread_lock=lock,
            mode="train",
        )
        m.update_step(0)
        managers.append(m)
    errors: list[BaseException] = []

    def loop(m):
        try:
            m.run_rollout_loop(DataProto(meta_info={"seed": 0}))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(m,), daemon=True) for m in managers]
    for t in threads:
        t.start()
    try:
        ref = queue.get_batch.remote(len(seeds), 0)
        deadline = time.monotonic() + timeout
        while not ray.wait([ref], timeout=0.5)[0]:
            if errors:
                raise errors[0]
            if time.monotonic() > deadline:
                raise TimeoutError(f"ROLL's rollout gave no batch in {timeout} s (threads alive: {[t.is_alive() for t in threads]})")
        batch = ray.get(ref)
    finally:
        for m in managers:
            m.stop()
        ray.get(queue.shutdown.remote())
        for t in threads:
            t.join(timeout=30)
        for m in managers:
            m.env.close()
        ray.kill(queue)
    if errors:
        raise errors[0]
    by_group = sorted(batch, key=lambda d: int(d.non_tensor_batch["group_ids"][0]))
    return by_group


def step_samples_to_packed(rollout: DataProto) -> Any:
    """A step manager's per-turn samples of one episode as one `gem_core.rl.PackedEpisode` (via pack_turns)."""
    order = np.argsort(rollout.non_tensor_batch["step"].astype(np.int64))
    turns: list[Turn] = []
    previous: list[int] | None = None
    for k in order:
        ids = rollout.batch["input_ids"][k]
        attn = rollout.batch["attention_mask"][k].bool()
        resp = rollout.batch["response_mask"][k].bool()
        prompt = ids[attn & ~resp].tolist()
        response = ids[resp].tolist()
        lp_full = torch.cat([torch.zeros(1), rollout.batch["infer_logprobs"][k].float()]) if "infer_logprobs" in rollout.batch.keys() else torch.zeros(ids.shape[0])
        logprobs = lp_full[resp].tolist()
        if previous is None:
            delta = prompt
        else:
            assert prompt[: len(previous)] == previous, "turn prompt does not extend the previous turn's prompt + response"
            delta = prompt[len(previous):]
        turns.append(Turn(prompt_ids=delta, response_ids=response, response_logprobs=logprobs,
                          reward=float(rollout.non_tensor_batch["step_scores"][k]), starts_sample=previous is None))
        previous = prompt + response
    return pack_turns(turns)


def pipeline_at_dp(pipeline_config: AgenticConfig, dp: int, cls: Any = None) -> Any:
    """A pipeline object with what ``AgenticPipeline.adjust_batch`` reads (the config, the
    workers' data-parallel sizes), without starting its clusters."""
    from types import SimpleNamespace

    from gem_roll.pipeline import GemAgenticPipeline

    pipe = object.__new__(cls or GemAgenticPipeline)
    pipe.pipeline_config = pipeline_config
    pipe.actor_train = SimpleNamespace(dp_size=dp)
    pipe.reference = SimpleNamespace(dp_size=dp)
    return pipe


def step_reinforce(pipeline_config: AgenticConfig, token_rewards: np.ndarray, response_mask: np.ndarray, gamma: float, *, exact: bool,
                   dp: int | None = None, pads: list | None = None) -> np.ndarray:
    """Packed rows -> ROLL step samples (one per turn) -> ROLL's own step_reinforce chain -> packed advantages.

    With ``dp``, the pipeline's real ``adjust_batch`` runs where ROLL's ``run`` calls it (after
    the returns, before the normalisation), at that data-parallel size: `GemAgenticPipeline`'s
    with ``exact``, ROLL's own (its configured mode) without; ``pads`` then receives
    ``(advantages, response_mask)`` of every sample ROLL added."""
    mask = np.asarray(response_mask) != 0
    rewards = np.asarray(token_rewards, dtype=np.float64)
    samples = []  # (row, start, end, step)
    for i, spans in enumerate(turn_spans(mask)):
        for k, (s, e) in enumerate(spans):
            samples.append((i, s, e, k))
    out = np.zeros(rewards.shape)
    if not samples:
        return out
    width = 1 + max(e - s for _, s, e, _ in samples)
    n = len(samples)
    resp = torch.zeros(n, width, dtype=torch.bool)
    attn = torch.zeros(n, width, dtype=torch.long)
    for j, (_, s, e, _) in enumerate(samples):
        resp[j, 1 : 1 + e - s] = True
        attn[j, : 1 + e - s] = 1
    step_scores = np.array([float(rewards[i, s:e].sum()) for i, s, e, _ in samples], dtype=object)
    batch = DataProto(
        batch=TensorDict(
            {
                "input_ids": torch.zeros(n, width, dtype=torch.long),
                "attention_mask": attn,
                "position_ids": (attn.cumsum(-1) - 1).clamp(min=0) * attn,
                "response_mask": resp,
                "prompt_mask": ~resp & attn.bool(),
                "scores": torch.zeros(n, width),
                "old_log_probs": torch.zeros(n, width - 1),
                "ref_log_probs": torch.zeros(n, width - 1),
            },
            batch_size=n,
        ),
        non_tensor_batch={
            "traj_id": np.array([f"row{i}" for i, *_ in samples], dtype=object),
            "traj_group_id": np.array([f"row{i}" for i, *_ in samples], dtype=object),
            "step": np.array([k for *_, k in samples], dtype=object),
            "step_scores": step_scores,
            "tags": np.array(["t"] * n, dtype=object),
        },
    )
    batch = compute_discounted_returns(batch, pipeline_config.adv_estimator, gamma)
    if dp is not None:
        from roll.pipeline.agentic.agentic_pipeline import AgenticPipeline

        pipe = pipeline_at_dp(pipeline_config, dp, None if exact else AgenticPipeline)
        batch = pipe.adjust_batch(batch, mode=pipeline_config.batch_adjust_mode)
    if exact:
        with exact_reward_norm():
            batch, _ = compute_response_level_rewards(batch=batch, pipeline_config=pipeline_config)
    else:
        batch, _ = compute_response_level_rewards(batch=batch, pipeline_config=pipeline_config)
    kl_ctrl = get_kl_controller(init_kl_coef=pipeline_config.init_kl_coef, target_kl=pipeline_config.target_kl, kl_horizon=pipeline_config.kl_horizon)
    batch, _ = compute_token_reward(batch, pipeline_config, kl_ctrl)
    batch = agentic_compute_advantage(
        data=batch, gamma=pipeline_config.gamma, lambd=pipeline_config.lambd, adv_estimator=pipeline_config.adv_estimator,
        advantage_clip=pipeline_config.advantage_clip, whiten_advantages=pipeline_config.whiten_advantages,
        whiten_rewards=pipeline_config.whiten_rewards, pipeline_config=pipeline_config,
    )
    adv = batch.batch["advantages"].double().numpy()  # [n, width - 1]: token j+1 of each sample
    for j, (i, s, e, _) in enumerate(samples):
        out[i, s:e] = adv[j, : e - s]
    if pads is not None:
        for j in range(n, adv.shape[0]):
            pads.append((adv[j], batch.batch["response_mask"][j].numpy()))
    return out


def train_batch(pipeline_config: AgenticConfig, rollouts: list[DataProto], compute_log_probs: Any) -> DataProto:
    """The batch ``actor_train.train_step`` receives: `GemAgenticPipeline.run`'s steps from the
    rollout batch to the actor update (one training rank, no reference model), in ROLL's order
    and with ROLL's functions: concat (the rollout scheduler's ``get_batch``), ``sample_uuid``,
    returns, ``adjust_batch``, old log-probs from ``compute_log_probs`` (the actor cluster's,
    ``enable_old_logprobs_recompute``), ``ref_log_probs`` mocked from them (no reference), the
    response-level mask, the step_reinforce chain with our normaliser, the train-infer
    correction, ``batch_balance``."""
    from roll.pipeline.agentic.utils import get_agentic_response_level_mask
    from roll.utils.functionals import batch_balance
    from roll.utils.train_infer_corrections import apply_train_infer_correction_to_batch

    cfg = pipeline_config
    batch = DataProto.concat(rollouts)
    batch.non_tensor_batch["sample_uuid"] = np.array(
        [f"{traj_id}_{i}" for i, traj_id in enumerate(batch.non_tensor_batch["traj_id"])], dtype=object)
    batch.meta_info.update(global_step=0, _broadcast_non_tensor_batch=True, loss_mask_keys=["response_mask"])
    batch = compute_discounted_returns(batch, cfg.adv_estimator, cfg.step_reward_gamma)
    batch = pipeline_at_dp(cfg, 1).adjust_batch(batch, mode=cfg.batch_adjust_mode)
    batch.meta_info["is_offload_states"] = False
    if not cfg.enable_old_logprobs_recompute or cfg.enable_reference:  # pragma: no cover - the recipe's config
        raise AssertionError("train_batch follows the recipe's config: old log-probs recomputed, no reference")
    batch_balance(batch, dp_size=1, minibatch_size=len(batch))
    batch.batch["old_log_probs"] = compute_log_probs(batch).batch["log_probs"]
    batch.batch["ref_log_probs"] = batch.batch["old_log_probs"].clone()
    batch, _ = get_agentic_response_level_mask(batch, cfg)
    with exact_reward_norm():
        batch, _ = compute_response_level_rewards(batch=batch, pipeline_config=cfg)
    kl_ctrl = get_kl_controller(init_kl_coef=cfg.init_kl_coef, target_kl=cfg.target_kl, kl_horizon=cfg.kl_horizon)
    batch, _ = compute_token_reward(batch, cfg, kl_ctrl)
    batch = agentic_compute_advantage(
        data=batch, gamma=cfg.gamma, lambd=cfg.lambd, adv_estimator=cfg.adv_estimator, advantage_clip=cfg.advantage_clip,
        whiten_advantages=cfg.whiten_advantages, whiten_rewards=cfg.whiten_rewards, pipeline_config=cfg,
    )
    batch, _ = apply_train_infer_correction_to_batch(cfg, batch, update_mask_keys=batch.meta_info["loss_mask_keys"])
    args = cfg.actor_train.training_args
    batch_balance(batch, dp_size=1, minibatch_size=args.per_device_train_batch_size * args.gradient_accumulation_steps)
    return batch
