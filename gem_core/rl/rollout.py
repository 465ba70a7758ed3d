"""The rollout engine's names in one place (kept for existing imports).

The engine lives in concept modules: `gem_core.rl.sampling` (policy protocols and
sampling), `gem_core.rl.chat` (chat formatting), `gem_core.rl.loop` (the episode loop)
and `gem_core.rl.collect` (the collector). Import from `gem_core.rl` in new code.
"""

from __future__ import annotations

from gem_core import _lazy
from gem_core.rl.sampling import FINISH_REASONS  # noqa: F401 - importable from here before the split

# Each name loads from `gem_core.rl` on first access (TRUNCATED_RESPONSE_POLICIES, which
# `gem_core.rl` does not export, from its module).
__all__, __getattr__, __dir__ = _lazy.lazy_package(
    __name__,
    {
        "PolicyError": "gem_core.rl",
        "ContextLengthExceeded": "gem_core.rl",
        "SamplingParams": "gem_core.rl",
        "GenerationResult": "gem_core.rl",
        "Policy": "gem_core.rl",
        "ChatResult": "gem_core.rl",
        "ChatPolicy": "gem_core.rl",
        "ChatFormatter": "gem_core.rl",
        "chat_messages": "gem_core.rl",
        "chat_content": "gem_core.rl",
        "image_data_url": "gem_core.rl",
        "TemplateRewriteWarning": "gem_core.rl",
        "TRUNCATED_RESPONSE_POLICIES": "gem_core.rl.loop",
        "derive_seed": "gem_core.rl",
        "run_episode": "gem_core.rl",
        "run_chat_episode": "gem_core.rl",
        "collect_episodes": "gem_core.rl",
        "collect_episodes_sync": "gem_core.rl",
    },
)
