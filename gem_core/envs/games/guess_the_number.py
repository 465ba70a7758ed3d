"""Guess The Number: find a hidden integer from higher/lower hints."""

from __future__ import annotations

import math

from gem_core.envs.games.base import LanguageGame, MoveResult
from gem_core.errors import InvalidArgument

__all__ = ["GuessTheNumberEnv", "oracle"]

# Box contents that `int` reads as 0-1023 and `str` writes back the same way.
_SMALL_INTS = {str(i): i for i in range(1024)}


class GuessTheNumberEnv(LanguageGame):
    r"""Guess a hidden integer in ``[min_number, max_number]``; each guess gets a hint.

    Observation: the rules at reset; then the hint for the last guess and the list of
        guesses so far with their hints.
    Action: ``\boxed{N}`` with N an integer.
    Rewards: 1.0 for the correct number (terminates, success). A wrong in-range guess
        that narrows the interval pays ``progress_scale * (removed / initial size)``;
        summed over an episode these progress rewards stay in ``[0, progress_scale]``
        (default 0.1, so they never outweigh winning). Repeated or out-of-range guesses
        are invalid moves (``invalid_penalty``, default 0.0; no state change). A format
        error pays ``format_penalty`` (-0.1) and ends the episode by default.
    Episode end: terminated on the right guess; truncated after ``max_turns`` turns.
    Arguments:
        min_number, max_number: the range (``None``: drawn at each reset, -random).
        max_turns: turn budget (``None``: ⌈log₂(range size)⌉ + 2 at each reset).
        progress_scale: total progress reward available in one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Variants: easy 1–10 in 4 turns; hard 1–50 in 7 turns; random: min in [1, 10], max
        in [min + 5, min + 50].
    Version history: v0 — the reference GEM's ids and ranges.
    """

    title = "Guess The Number"

    def __init__(
        self,
        min_number: int | None = 1,
        max_number: int | None = 20,
        max_turns: int | None = 20,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        if (min_number is None) != (max_number is None):
            raise InvalidArgument("min_number and max_number must both be set or both be None")
        if min_number is not None and not (isinstance(min_number, int) and isinstance(max_number, int) and min_number < max_number):
            raise InvalidArgument(f"need integers min_number < max_number, got {min_number!r}, {max_number!r}")
        self._range_arg = (min_number, max_number)
        self.min_number = min_number or 1
        self.max_number = max_number or 2
        self.progress_scale = float(progress_scale)
        self.target = self.min_number
        self.low = self.min_number
        self.high = self.max_number
        self._guessed: dict[int, str] = {}  # guess -> hint, in the order guessed
        self._history = ""  # "g (hint), ..." kept up to date, so render is O(1)
        self._size = self.max_number - self.min_number + 1

    def configure(self) -> None:
        lo, hi = self._range_arg
        if lo is None:
            lo = self.rng.randint(1, 10)
            hi = self.rng.randint(lo + 5, lo + 50)
        self.min_number, self.max_number = lo, hi
        if self._max_turns_arg is None:
            self.max_turns = math.ceil(math.log2(hi - lo + 1)) + 2

    def new_game(self) -> None:
        self.target = self.rng.randint(self.min_number, self.max_number)
        self.low, self.high = self.min_number, self.max_number
        self._size = self.max_number - self.min_number + 1
        self._guessed = {}
        self._history = ""

    def instructions(self) -> str:
        return (
            f"You are playing {self.title}. Find the hidden integer between {self.min_number} "
            f"and {self.max_number} (inclusive) within {self.max_turns} turns. After each guess "
            "you are told whether the target is higher or lower. Give each guess as \\boxed{N}, "
            f"for example \\boxed{{{(self.min_number + self.max_number) // 2}}}."
        )

    def format_hint(self) -> str:
        return r"Give your guess as \boxed{N} with N an integer."

    def render(self) -> str:
        history = self._history
        if not history:
            return "No guesses yet. Enter your first guess."
        return f"Guesses so far: {history}. Enter your next guess."

    def observe(self, feedback: str) -> str:
        history = self._history  # render(), in the same string
        if not history:
            return f"{feedback}\n\nNo guesses yet. Enter your first guess."
        return f"{feedback}\n\nGuesses so far: {history}. Enter your next guess."

    def state_summary(self) -> str:
        return f"Range {self.min_number}-{self.max_number}; target in [{self.low}, {self.high}]. " + self.render()

    def step(self, action: str):
        # The common move in one frame: a flat last box holding a short integer that is a
        # new, in-range, wrong guess. It returns exactly what LanguageGame.step returns for
        # it (tests/envs/games/test_guess_the_number.py plays both side by side). Another
        # readable guess (a repeat, the target, out of range) skips only the parsing; any
        # other action (a format error, a finished episode, a subclass) goes there.
        if type(action) is str and not self.done and self._fast_step:
            _, opener, tail = action.rpartition("\\boxed{")
            content, close, _ = tail.partition("}")
            if opener and close and len(content) <= 30 and "\\" not in tail and "{" not in content:
                guess = _SMALL_INTS.get(content)  # the usual guess, without int() and str()
                if guess is not None:
                    text = content
                else:
                    try:
                        guess = self.parse_move(content)
                    except ValueError:
                        guess = None
                    text = str(guess)
                if guess is not None:
                    self.turn = turn = self.turn + 1
                    target = self.target
                    if guess == target or guess in self._guessed or not self.min_number <= guess <= self.max_number:
                        return self._conclude(turn, content, self.apply_move(guess))
                    hint, reward = self._narrow(guess, text, target)
                    obs = (
                        f"Turn {turn}: you guessed {text}; the target is {hint} than {text}.\n\n"
                        f"Guesses so far: {self._history}. Enter your next guess."
                    )
                    return self._end_fast_turn(turn, obs, reward, False, content)
        return LanguageGame.step(self, action)

    @property
    def guesses(self) -> list[tuple[int, str]]:
        """The valid guesses of this episode with their hints (``"correct"`` last if found)."""
        return list(self._guessed.items())

    def parse_move(self, content: str) -> int | None:
        # int() skips surrounding whitespace itself (and raises ValueError on empty text).
        if len(content) > 30:
            content = content.strip()
            if len(content) > 30:
                return None
        return int(content)

    def apply_move(self, guess: int) -> MoveResult | tuple[str, float]:
        # Positional MoveResult arguments and few attribute reads: this runs every turn.
        if guess in self._guessed:  # (a guessed number is in range)
            return MoveResult(
                f"Turn {self.turn}: you already guessed {guess}.", self.invalid_penalty, False, False, True
            )
        if guess < self.min_number or guess > self.max_number:
            return MoveResult(
                f"Turn {self.turn}: {guess} is outside the range {self.min_number}-{self.max_number}.",
                self.invalid_penalty,
                False,
                False,
                True,
            )
        target = self.target
        if guess == target:
            self._record(guess, "correct")
            return MoveResult(
                f"Correct! The number was {target}; found in {self.turn} turns.", 1.0, True, True
            )
        text = str(guess)
        hint, reward = self._narrow(guess, text, target)
        return f"Turn {self.turn}: you guessed {text}; the target is {hint} than {text}.", reward

    def _narrow(self, guess: int, text: str, target: int) -> tuple[str, float]:
        """A new, in-range, wrong guess (``text`` is ``str(guess)``): narrow the interval,
        record the guess, and return ``(hint, progress reward)``."""
        low, high = self.low, self.high
        if guess < target:
            hint = "higher"
            if guess >= low:
                self.low = guess + 1
                removed = guess + 1 - low
            else:
                removed = 0
        else:
            hint = "lower"
            if guess <= high:
                self.high = guess - 1
                removed = high - guess + 1
            else:
                removed = 0
        # _record, inline (with the text already made): this is the common move.
        self._guessed[guess] = hint
        history = self._history
        self._history = f"{history}, {text} ({hint})" if history else f"{text} ({hint})"
        return hint, self.progress_scale * removed / self._size

    def _record(self, guess: int, hint: str) -> None:
        self._guessed[guess] = hint
        history = self._history
        self._history = f"{history}, {guess} ({hint})" if history else f"{guess} ({hint})"

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(self.min_number, self.max_number)}}}"


def oracle(env: GuessTheNumberEnv) -> str:
    """Binary search over the interval still consistent with the hints."""
    return f"\\boxed{{{(env.low + env.high) // 2}}}"
