"""The rollout engine's names in one place (kept for existing imports).

The engine lives in concept modules: `gem_core.rl.sampling` (policy protocols and
sampling), `gem_core.rl.chat` (chat formatting), `gem_core.rl.loop` (the episode loop)
and `gem_core.rl.collect` (the collector). Import from `gem_core.rl` in new code.
"""

from __future__ import annotations

from gem_core.rl.chat import (
    ChatFormatter,
    TemplateRewriteWarning,
    chat_content,
    chat_messages,
    image_data_url,
)
from gem_core.rl.collect import collect_episodes, collect_episodes_sync
from gem_core.rl.loop import TRUNCATED_RESPONSE_POLICIES, run_chat_episode, run_episode
from gem_core.rl.sampling import (
    FINISH_REASONS,  # noqa: F401 - importable from here before the split
    ChatPolicy,
    ChatResult,
    ContextLengthExceeded,
    GenerationResult,
    Policy,
    PolicyError,
    SamplingParams,
    derive_seed,
)

__all__ = [
    "PolicyError",
    "ContextLengthExceeded",
    "SamplingParams",
    "GenerationResult",
    "Policy",
    "ChatResult",
    "ChatPolicy",
    "ChatFormatter",
    "chat_messages",
    "chat_content",
    "image_data_url",
    "TemplateRewriteWarning",
    "TRUNCATED_RESPONSE_POLICIES",
    "derive_seed",
    "run_episode",
    "run_chat_episode",
    "collect_episodes",
    "collect_episodes_sync",
]
