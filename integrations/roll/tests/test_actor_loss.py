"""ROLL's actor update run on CPU for one optimizer step on the batch the gem-roll adapter produces.

ROLL's own worker and strategy run: the agentic ``ActorWorker`` built and initialised in-process
(``FSDP2TrainStrategy.initialize``: the tiny model under FSDP2 on a 1-rank gloo group, ROLL's
AdamW and scheduler), its ``compute_log_probs`` for the old log-probs, and its ``train_step`` ->
``FSDP2TrainStrategy.train_step`` -> ``ActorWorker.loss_func``, on the batch of
`roll_harness.train_batch` (ROLL's rollout through our env manager, then the pipeline's steps
with our exact normaliser). Stand-ins: STUBS.md. Needs GEM_ROLL_SRC and the full venv.
"""

from __future__ import annotations

import pytest
from conftest import ROLL_SKIP

if ROLL_SKIP:
    pytest.skip(ROLL_SKIP, allow_module_level=True)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from gem_roll.config import STEP_ENV_MANAGER  # noqa: E402

from gem_core.rl.advantages import rebn  # noqa: E402
from gem_core.testing.conformance import SCENARIO  # noqa: E402

# ROLL's CpuPlatform forwards these to ``torch.cpu``, which has none of them (they resolve to
# None, and calling them raises): the offload manager and ``offload_states`` call them around
# every worker call. On CPU there is no device cache to empty, no peak to reset, no device memory.
CPU_PLATFORM_STAND_INS = {
    **dict.fromkeys(("empty_cache", "reset_max_memory_allocated", "reset_max_memory_cached", "reset_peak_memory_stats"),
                    lambda *a, **k: None),
    **dict.fromkeys(("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved",
                     "device_memory_used"),
                    lambda *a, **k: 0),
}


def reference_advantages(batch, gamma: float) -> np.ndarray:
    """Per sample: ReBN (`gem_core.rl.advantages.rebn`) of the per-turn discounted returns, from
    the rollout's own step rewards (a plain loop, no ROLL code)."""
    nt = batch.non_tensor_batch
    traj = [str(t) for t in nt["traj_id"]]
    step = [int(s) for s in nt["step"]]
    reward = {(t, s): float(r) for t, s, r in zip(traj, step, nt["step_scores"], strict=True)}
    returns = []
    for t, s in zip(traj, step, strict=True):
        g, k = 0.0, s
        while (t, k) in reward:
            g += gamma ** (k - s) * reward[(t, k)]
            k += 1
        returns.append(g)
    return rebn(np.array(returns))


def full(t: torch.Tensor) -> torch.Tensor:
    """A parameter or gradient as a plain tensor (FSDP2 holds DTensors)."""
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().clone()


@pytest.fixture
def actor(roll_runtime, tiny_model_path, tmp_path, monkeypatch):
    """The adapter's AgenticConfig, ROLL's rollout through GemStepEnvManager, and ROLL's agentic
    ActorWorker initialised on CPU (one training rank)."""
    import roll_harness as h
    import torch.distributed as dist
    from roll.pipeline.agentic.agentic_actor_worker import ActorWorker
    from roll.platforms import current_platform
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path, local_files_only=True)
    config = h.load_config(h.scenario_yaml(tmp_path, SCENARIO, tiny_model_path, STEP_ENV_MANAGER))
    rollouts = h.run_rollouts(config, tokenizer, list(SCENARIO.seeds))
    n = sum(len(r) for r in rollouts)
    args = config.actor_train.training_args
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (1, 1)
    # One optimizer step over the whole batch: backward batch = per_device (1) x GA (all samples).
    args.gradient_accumulation_steps = n
    # fp32 compute (ROLL's param_dtype option; the recipe's default is bf16) for a 1e-4 comparison.
    config.actor_train.strategy_args.strategy_config["param_dtype"] = "fp32"
    for name, stand_in in CPU_PLATFORM_STAND_INS.items():
        monkeypatch.setattr(current_platform, name, stand_in, raising=False)
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "WORKER_NAME": "actor_train-0",
                       "CLUSTER_NAME": "actor_train"}.items():
        monkeypatch.setenv(key, value)
    for key in ("MASTER_ADDR", "MASTER_PORT"):  # ActorWorker.__init__ sets them (rank 0)
        monkeypatch.setenv(key, "")
    worker = ActorWorker(config.actor_train)
    try:
        worker.initialize(config)  # FSDP2TrainStrategy.initialize: gloo group, FSDP2 model, AdamW
        yield {"h": h, "config": config, "rollouts": rollouts, "worker": worker, "model_path": tiny_model_path}
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.mark.filterwarnings("ignore:In CPU autocast, but the target dtype is not supported:UserWarning")
def test_roll_actor_update_consumes_the_adapters_advantages(actor):
    from transformers import AutoModelForCausalLM

    h, config, worker = actor["h"], actor["config"], actor["worker"]
    assert worker.pipeline_config is config and config.loss_agg_mode == "token-mean"
    assert not config.use_kl_loss and config.entropy_loss_coef == 0 and not config.dual_clip_loss
    assert config.actor_train.worker_cls == "roll.pipeline.agentic.agentic_actor_worker.ActorWorker"

    batch = h.train_batch(config, actor["rollouts"], worker.compute_log_probs)
    mask = batch.batch["response_mask"][:, 1:].bool()
    advantages = batch.batch["advantages"]
    assert advantages.shape == mask.shape

    # The adapter's advantages: on every response token, exact ReBN of the sample's turn return.
    want = torch.as_tensor(reference_advantages(batch, config.step_reward_gamma), dtype=torch.float32)
    expanded = want[:, None].expand_as(advantages) * mask
    torch.testing.assert_close(advantages * mask, expanded, rtol=1e-5, atol=1e-6)
    assert not advantages[~mask].abs().max() > 0, "advantages off the response tokens"
    assert want.abs().max() > 0.5, "ReBN of the scenario should not be flat"

    # Independent reference: the checkpoint in plain transformers, token-mean over the batch of
    # -A * log pi (on policy, ratio 1): d loss / d log pi = -A / N on each response token.
    ref_model = AutoModelForCausalLM.from_pretrained(actor["model_path"], torch_dtype=torch.float32)
    num_tokens = int(mask.sum())
    for i in range(len(batch)):
        ids = batch.batch["input_ids"][i : i + 1]
        logits = ref_model(input_ids=ids, attention_mask=batch.batch["attention_mask"][i : i + 1],
                           position_ids=batch.batch["position_ids"][i : i + 1], use_cache=False).logits
        logp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        m = mask[i : i + 1]
        torch.testing.assert_close(logp[m], batch.batch["old_log_probs"][i : i + 1][m], rtol=1e-4, atol=1e-5)
        (-(expanded[i : i + 1] * logp * m).sum() / num_tokens).backward()
    ref_params = dict(ref_model.named_parameters())

    model = worker.strategy.model
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    reference = [ref_params[n].grad.detach().clone() for n in names]
    ref_norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in reference])))
    assert ref_norm > 0, "ReBN advantages must move the policy"
    before = [full(p) for n, p in model.named_parameters() if p.requires_grad]
    used: list[torch.Tensor] = []  # the gradients the optimizer step used (after ROLL's clipping)
    worker.strategy.optimizer.register_step_pre_hook(
        lambda opt, *_: used.extend(full(p.grad) for n, p in model.named_parameters() if p.requires_grad)
    )

    # ROLL's loss_func on one sample reads exactly its advantages: -A_k (ReBN's batch mean is 0,
    # so the batch's pg loss alone would not tell), and -2 A_k when they are doubled.
    k = int(want.abs().argmax())
    one = batch.slice(k, k + 1).clone()
    n0 = one.batch["response_mask"][:, 1:].sum()
    one.meta_info.update(batch_num_tokens={"response_mask": n0}, global_valid_samples={"response_mask": 1})
    with torch.no_grad():
        logits = model(input_ids=one.batch["input_ids"], attention_mask=one.batch["attention_mask"],
                       position_ids=one.batch["position_ids"], use_cache=False).logits
        for scale in (1.0, 2.0):
            one.batch["advantages"] = advantages[k : k + 1] * scale
            _, m = worker.loss_func(one, logits)
            assert m["actor/pg_loss@sum"] == pytest.approx(-scale * float(want[k]), rel=1e-5), (scale, m)

    metrics = worker.train_step(batch).meta_info["metrics"]

    assert len(used) == len(names), "one optimizer step over the whole batch"
    assert metrics["actor/backward_steps"] == 1
    assert metrics["actor/ppo_ratio_clipfrac@sum"] == 0 and metrics["actor/ratio_mean@sum"] == pytest.approx(1.0)
    # pg loss = -sum(A) / N over the response tokens (ReBN: ~0); the gradients below are the test.
    assert metrics["actor/pg_loss@sum"] == pytest.approx(float(-expanded.sum() / num_tokens), rel=1e-5, abs=1e-7)
    grad_norm = metrics[f"{config.actor_train.name}/grad_norm"]
    grad_norm = grad_norm[0] if isinstance(grad_norm, list) else grad_norm
    assert grad_norm == pytest.approx(ref_norm, rel=1e-4)
    clip = min(1.0, config.max_grad_norm / (ref_norm + 1e-6))  # torch's clip_grad_norm_
    for name, got, ref in zip(names, used, reference, strict=True):
        torch.testing.assert_close(got, ref * clip, rtol=1e-4, atol=1e-8, msg=lambda m, n=name: f"grad of {n}: {m}")

    after = [full(p) for n, p in model.named_parameters() if p.requires_grad]
    deltas = [a - b for a, b in zip(after, before, strict=True)]
    assert any(d.abs().max() > 0 for d in deltas), "the optimizer step must move the parameters"
    assert sum(float((d * g).sum()) for d, g in zip(deltas, reference, strict=True)) < 0, "the step must descend the loss"
    lr = config.actor_train.training_args.learning_rate
    assert metrics["actor/lr"] == pytest.approx(lr)
