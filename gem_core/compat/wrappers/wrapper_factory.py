"""The reference wrapper names (``WRAPPER_FACTORY``, ``get_wrapper_fns``) on gem_core's wrappers and tools."""

from __future__ import annotations

import difflib
import functools
import logging
from collections.abc import Callable
from typing import Any

from gem_core.compat.tools.python_code_tool import PythonCodeTool
from gem_core.compat.tools.search_tool import SearchTool
from gem_core.compat.tools.tool_env_wrapper import ToolEnvWrapper
from gem_core.compat.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
from gem_core.compat.wrappers.observation_wrapper import ObservationWrapper
from gem_core.errors import InvalidArgument

__all__ = ["WRAPPER_FACTORY", "TOKENIZER_REQUIRED", "get_wrapper_fns", "UnknownWrapper"]

logger = logging.getLogger("gem_core.compat")


def python_tool(env: Any, *, timeout: float = 5, keep_error_last_line: bool = False, **wrapper_kwargs: Any) -> ToolEnvWrapper:
    """A `ToolEnvWrapper` with a fresh `PythonCodeTool` for this env."""
    tool = PythonCodeTool(timeout=timeout, keep_error_last_line=keep_error_last_line)
    return ToolEnvWrapper(env, [tool], **wrapper_kwargs)


def search_tool(env: Any, *, topk: int = 3, timeout: float = 5, **wrapper_kwargs: Any) -> ToolEnvWrapper:
    """A `ToolEnvWrapper` with a fresh `SearchTool` (``$SEARCH_URL``) for this env."""
    return ToolEnvWrapper(env, [SearchTool(topk=topk, timeout=timeout)], **wrapper_kwargs)


# Order matters when chaining: a tool wrapper first, then a history layout, then tracking.
WRAPPER_FACTORY: dict[str, Callable[..., Any]] = {
    "python_tool": functools.partial(python_tool, tool_reward=0.05, tool_success_reward=0.25, max_tool_uses=5),
    "python_tool_no_int_reward": functools.partial(python_tool, tool_reward=0.0, tool_success_reward=0.0, max_tool_uses=5),
    "python_tool_no_int_reward_last_line_error": functools.partial(
        python_tool, keep_error_last_line=True, tool_reward=0.0, tool_success_reward=0.0, max_tool_uses=5
    ),
    "search_tool": functools.partial(search_tool, tool_reward=0.3, tool_success_reward=0.0, max_tool_uses=5),
    "search_tool_no_int_reward": functools.partial(search_tool, tool_reward=0.0, tool_success_reward=0.0, max_tool_uses=5),
    "concat": functools.partial(ObservationWrapper, include_action=False, include_chat_template=False),
    "concat_with_action": functools.partial(ObservationWrapper, include_action=True, include_chat_template=False),
    "concat_chat": functools.partial(ObservationWrapper, include_action=True, include_chat_template=True),
    "concat_chat_on_reset": functools.partial(
        ObservationWrapper, include_action=True, include_chat_template=False, apply_chat_template_on_reset=True
    ),
    "episode_tracking": EpisodeTrackingWrapper,
}
"""Reference wrapper names -> callables ``env -> wrapped env`` (tools are built per env)."""

TOKENIZER_REQUIRED: list[str] = ["concat_chat", "concat_chat_on_reset"]
"""The names that render through the tokenizer's chat template."""


class UnknownWrapper(InvalidArgument, KeyError):
    """A wrapper name not in `WRAPPER_FACTORY` (a ``KeyError``, as in the reference)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def get_wrapper_fns(wrappers: str | None, tokenizer: Any = None) -> list[Callable[[Any], Any]]:
    """The wrappers named in ``wrappers`` (comma-separated, applied in that order).

    Args:
        wrappers: e.g. ``"python_tool,concat_chat"``; empty or None for none.
        tokenizer: needed by the `TOKENIZER_REQUIRED` names.

    Raises:
        UnknownWrapper: a name not in `WRAPPER_FACTORY` (with close matches).
        InvalidArgument: a `TOKENIZER_REQUIRED` name without ``tokenizer``.
    """
    fns: list[Callable[[Any], Any]] = []
    if not wrappers:
        return fns
    for name in (w.strip() for w in wrappers.split(",")):
        if not name:
            continue
        factory = WRAPPER_FACTORY.get(name)
        if factory is None:
            close = difflib.get_close_matches(name, WRAPPER_FACTORY, n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            raise UnknownWrapper(
                f"unknown wrapper {name!r}; known: {', '.join(WRAPPER_FACTORY)}.{hint}"
            )
        if name in TOKENIZER_REQUIRED:
            if tokenizer is None:
                raise InvalidArgument(f"wrapper {name!r} renders a chat template and needs tokenizer=...")
            factory = functools.partial(factory, tokenizer=tokenizer)
        fns.append(factory)
    logger.info("gem_core.compat wrappers: %s", wrappers)
    return fns
