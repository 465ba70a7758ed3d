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

from gem_core.rl.advantages import (
    ESTIMATORS,
    compute_advantages,
    discounted_returns,
    dr_grpo,
    gae,
    grpo,
    per_turn_advantages,
    rebn,
    reinforce,
    rloo,
)
from gem_core.rl.batch import TrainingBatch, build_training_batch
from gem_core.rl.budget import BudgetedPolicy
from gem_core.rl.chat import (
    ChatFormatter,
    TemplateRewriteWarning,
    chat_content,
    chat_messages,
    image_data_url,
)
from gem_core.rl.collect import collect_episodes, collect_episodes_sync
from gem_core.rl.loop import TokenConversation, run_chat_episode, run_episode
from gem_core.rl.packing import (
    PackedEpisode,
    pack_episode,
    pack_turns,
    pad_responses,
    sample_advantages,
    token_advantages,
    turn_index,
    turn_spans,
)
from gem_core.rl.play import play_row
from gem_core.rl.policies import (
    OpenAIChatPolicy,
    OpenAIPolicy,
    TransformersPolicy,
    sequence_logprobs,
)
from gem_core.rl.sampling import (
    ChatPolicy,
    ChatResult,
    ContextLengthExceeded,
    GenerationResult,
    Policy,
    PolicyError,
    SamplingParams,
    derive_seed,
)
from gem_core.rl.types import END_REASONS, LAYOUTS, Episode, Turn

__all__ = [
    "Turn",
    "Episode",
    "END_REASONS",
    "LAYOUTS",
    "ESTIMATORS",
    "discounted_returns",
    "rebn",
    "grpo",
    "dr_grpo",
    "rloo",
    "reinforce",
    "gae",
    "compute_advantages",
    "per_turn_advantages",
    "SamplingParams",
    "GenerationResult",
    "Policy",
    "PolicyError",
    "ChatFormatter",
    "TemplateRewriteWarning",
    "derive_seed",
    "run_episode",
    "TokenConversation",
    "run_chat_episode",
    "chat_messages",
    "chat_content",
    "image_data_url",
    "ChatPolicy",
    "ChatResult",
    "ContextLengthExceeded",
    "collect_episodes",
    "collect_episodes_sync",
    "TrainingBatch",
    "build_training_batch",
    "TransformersPolicy",
    "OpenAIPolicy",
    "OpenAIChatPolicy",
    "sequence_logprobs",
    "PackedEpisode",
    "pack_episode",
    "pack_turns",
    "pad_responses",
    "turn_spans",
    "turn_index",
    "token_advantages",
    "sample_advantages",
    "BudgetedPolicy",
    "play_row",
]
