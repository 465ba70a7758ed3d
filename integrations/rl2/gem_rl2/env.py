"""The GEM env file for RL2: put this file's path in ``rollout.env_path``.

It serves both RL2 env APIs (the logic lives in `gem_rl2.rollout`, imported once):

- RL2 HEAD calls ``await generate(config, tokenizer, router_url, sample)``: the file
  plays the row's gem_core episode itself against SGLang and fills ``sample``.
- rl-square 0.0.2 calls ``await reset(extra_info)`` then ``await step(state_text,
  action_text, extra_info)`` each turn, and runs the loop.

Each dataset row names its episode in ``extra_info``: ``env_id`` (required) and
``seed``, plus optional settings (see `gem_rl2.rollout`). ``python -c "import
gem_rl2.env as m; print(m.__file__)"`` prints the path.
"""

from __future__ import annotations

from typing import Any

from gem_rl2.rollout import configure_from_rl2, head_generate, v002_reset, v002_step

__all__ = ["configure", "generate", "reset", "step"]


def configure(config: Any) -> None:
    """rl-square 0.0.2: RL2's ``rollout`` config, passed by `gem_rl2.train` after loading this file."""
    configure_from_rl2(config)


async def generate(config: Any, tokenizer: Any, router_url: str, sample: Any) -> None:
    """RL2 HEAD: play ``sample.sample``'s episode through ``router_url`` into ``sample``."""
    await head_generate(config, tokenizer, router_url, sample)


async def reset(extra_info: Any) -> tuple[str, dict[str, Any]]:
    """rl-square 0.0.2: start the episode ``extra_info`` names; ``(state_text, extra_info)``."""
    return await v002_reset(extra_info)


async def step(state_text: str, action_text: str, extra_info: dict[str, Any]) -> dict[str, Any]:
    """rl-square 0.0.2: one turn's ``{"next_state", "reward", "score", "done", "extra_info"}``."""
    return await v002_step(state_text, action_text, extra_info)
