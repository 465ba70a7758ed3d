"""OpenRLHF's actor training step (``ActorPPOTrainer.training_step``, the real ``Actor`` and an
AdamW step) run for one optimizer step on the experiences the gem pipeline produces (executor ->
samples generator -> micro-batches -> ReBN); DeepSpeed's engine calls are done with plain torch."""

from __future__ import annotations

import functools

import pytest

pytest.importorskip(
    "openrlhf", reason="gem-openrlhf's tests need openrlhf (make test-openrlhf builds its venv)"
)

import torch  # noqa: E402
from gem_openrlhf.agent import make_label  # noqa: E402
from openrlhf_harness import harness  # noqa: E402

from gem_core.testing.conformance import SCENARIO, scenario_script  # noqa: E402


class TorchEngineStrategy:
    """Stand-in for the DeepSpeed engine behind OpenRLHF's strategy (STUBS.md): the calls
    ``training_step`` makes (``backward``, ``optimizer_step``, ``get_grad_norm``) done with plain
    torch as DeepSpeed does them (loss scaled by 1/gas, a step every gas micro-batches, global
    grad-norm clipping at ``actor.max_norm``, fp32 weights); everything else is the real strategy."""

    def __init__(self, strategy, accumulated_gradient: int):
        self._strategy = strategy
        self.accumulated_gradient = accumulated_gradient
        self.micro_steps = 0
        self.grads: list[torch.Tensor] = []  # what the last step used, before clipping
        self.grad_norm = 0.0

    def __getattr__(self, name):  # args, ring_attn_group, is_rank_0, print, ...
        return getattr(self._strategy, name)

    def prepare(self, actor):
        """What ``strategy.prepare((actor, cfg))`` returns: AdamW over OpenRLHF's parameter groups
        with the actor's flags, and a constant schedule (OpenRLHF's warm-up gives step one lr 0)."""
        adam = self.args.actor.adam
        actor.model.float()  # DeepSpeed's bf16 engine steps fp32 master weights
        _, groups = self._strategy._get_model_parameters(
            actor, optim="adam", weight_decay=adam.weight_decay
        )
        optim = torch.optim.AdamW(groups, lr=adam.lr, betas=adam.betas, eps=adam.eps)
        return actor, optim, torch.optim.lr_scheduler.LambdaLR(optim, lambda _: 1.0)

    def backward(self, loss, model, optimizer, **kwargs):
        (loss / self.accumulated_gradient).backward()

    def optimizer_step(self, optimizer, model, scheduler, name="model", **kwargs):
        self.micro_steps += 1
        if self.micro_steps % self.accumulated_gradient:
            return
        params = [p for p in model.parameters() if p.requires_grad]
        self.grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params]
        self.grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.args.actor.max_norm))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()

    def get_grad_norm(self, model) -> float:
        return self.grad_norm


def gem_batches(h):
    engine = h.engine(script=functools.partial(scenario_script, SCENARIO.name))
    labels = [
        make_label(SCENARIO.env_id, s, max_tokens_per_turn=SCENARIO.max_new_tokens)
        for s in SCENARIO.seeds
    ]
    return h.advantages(h.micro_batches(h.experiences(h.responses(engine, labels))), SCENARIO.gamma)


def test_actor_training_step_consumes_the_adapters_advantages(monkeypatch):
    import openrlhf.trainer.ray.ppo_actor as ppo_actor
    from openrlhf.models.actor import Actor
    from openrlhf.utils.loss_utils import iter_grad_accum_global_norm

    h = harness()
    args = h.args
    batches = gem_batches(h)
    assert args.actor.loss_agg_mode == "token-mean" and args.actor.policy_loss_type == "ppo"
    assert not args.algo.kl.use_loss and args.actor.entropy_coef is None  # policy loss alone

    # The adapter's micro-batches make one optimizer step.
    strategy = TorchEngineStrategy(h.trainer.strategy, accumulated_gradient=len(batches))
    # As PolicyModelActor.init_model_from_pretrained builds it (eager attention: no flash-attn).
    actor = Actor(
        h.model_path,
        attn_implementation="eager",
        param_dtype=args.ds.param_dtype,
        packing_samples=args.ds.packing_samples,
        temperature=args.rollout.temperature,
    )
    actor.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": args.actor.gradient_checkpointing_reentrant}
    )
    actor, optim, scheduler = strategy.prepare(actor)
    # ActorPPOTrainer.__init__'s two CUDA calls (STUBS.md): a barrier + CUDA sync (one process
    # here) and the replay buffer, whose __init__ asks for the CUDA device (training_step reads
    # the buffer only with dynamic batching).
    monkeypatch.setattr(ppo_actor, "torch_dist_barrier_and_cuda_sync", lambda: None)
    monkeypatch.setattr(ppo_actor, "NaiveReplayBuffer", lambda *args: None)
    trainer = ppo_actor.ActorPPOTrainer(
        strategy,
        actor,
        ema_model=None,
        actor_optim=optim,
        actor_scheduler=scheduler,
        micro_train_batch_size=args.train.micro_batch_size,
        eps_clip=args.actor.eps_clip,
        vllm_engines=None,
    )

    # The experience maker's old log-probs: PolicyModelActor.forward (eval, no grad), on-policy.
    actor.eval()
    with torch.no_grad():
        for b in batches:
            b.action_log_probs = actor(b.sequences, b.action_mask, attention_mask=b.attention_mask)
    actor.train()

    # Independent reference: token-mean over the step of -A * log pi, so d loss / d log pi = -A / N.
    num_tokens = sum(b.action_mask.sum() for b in batches)
    advantages = [b.advantages.clone() for b in batches]
    params = [p for p in actor.parameters() if p.requires_grad]
    for b, adv in zip(batches, advantages, strict=True):
        log_probs = actor(b.sequences, b.action_mask, attention_mask=b.attention_mask)
        (-(adv * log_probs * b.action_mask).sum() / num_tokens).backward()
    reference = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params]
    optim.zero_grad()
    assert any(g.abs().sum() > 0 for g in reference), "ReBN advantages must move the policy"
    before = [p.detach().clone() for p in params]

    window = iter_grad_accum_global_norm(
        batches, strategy, strategy.accumulated_gradient, lambda e: e.action_mask
    )
    status = [trainer.training_step(b, 0.0, step, info) for step, (b, info) in enumerate(window)]

    assert strategy.micro_steps == len(batches) and len(strategy.grads) == len(params)
    names = [n for n, p in actor.named_parameters() if p.requires_grad]
    for name, got, want in zip(names, strategy.grads, reference, strict=True):
        torch.testing.assert_close(
            got, want, rtol=1e-4, atol=1e-7, msg=lambda m, n=name: f"grad of {n}: {m}"
        )
    metrics = [s["metrics"] for s in status]
    on_policy = all(float(m["ppo_kl"]) == 0 and float(m["ppo_clip_ratio"]) == 0 for m in metrics)
    assert on_policy  # ratio 1, so the loss is -A / N per token
    policy_loss = sum(float(m["policy_loss"]) for m in metrics) / len(batches)
    expected = float(
        sum(-(adv * b.action_mask).sum() for b, adv in zip(batches, advantages, strict=True))
        / num_tokens
    )
    assert policy_loss == pytest.approx(expected, rel=1e-5, abs=1e-7)
    assert metrics[-1]["actor_lr"] == args.actor.adam.lr and metrics[-1]["actor_grad_norm"] > 0

    deltas = [p.detach() - p0 for p, p0 in zip(params, before, strict=True)]
    assert any(d.abs().max() > 0 for d in deltas), "the optimizer step must move the parameters"
    assert sum(float((d * g).sum()) for d, g in zip(deltas, reference, strict=True)) < 0, (
        "the step must descend the loss"
    )
    # Adam's first step: |dw| <= lr (plus the fp32 rounding of w).
    for d, p0 in zip(deltas, before, strict=True):
        assert (d.abs() <= args.actor.adam.lr + torch.finfo(p0.dtype).eps * p0.abs()).all()
