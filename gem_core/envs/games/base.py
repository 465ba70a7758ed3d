"""The shared base of language games: parse → validate → apply → reward → render."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from gem_core.core import Env
from gem_core.errors import InvalidArgument, check_positive_int
from gem_core.grading.extract import extract_boxed

__all__ = [
    "LanguageGame",
    "MoveResult",
    "MoveScanner",
    "extract_last_boxed",
    "FORMAT_ERROR_MODES",
    "MAX_BOX_CHARS",
]

FORMAT_ERROR_MODES = ("terminate", "retry")
# Box contents longer than this are a format error (no game move is that long).
MAX_BOX_CHARS = 2_000

extract_last_boxed = extract_boxed
"""`gem_core.grading.extract.extract_boxed` under its former name (existing imports keep working)."""


# Single greedy runs anchored at a position: the engine scans forward once and never
# backtracks (nothing follows the run that could fail), so each match is linear.
_SPACES = re.compile(r"\s*")
_DIGITS = re.compile(r"\d*")


class MoveScanner:
    r"""A left-to-right cursor over box content, for reading a move grammar token by token.

    Model text is hostile, so `LanguageGame.parse_move` must run in linear time. A regex
    with adjacent unbounded runs over overlapping classes (``\s*[\s,]\s*``) backtracks
    through every way of splitting a run of spaces: Sudoku's took 307 s on an
    803-character box. With this cursor each step consumes the longest run it can and never
    looks back, so a parse is O(len(text)) whatever arrives.

    Whitespace is what ``\s`` matches (`str.isspace`) and a digit what ``\d`` matches
    (`str.isdecimal`; `int` reads them all), so a grammar ported from a regex accepts the
    same texts.

    >>> sc = MoveScanner(" R3, c 4 = 5 ")
    >>> sc.space(); sc.take("Rr"); sc.integer()
    'R'
    '3'
    >>> sc.separator(","), sc.take("Cc"), sc.space(), sc.integer(), sc.separator(",:="), sc.integer()
    (True, 'c', None, '4', True, '5')
    >>> sc.space(); sc.at_end()
    True
    """

    __slots__ = ("text", "pos")

    def __init__(self, text: str, pos: int = 0):
        self.text = text
        self.pos = pos

    def space(self) -> None:
        r"""Skip any whitespace (``\s*``)."""
        self.pos = _SPACES.match(self.text, self.pos).end()

    def take(self, chars: str) -> str | None:
        """Consume one character if it is one of ``chars`` (``[chars]?``); return it or ``None``."""
        if self.pos < len(self.text) and self.text[self.pos] in chars:
            self.pos += 1
            return self.text[self.pos - 1]
        return None

    def literal(self, *words: str) -> str | None:
        """Consume the first of ``words`` that starts here; return it or ``None``."""
        for word in words:
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return word
        return None

    def integer(self, signs: str = "+-", max_digits: int | None = None) -> str | None:
        r"""Consume an optional sign from ``signs`` and a run of digits (``[signs]?\d+``).

        Returns:
            The text read (for `int`), or ``None`` (nothing consumed) when there is no
            digit, or more than ``max_digits`` of them (``\d{1,max_digits}`` followed by a
            non-digit).
        """
        start = self.pos
        self.take(signs)
        end = _DIGITS.match(self.text, self.pos).end()
        if end == self.pos or (max_digits is not None and end - self.pos > max_digits):
            self.pos = start
            return None
        self.pos = end
        return self.text[start:end]

    def separator(self, marks: str = ",") -> bool:
        r"""Consume whitespace holding at most one of ``marks``, at least one character.

        The regex ``\s*[\s<marks>]\s*``, read greedily: exact when what follows starts
        with neither whitespace nor a mark (a number, a letter), as in every game grammar.
        """
        start = self.pos
        self.space()
        if self.take(marks) is not None:
            self.space()
        return self.pos > start

    def at_end(self) -> bool:
        """Whether the whole text has been read."""
        return self.pos == len(self.text)


@dataclass(slots=True)
class MoveResult:
    """What applying one parsed move did.

    Attributes:
        feedback: text shown to the agent about this move (the board is added by the base).
        reward: the reward for this turn.
        terminated: the game is over (won or lost).
        success: the game was won (only meaningful when ``terminated``).
        invalid: the move parsed but broke a rule (no state change).
    """

    feedback: str
    reward: float = 0.0
    terminated: bool = False
    success: bool = False
    invalid: bool = False


class LanguageGame(Env[str, str]):
    r"""Base class of the text games; a subclass holds only its rules.

    Flow of one `step`:

    1. **parse**: the action must be a string holding ``\boxed{...}`` (the last complete
       box wins); `parse_move` turns the box content into a move, or ``None``.
       Anything else is a *format error*: reward ``format_penalty`` (default -0.1); with
       ``format_error="terminate"`` (the reference behaviour) the episode ends, with
       ``"retry"`` the agent is told the expected format and may try again (the turn
       still counts toward ``max_turns``).
    2. **validate and apply**: `apply_move` checks the move against the rules and
       changes the state, returning a `MoveResult`. A parsable move that breaks a rule
       (``invalid=True``) leaves the state unchanged; its reward is the game's own
       (``invalid_penalty``, default 0.0) and the observation says what was wrong.
    3. **render**: the observation of every turn is the whole view the agent needs —
       the feedback on this move followed by `render` (the board / state).
    4. **end**: ``terminated`` when the game is won or lost; ``truncated`` when the turn
       budget ``max_turns`` runs out first. ``info["success"]`` is on every step (False
       until the game is won) and therefore on the final one.

    ``info`` keys: ``success``, ``turn``, ``format_error``, ``invalid_action`` and, when
    the action parsed, ``parsed_action`` (the box content).

    Subclass hooks: `configure` (draw a configuration for ``-random`` variants from
    ``self.rng``), `new_game`, `instructions`, `render`, `parse_move`, `apply_move`,
    `state_summary`, `sample_random_action`, and the class attribute ``title``.
    """

    title: ClassVar[str] = "Game"
    metadata = {"category": "game"}
    # `turn`, `done` and `max_turns` are the episode books of `Env.keeps_episode_books`;
    # `_step_after_end` is set by the `OrderEnforcing` that hands its check to this game.
    keeps_episode_books = True
    _step_after_end: Callable[[], None] | None = None
    _own_observe: ClassVar[bool] = False
    # True on a game (a direct subclass) that defines its own one-frame `step` for the common
    # move; its subclasses get False, even with a `step` of their own (calling super's), so
    # they take the general path: they may change a move's meaning.
    _fast_step: ClassVar[bool] = False

    def __init__(
        self,
        *,
        max_turns: int | None = None,
        format_error: str = "terminate",
        format_penalty: float = -0.1,
        invalid_penalty: float = 0.0,
    ):
        if format_error not in FORMAT_ERROR_MODES:
            raise InvalidArgument(
                f"format_error must be one of {FORMAT_ERROR_MODES}, got {format_error!r}"
            )
        check_positive_int("max_turns", max_turns, allow_none=True)
        self._max_turns_arg = max_turns
        self.max_turns: int = max_turns or 1
        self.format_error = format_error
        self.format_penalty = float(format_penalty)
        self.invalid_penalty = float(invalid_penalty)
        self.turn = 0
        self.done = False
        self.success = False

    # --- hooks for subclasses -------------------------------------------------------
    def configure(self) -> None:
        """Draw any unset (``None``) settings from ``self.rng`` (``-random`` variants).

        Must also set ``self.max_turns`` when the ``max_turns`` argument was ``None``.
        """

    def new_game(self) -> None:
        """Set up a fresh game from ``self.rng``."""
        raise NotImplementedError

    def instructions(self) -> str:
        """The rules, the action format and the turn budget (shown at reset)."""
        raise NotImplementedError

    def render(self) -> str:
        """The current view of the game (board, guesses so far, ...)."""
        raise NotImplementedError

    def parse_move(self, content: str) -> Any | None:
        """Turn the box content into a move, or ``None`` for a format error.

        Must run in linear time on any text (read it with `MoveScanner`, `str.split`,
        ...; no regex with adjacent or nested unbounded runs). It may raise `ValueError`,
        `TypeError` or `OverflowError`, which also count as a format error.
        """
        raise NotImplementedError

    def apply_move(self, move: Any) -> MoveResult | tuple[str, float]:
        """Validate and apply a parsed move.

        Returns:
            A `MoveResult`; or, for a valid move that does not end the game, the pair
            ``(feedback, reward)``, short for ``MoveResult(feedback, reward)`` and cheaper
            on the hot path.
        """
        raise NotImplementedError

    def state_summary(self) -> str:
        """A compact summary of the episode so far (for the ``summary`` history format)."""
        return self.render()

    def observe(self, feedback: str) -> str:
        """The observation after a move that does not end the game: ``feedback``, a blank
        line, then `render`. A game may override it to build the same text in one go."""
        return f"{feedback}\n\n{self.render()}"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Whether `step` calls `observe` or builds its default text inline (one call fewer).
        cls._own_observe = cls.observe is not LanguageGame.observe
        cls._fast_step = "step" in cls.__dict__ and LanguageGame in cls.__bases__

    def format_hint(self) -> str:
        """One line telling the agent the expected action format."""
        return r"Put your move in \boxed{...}."

    # --- the Env API --------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self._max_turns_arg is not None:
            self.max_turns = self._max_turns_arg
        self.configure()
        self.turn = 0
        self.done = False
        self.success = False
        self.new_game()
        return f"{self.instructions()}\n\n{self.render()}", {"turn": 0, "success": False}

    def step(self, action: str):
        if self.done and self._step_after_end is not None:
            self._step_after_end()  # raises: the episode of the wrapping stack has ended
        self.turn = turn = self.turn + 1
        # No length limit here: an over-long box is reported as unreadable, not skipped.
        # The fast path of `extract_boxed`, inline (a flat last box: the common move).
        if type(action) is str:
            _, opener, tail = action.rpartition("\\boxed{")
            if opener and "\\" not in tail:
                content, close, _ = tail.partition("}")
                if not close or "{" in content:
                    content = extract_boxed(action, None)
            else:
                content = extract_boxed(action, None)
        else:
            content = None
        if content is None or len(content) > MAX_BOX_CHARS:
            return self._format_error(action, content)
        try:
            move = self.parse_move(content)
        except (ValueError, TypeError, OverflowError):
            move = None
        if move is None:
            return self._format_error(action, content)

        return self._conclude(turn, content, self.apply_move(move))

    def _end_fast_turn(self, turn: int, obs: str, reward: float, invalid: bool, content: str):
        """The return of a one-frame `step` (a subclass's) for a move that does not end the
        game: what `_conclude` returns for it, the turn budget's truncation included."""
        self.success = False
        max_turns = self.max_turns
        if turn >= max_turns:
            self.done = truncated = True
            obs = f"{obs}\n\nYou have used all {max_turns} turns. Game over."
        else:
            truncated = False
        info = {
            "success": False,
            "turn": turn,
            "format_error": False,
            "invalid_action": invalid,
            "parsed_action": content,
        }
        return obs, reward, False, truncated, info

    def _conclude(self, turn: int, content: str, result: Any):
        """The step's return for ``result``, what `apply_move` returned at ``turn``."""
        if type(result) is tuple:  # (feedback, reward): a valid move that does not end the game
            feedback, reward = result
            terminated = invalid = False
        else:
            feedback, reward, terminated, invalid = (
                result.feedback, result.reward, result.terminated, result.invalid
            )
        if terminated:
            self.success = success = bool(result.success)
            self.done = True
            obs = feedback
            truncated = False
        else:
            self.success = success = False
            truncated = turn >= self.max_turns
            self.done = truncated
            obs = self.observe(feedback) if self._own_observe else f"{feedback}\n\n{self.render()}"
            if truncated:
                obs = f"{obs}\n\nYou have used all {self.max_turns} turns. Game over."
        info = {
            "success": success,
            "turn": turn,
            "format_error": False,
            "invalid_action": invalid,
            "parsed_action": content,
        }
        return obs, reward if type(reward) is float else float(reward), terminated, truncated, info

    def _format_error(self, action: Any, content: str | None):
        if not isinstance(action, str):
            why = f"the action must be text, got {type(action).__name__}"
        elif content is None:
            why = r"no complete \boxed{...} found"
        else:
            shown = content if len(content) <= 40 else content[:37] + "..."
            why = f"could not read a move from \\boxed{{{shown}}}"
        info = {
            "success": False,
            "turn": self.turn,
            "format_error": True,
            "invalid_action": True,
        }
        if self.format_error == "terminate":
            self.done = True
            obs = f"Format error at turn {self.turn}: {why}. Game over. {self.format_hint()}"
            return obs, self.format_penalty, True, False, info
        truncated = self.turn >= self.max_turns
        self.done = truncated
        obs = f"Format error at turn {self.turn}: {why}. {self.format_hint()}\n\n{self.render()}"
        if truncated:
            obs = f"{obs}\n\nYou have used all {self.max_turns} turns. Game over."
        return obs, self.format_penalty, False, truncated, info

    def sample_random_action(self) -> str:
        raise NotImplementedError
