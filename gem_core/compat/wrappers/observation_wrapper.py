"""The reference history wrapper (``gem.wrappers.observation_wrapper.ObservationWrapper``) on `HistoryWrapper`."""

from __future__ import annotations

from collections import deque
from typing import Any, TypeVar

from gem_core.compat.core import ForwardingMixin, reset_options
from gem_core.core import Env, observation_text
from gem_core.errors import InvalidArgument
from gem_core.wrappers.history import HistoryWrapper

__all__ = ["ObservationWrapper", "WrapperObsType", "maybe_add_new_line"]

WrapperObsType = TypeVar("WrapperObsType")


def maybe_add_new_line(text: str) -> str:
    """``text`` ending in a newline (an empty one stays empty)."""
    return text if not text or text.endswith("\n") else text + "\n"


class ObservationWrapper(ForwardingMixin, HistoryWrapper):
    """Each observation becomes the episode so far, laid out as the reference does.

    History is kept by `gem_core.wrappers.HistoryWrapper` (its ``chat`` format: the reset
    observation, then one action and one observation per turn; ``max_history_length``
    keeps the last N turns, and the reset observation is always kept). Layouts:

    - ``include_action=False``: the observations, each ending with a newline;
    - ``include_action=True``: observations and actions interleaved, each ending with a
      newline;
    - ``include_chat_template=True``: the messages rendered by
      ``tokenizer.apply_chat_template(..., tokenize=False, add_generation_prompt=True)``;
      an observation produced by a tool turn (``info["use_tool"]``) is a ``"tool"``
      message, the others ``"user"``, the actions ``"assistant"``;
    - ``apply_chat_template_on_reset=True``: only the reset observation goes through the
      chat template (as one user message).

    On a tool turn the recorded action is ``info["parsed_action"]`` (the action up to the
    end of the tool call); on other turns the action itself. ``info["prefix"]`` and
    ``info["suffix"]`` of the latest step are put before / after the rendered text.
    ``info`` passes through unchanged.

    Raises:
        InvalidArgument: a chat template without a tokenizer or without actions, or both
            chat-template options at once.
    """

    def __init__(
        self,
        env: Env,
        include_action: bool = True,
        include_chat_template: bool = True,
        apply_chat_template_on_reset: bool = False,
        max_history_length: int | None = None,
        tokenizer: Any = None,
    ):
        if include_chat_template and apply_chat_template_on_reset:
            raise InvalidArgument(
                "ObservationWrapper: include_chat_template and apply_chat_template_on_reset cannot "
                "both be True; pick one"
            )
        if (include_chat_template or apply_chat_template_on_reset) and tokenizer is None:
            raise InvalidArgument(
                "ObservationWrapper: a chat template needs tokenizer=...; pass the policy's "
                "tokenizer (get_wrapper_fns(names, tokenizer=tokenizer))"
            )
        if include_chat_template and not include_action:
            raise InvalidArgument("ObservationWrapper: include_chat_template=True needs include_action=True")
        super().__init__(env, format="chat", max_history=max_history_length or None)
        self.include_action = bool(include_action)
        self.include_chat_template = bool(include_chat_template)
        self.apply_chat_template_on_reset = bool(apply_chat_template_on_reset)
        self.tokenizer = tokenizer
        self._tool_flags: deque[bool] = deque(maxlen=self._turns.maxlen)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None, **kwargs: Any):  # type: ignore[override]
        obs, info = self.env.reset(seed=seed, options=reset_options(options, kwargs))
        if self.apply_chat_template_on_reset:
            obs = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": observation_text(obs)}], tokenize=False, add_generation_prompt=True
            )
        self._instruction = obs
        self._turns.clear()
        self._tool_flags.clear()
        self._turn_count = 0
        return self._reference_view(info), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        use_tool = bool(info.get("use_tool", False))
        recorded = info["parsed_action"] if use_tool and isinstance(info.get("parsed_action"), str) else action
        self._turn_count += 1
        self._turns.append((recorded, obs))
        self._tool_flags.append(use_tool)
        return self._reference_view(info), reward, terminated, truncated, info

    def _reference_view(self, info: dict[str, Any]) -> Any:
        messages = self._chat()  # user instruction, then assistant / user pairs
        for k, flag in enumerate(self._tool_flags):
            if flag:
                messages[2 + 2 * k]["role"] = "tool"
        if self.include_chat_template:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        elif self.include_action:
            text = "".join(maybe_add_new_line(m["content"]) for m in messages)
        else:
            text = "".join(maybe_add_new_line(m["content"]) for m in messages if m["role"] != "assistant")
        prefix, suffix = info.get("prefix"), info.get("suffix")
        if isinstance(prefix, str):
            text = prefix + text
        if isinstance(suffix, str):
            text = text + suffix
        return text
