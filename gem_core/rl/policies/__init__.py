"""Policy backends: a local transformers model and OpenAI-compatible completions and chat servers.

One module per backend: `gem_core.rl.policies.transformers` (`TransformersPolicy`,
`sequence_logprobs`), `gem_core.rl.policies.openai_completions` (`OpenAIPolicy`) and
`gem_core.rl.policies.openai_chat` (`OpenAIChatPolicy`); the HTTP client the two
OpenAI-compatible ones share is in `gem_core.rl.policies.http_client`. Importing this package
imports neither torch nor transformers.
"""

from __future__ import annotations

from gem_core.rl.policies.openai_chat import OpenAIChatPolicy
from gem_core.rl.policies.openai_completions import OpenAIPolicy
from gem_core.rl.policies.transformers import TransformersPolicy, sequence_logprobs

__all__ = ["TransformersPolicy", "OpenAIPolicy", "OpenAIChatPolicy", "sequence_logprobs"]
