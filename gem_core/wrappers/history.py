"""`HistoryWrapper`: what the agent sees each turn — the latest observation or a history format."""

from __future__ import annotations

import difflib
from collections import deque
from typing import Any

from gem_core.core import Env, Wrapper, observation_text
from gem_core.errors import InvalidArgument

__all__ = [
    "HistoryWrapper",
    "HISTORY_FORMATS",
    "ENV_MARKER",
    "AGENT_MARKER",
    "SUMMARY_MARKER",
    "LATEST_MARKER",
    "RECENT_MARKER",
    "DEFAULT_SUMMARY_TURNS",
    "render_action",
]

HISTORY_FORMATS: tuple[str, ...] = ("last", "concat", "concat_with_action", "chat", "summary")
"""The valid ``format`` names of `HistoryWrapper`."""

ENV_MARKER = "[Environment]"
AGENT_MARKER = "[Agent]"
SUMMARY_MARKER = "[Summary of the episode so far]"
LATEST_MARKER = "[Latest observation]"
RECENT_MARKER = "[Recent turns]"
DEFAULT_SUMMARY_TURNS = 3
"""Turns the ``summary`` format shows when the env gives no summary and ``max_history`` is None."""

_SEP = "\n\n"


def _safe_repr(value: Any, limit: int) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__} object with a failing repr>"
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def render_action(action: Any, limit: int = 200) -> str:
    """An action as text for a history: a str unchanged, anything else as a truncated repr.

    Never raises (a failing ``__repr__`` gives ``<T object with a failing repr>``).
    """
    return action if isinstance(action, str) else _safe_repr(action, limit)


def _omitted(n: int) -> str:
    return f"[... {n} earlier turn{'s' if n != 1 else ''} omitted ...]"


class HistoryWrapper(Wrapper):
    """Turns each observation into one of the history formats an LLM agent is prompted with.

    A *turn* is one ``step``: the agent's action and the observation it produced. The
    *instruction* is the observation returned by ``reset``. Formats (``format=``):

    - ``"last"``: the latest observation, unchanged (identity; nothing is stored).
    - ``"concat"``: the instruction and every observation since, as text joined by blank
      lines.
    - ``"concat_with_action"``: the same with the actions interleaved; each block starts
      with a role marker line, `ENV_MARKER` (``[Environment]``) or `AGENT_MARKER`
      (``[Agent]``)::

          [Environment]
          <instruction>

          [Agent]
          <action 1>

          [Environment]
          <observation 1>

    - ``"chat"``: a new list of ``{"role": "user" | "assistant", "content": str}``
      messages, ready for a tokenizer's chat template: the instruction as the first user
      message, then one assistant message (the action) and one user message (the
      observation) per turn. It always ends with a user message.
    - ``"summary"``: for long episodes: the instruction, a compact summary of the episode
      so far from the env's ``state_summary()`` (see `gem_core.Env.state_summary`) and
      the latest observation::

          <instruction>

          [Summary of the episode so far]
          <env.state_summary()>

          [Latest observation]
          <observation>

      When ``state_summary()`` returns None (the default of every env), the last k turns
      are shown instead, in the ``concat_with_action`` layout, under ``[Recent turns]``
      (k = ``max_history``, or `DEFAULT_SUMMARY_TURNS` = 3). Right after ``reset`` the
      observation is the instruction alone.

    ``max_history`` keeps only the last N turns (memory stays bounded); the instruction
    is always kept. The text formats put ``[... n earlier turns omitted ...]`` where turns
    were dropped; ``chat`` simply drops the oldest assistant/user pairs so the roles keep
    alternating.

    Text rendering: observations that are not str use a dict's ``"text"`` entry, else
    ``str(obs)``; actions that are not str (None, bytes, lists, ...) are shown as their
    ``repr``, cut to ``action_repr_chars`` characters, and never raise. String actions are
    kept verbatim.

    Reset and step ``info`` pass through unchanged.

    Args:
        env: the env to wrap.
        format: one of `HISTORY_FORMATS`.
        max_history: the most turns to keep (a positive int), or None for all.
        action_repr_chars: the cut-off for the repr of non-str actions.

    Raises:
        InvalidArgument: an unknown ``format`` (the message lists the valid ones), or a
            ``max_history`` / ``action_repr_chars`` that is not a positive int.
    """

    def __init__(
        self,
        env: Env,
        format: str = "concat",
        max_history: int | None = None,
        *,
        action_repr_chars: int = 200,
    ):
        if format not in HISTORY_FORMATS:
            close = difflib.get_close_matches(str(format), HISTORY_FORMATS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise InvalidArgument(
                f"unknown history format {format!r}; valid formats: "
                f"{', '.join(map(repr, HISTORY_FORMATS))}.{hint}"
            )
        for arg_name, value in (
            ("max_history", max_history),
            ("action_repr_chars", action_repr_chars),
        ):
            if value is None and arg_name == "max_history":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(
                    f"{arg_name} must be a positive int{' or None' if arg_name == 'max_history' else ''}, "
                    f"got {value!r}"
                )
        super().__init__(env)
        self.format = format
        self.max_history = max_history
        self.action_repr_chars = action_repr_chars
        keep = max_history
        if format == "summary" and keep is None:
            keep = DEFAULT_SUMMARY_TURNS
        self._turns: deque[tuple[Any, Any]] = deque(maxlen=keep)
        self._instruction: Any = None
        self._turn_count = 0

    @property
    def instruction(self) -> Any:
        """The observation returned by the last ``reset`` (None before the first)."""
        return self._instruction

    @property
    def history(self) -> tuple[tuple[Any, Any], ...]:
        """The kept turns as ``(action, observation)`` pairs, oldest first."""
        return tuple(self._turns)

    @property
    def turn_count(self) -> int:
        """Steps taken in the current episode (kept or not)."""
        return self._turn_count

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._instruction = obs
        self._turns.clear()
        self._turn_count = 0
        return self._render(obs), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._turn_count += 1
        if self.format != "last":
            self._turns.append((action, obs))
        return self._render(obs), reward, terminated, truncated, info

    # --- rendering -------------------------------------------------------------------
    def _render(self, latest: Any) -> Any:
        if self.format == "last":
            return latest
        if self.format == "chat":
            return self._chat()
        if self.format == "concat":
            return _SEP.join(
                self._with_omitted(
                    [observation_text(obs) for _, obs in self._turns], [observation_text(self._instruction)]
                )
            )
        if self.format == "concat_with_action":
            head = [f"{ENV_MARKER}\n{observation_text(self._instruction)}"]
            return _SEP.join(self._with_omitted(self._action_blocks(), head))
        return self._summary(latest)

    def _with_omitted(self, blocks: list[str], head: list[str]) -> list[str]:
        dropped = self._turn_count - len(self._turns)
        return head + ([_omitted(dropped)] if dropped > 0 else []) + blocks

    def _action_blocks(self) -> list[str]:
        blocks: list[str] = []
        for action, obs in self._turns:
            blocks.append(f"{AGENT_MARKER}\n{render_action(action, self.action_repr_chars)}")
            blocks.append(f"{ENV_MARKER}\n{observation_text(obs)}")
        return blocks

    def _chat(self) -> list[dict[str, str]]:
        messages = [{"role": "user", "content": observation_text(self._instruction)}]
        for action, obs in self._turns:
            messages.append(
                {"role": "assistant", "content": render_action(action, self.action_repr_chars)}
            )
            messages.append({"role": "user", "content": observation_text(obs)})
        return messages

    def _summary(self, latest: Any) -> str:
        instruction = observation_text(self._instruction)
        if self._turn_count == 0:
            return instruction
        summary = self.env.state_summary()
        if summary is not None:
            if not isinstance(summary, str):
                raise TypeError(
                    f"{self.env}.state_summary() returned {type(summary).__name__}; expected "
                    "str or None"
                )
            return _SEP.join(
                [
                    instruction,
                    f"{SUMMARY_MARKER}\n{summary}",
                    f"{LATEST_MARKER}\n{observation_text(latest)}",
                ]
            )
        recent = _SEP.join(self._with_omitted(self._action_blocks(), []))
        return _SEP.join([instruction, f"{RECENT_MARKER}\n{recent}"])
