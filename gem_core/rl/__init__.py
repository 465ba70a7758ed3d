"""Trainer-agnostic RL: episode types, the rollout engine, advantage estimators, training tensors.

A CleanRL-style loop::

    import gem_core.rl as rl

    policy = rl.TransformersPolicy(model, tokenizer)
    formatter = rl.ChatFormatter(tokenizer, max_context=1024)
    episodes = rl.collect_episodes_sync(
        "game:GuessTheNumber-v0-easy", policy, formatter, seeds=range(64),
        sampling=rl.SamplingParams(temperature=1.0, max_new_tokens=32, seed=it),
    )
    episodes = [ep for ep in episodes if ep.error is None]
    advantages = rl.compute_advantages(episodes, "rebn", gamma=0.9)
    batch = rl.build_training_batch(episodes, advantages, pad_token_id=tokenizer.pad_token_id)
    t = batch.to_torch()
    logp = rl.sequence_logprobs(model, t["input_ids"], t["attention_mask"])
    loss = -(logp * t["advantages"] * t["loss_mask"]).sum() / t["loss_mask"].sum()

Importing this package imports neither torch nor transformers; the backends in
`gem_core.rl.policies` (`TransformersPolicy`) and the builders in `gem_core.rl.testing` load them when used.
"""

from __future__ import annotations

from gem_core import _lazy

# Public name -> the module that defines it; each loads on first access.
__all__, __getattr__, __dir__ = _lazy.lazy_package(
    __name__,
    {
        "Turn": "gem_core.rl.types",
        "Episode": "gem_core.rl.types",
        "END_REASONS": "gem_core.rl.types",
        "LAYOUTS": "gem_core.rl.types",
        "ESTIMATORS": "gem_core.rl.advantages",
        "discounted_returns": "gem_core.rl.advantages",
        "rebn": "gem_core.rl.advantages",
        "grpo": "gem_core.rl.advantages",
        "dr_grpo": "gem_core.rl.advantages",
        "rloo": "gem_core.rl.advantages",
        "reinforce": "gem_core.rl.advantages",
        "gae": "gem_core.rl.advantages",
        "compute_advantages": "gem_core.rl.advantages",
        "per_turn_advantages": "gem_core.rl.advantages",
        "SamplingParams": "gem_core.rl.sampling",
        "GenerationResult": "gem_core.rl.sampling",
        "Policy": "gem_core.rl.sampling",
        "PolicyError": "gem_core.rl.sampling",
        "ChatFormatter": "gem_core.rl.chat",
        "TemplateRewriteWarning": "gem_core.rl.chat",
        "derive_seed": "gem_core.rl.sampling",
        "run_episode": "gem_core.rl.loop",
        "TokenConversation": "gem_core.rl.loop",
        "run_chat_episode": "gem_core.rl.loop",
        "chat_messages": "gem_core.rl.chat",
        "chat_content": "gem_core.rl.chat",
        "image_data_url": "gem_core.rl.chat",
        "ChatPolicy": "gem_core.rl.sampling",
        "ChatResult": "gem_core.rl.sampling",
        "ContextLengthExceeded": "gem_core.rl.sampling",
        "collect_episodes": "gem_core.rl.collect",
        "collect_episodes_sync": "gem_core.rl.collect",
        "TrainingBatch": "gem_core.rl.batch",
        "build_training_batch": "gem_core.rl.batch",
        "TransformersPolicy": "gem_core.rl.policies",
        "OpenAIPolicy": "gem_core.rl.policies",
        "OpenAIChatPolicy": "gem_core.rl.policies",
        "sequence_logprobs": "gem_core.rl.policies",
        "PackedEpisode": "gem_core.rl.packing",
        "pack_episode": "gem_core.rl.packing",
        "pack_turns": "gem_core.rl.packing",
        "pad_responses": "gem_core.rl.packing",
        "turn_spans": "gem_core.rl.packing",
        "turn_index": "gem_core.rl.packing",
        "token_advantages": "gem_core.rl.packing",
        "sample_advantages": "gem_core.rl.packing",
        "BudgetedPolicy": "gem_core.rl.budget",
        "play_row": "gem_core.rl.play",
    },
)
