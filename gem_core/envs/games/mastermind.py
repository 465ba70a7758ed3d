"""Mastermind: crack a secret code of digits from black/white peg feedback."""

from __future__ import annotations

import itertools
from collections import Counter
from functools import lru_cache
from operator import eq

from gem_core.envs.games.base import MAX_BOX_CHARS, LanguageGame, MoveResult
from gem_core.errors import InvalidArgument

__all__ = ["MastermindEnv", "score_guess", "oracle", "RANDOM_CONFIGS"]

# (code_length, num_numbers, max_turns) drawn uniformly by the -random variant (the reference's).
RANDOM_CONFIGS: tuple[tuple[int, int, int], ...] = ((2, 6, 10), (4, 6, 20), (4, 8, 30))
# Guess -> its text ("1 2 3 4"), shared by all envs of the process (bounded), and back
# (guesses of two or more digits: their text has a space, so it parses the same way
# whatever the number range).
_SHOWN: dict[tuple[int, ...], str] = {}
_PARSED: dict[str, tuple[int, ...]] = {}


def score_guess(code: tuple[int, ...], guess: tuple[int, ...]) -> tuple[int, int]:
    """``(black, white)`` pegs of ``guess`` against ``code`` (equal lengths).

    Black: right digit in the right place. White: right digit in the wrong place, each
    digit of the code matched at most once.

    >>> score_guess((1, 2, 3, 4), (1, 3, 2, 2))
    (1, 2)
    """
    black = 0
    for a, b in zip(code, guess, strict=True):
        if a == b:
            black += 1
    if len(set(code)) == len(code) and len(set(guess)) == len(guess):
        common = len(set(code).intersection(guess))
    else:
        cc, gc = Counter(code), Counter(guess)
        common = sum(min(n, gc[d]) for d, n in cc.items())
    return black, common - black


class MastermindEnv(LanguageGame):
    r"""Guess a secret code of ``code_length`` digits in ``1..num_numbers``.

    Observation: the rules at reset; then the pegs for the last guess followed by every
        guess so far with its pegs.
    Action: ``\boxed{d1 d2 ... dL}``, the digits separated by spaces or commas (when all
        digits are single-digit, ``\boxed{1234}`` is read too). Box content that is not a
        list of integers is a format error.
    Rewards: 1.0 for cracking the code (terminates, success). A new valid guess whose
        black pegs beat the best so far pays ``progress_scale * (new best - old best) /
        code_length``; over an episode these progress rewards sum to at most
        ``progress_scale * (code_length - 1) / code_length`` < ``progress_scale`` (default
        0.1), since the winning guess pays exactly 1.0. Wrong length, digits out of range
        and repeated guesses are invalid moves (``invalid_penalty``, default 0.0, no state
        change). A format error pays ``format_penalty`` (-0.1) and ends the episode by
        default (``format_error="retry"`` lets the agent go on).
    Episode end: terminated when the code is cracked; truncated after ``max_turns`` turns.
    Arguments:
        code_length: digits in the code (``None``: drawn at each reset, -random).
        num_numbers: digits range over ``1..num_numbers`` (``None``: drawn, -random).
        duplicate_numbers: whether the secret code may repeat a digit. Guesses may repeat
            digits either way.
        max_turns: turn budget (``None``: drawn with the -random configuration, else 20).
        progress_scale: bound of the total progress reward of one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Variants: easy 2 digits of 1-6 in 10 turns; hard 4 digits of 1-8 in 30 turns; random
        one of (2, 6, 10), (4, 6, 20), (4, 8, 30) (length, digits, turns) per reset; no
        duplicate digits in the code.
    Version history: v0 — the reference GEM's ids and settings; guesses may repeat
        digits; progress pays only improvements of the best black-peg count.
    """

    title = "Mastermind"

    def __init__(
        self,
        code_length: int | None = 4,
        num_numbers: int | None = 6,
        duplicate_numbers: bool = False,
        max_turns: int | None = 20,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        for name, value in (("code_length", code_length), ("num_numbers", num_numbers)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidArgument(f"{name} must be a positive int or None, got {value!r}")
        if (
            code_length is not None
            and num_numbers is not None
            and not duplicate_numbers
            and code_length > num_numbers
        ):
            raise InvalidArgument(
                f"a code of {code_length} distinct digits needs num_numbers >= {code_length}, "
                f"got {num_numbers}; lower code_length or set duplicate_numbers=True"
            )
        self._config_arg = (code_length, num_numbers)
        self.code_length = code_length or 2
        self.num_numbers = num_numbers or 6
        self.duplicate_numbers = bool(duplicate_numbers)
        self.progress_scale = float(progress_scale)
        self.code: tuple[int, ...] = ()
        self.guesses: list[tuple[tuple[int, ...], int, int]] = []
        self.best_black = 0
        self._seen: set[tuple[int, ...]] = set()
        self._history = ""
        self._episode = object()  # identifies the episode (oracle cache key)
        self._code_of: tuple[int, ...] | None = None
        self._code_set: set[int] | None = None

    # --- configuration and setup ------------------------------------------------------
    def configure(self) -> None:
        length, numbers = self._config_arg
        if length is None or numbers is None:
            length, numbers, turns = self.rng.choice(RANDOM_CONFIGS)
            if self._max_turns_arg is None:
                self.max_turns = turns
        elif self._max_turns_arg is None:
            self.max_turns = 20
        self.code_length, self.num_numbers = length, numbers

    def new_game(self) -> None:
        digits = range(1, self.num_numbers + 1)
        if self.duplicate_numbers:
            self.code = tuple(self.rng.choices(digits, k=self.code_length))
        else:
            self.code = tuple(self.rng.sample(digits, self.code_length))
        self.guesses = []
        self._seen = set()
        self.best_black = 0
        self._history = ""
        self._episode = object()

    # --- text -------------------------------------------------------------------------
    def instructions(self) -> str:
        example = " ".join(str(d) for d in range(1, self.code_length + 1))
        return (
            f"You are playing {self.title}. Guess the secret code of {self.code_length} digits, "
            f"each from 1 to {self.num_numbers}, within {self.max_turns} turns. Digits in the "
            f"code {'may' if self.duplicate_numbers else 'do not'} repeat. After each guess you "
            "get black and white pegs: a black peg for each right digit in the right position, "
            "a white peg for each right digit in the wrong position. Give each guess as the "
            f"digits separated by spaces in \\boxed{{...}}, for example \\boxed{{{example}}}."
        )

    def format_hint(self) -> str:
        return (
            f"Give your guess as {self.code_length} digits separated by spaces, "
            f"e.g. \\boxed{{{' '.join('1' * self.code_length)}}}."
        )

    def render(self) -> str:
        if not self.guesses:
            return "No guesses yet. Enter your first guess."
        return f"Guesses so far:{self._history}\nEnter your next guess."

    def state_summary(self) -> str:
        return (
            f"Mastermind: {self.code_length} digits of 1-{self.num_numbers}, "
            f"turn {self.turn}/{self.max_turns}. " + self.render()
        )

    # --- moves ------------------------------------------------------------------------
    def step(self, action: str):
        # The common move in one frame: a flat last box holding a guess already seen in this
        # process in its own spelling ("1 2 3 4"), in range, new in the episode and wrong. It
        # returns exactly what LanguageGame.step returns for it
        # (tests/envs/games/test_mastermind.py plays both side by side). Another readable
        # guess of that spelling (a repeat, out of range, the code) skips only the parsing;
        # any other action (a format error, other spellings, a finished episode, a subclass)
        # goes there.
        if type(action) is str and not self.done and self._fast_step:
            _, opener, tail = action.rpartition("\\boxed{")
            content, close, _ = tail.partition("}")
            guess = _PARSED.get(content) if opener and close and "\\" not in tail and len(content) <= MAX_BOX_CHARS else None
            if guess is not None:
                self.turn = turn = self.turn + 1
                code = self.code
                black = sum(map(eq, code, guess))
                valid = _valid_codes(self.code_length, self.num_numbers)
                if valid is None or guess not in valid or guess in self._seen or black == self.code_length:
                    return self._conclude(turn, content, self.apply_move(guess))
                self._seen.add(guess)
                if self._code_of is not code:  # the code's digits, when none repeats (cached)
                    digits = set(code)
                    self._code_of, self._code_set = code, digits if len(digits) == len(code) else None
                distinct = set(guess)
                if self._code_set is not None and len(distinct) == len(guess):
                    white = len(self._code_set & distinct) - black
                else:
                    white = score_guess(code, guess)[1]
                guesses = self.guesses
                guesses.append((guess, black, white))
                self._history = history = f"{self._history}\n{len(guesses)}. {content} -> {black} black, {white} white"
                reward = 0.0
                if black > self.best_black:
                    reward = self.progress_scale * (black - self.best_black) / self.code_length
                    self.best_black = black
                obs = (
                    f"Turn {turn}: your guess {content} gets {black} black peg(s) and {white} white peg(s)."
                    f"\n\nGuesses so far:{history}\nEnter your next guess."
                )
                return self._end_fast_turn(turn, obs, reward, False, content)
        return LanguageGame.step(self, action)

    def parse_move(self, content: str) -> tuple[int, ...] | None:
        tokens = content.replace(",", " ").split()
        if not tokens:
            return None
        if len(tokens) == 1 and len(tokens[0]) > 1 and self.num_numbers <= 9 and tokens[0].isdigit():
            tokens = list(tokens[0])  # "1234" -> 1 2 3 4
        if len(tokens) > 64:
            return None
        return tuple(map(int, tokens))

    def apply_move(self, guess: tuple[int, ...]) -> MoveResult | tuple[str, float]:
        valid = _valid_codes(self.code_length, self.num_numbers)
        if valid is not None:
            ok = guess in valid
        else:
            ok = len(guess) == self.code_length and min(guess) >= 1 and max(guess) <= self.num_numbers
        if not ok:
            return self._invalid_guess(guess)
        shown = _SHOWN.get(guess)
        if shown is None:
            shown = " ".join(map(str, guess))
            if len(_SHOWN) < 50_000:
                _SHOWN[guess] = shown
                if len(guess) > 1:
                    _PARSED[shown] = guess
        if guess in self._seen:
            return MoveResult(f"Turn {self.turn}: you already guessed {shown}.", self.invalid_penalty, invalid=True)
        self._seen.add(guess)
        code = self.code
        black = sum(map(eq, code, guess))
        if self._code_of is not code:  # the code's digits, when none repeats (cached)
            digits = set(code)
            self._code_of, self._code_set = code, digits if len(digits) == len(code) else None
        distinct = set(guess)
        if self._code_set is not None and len(distinct) == len(guess):
            white = len(self._code_set & distinct) - black  # no repeats: a set intersection
        else:
            white = score_guess(code, guess)[1]
        self.guesses.append((guess, black, white))
        self._history += f"\n{len(self.guesses)}. {shown} -> {black} black, {white} white"
        if black == self.code_length:
            return MoveResult(
                f"Correct! The code was {shown}; cracked in {self.turn} turns.", 1.0, terminated=True, success=True
            )
        reward = 0.0
        if black > self.best_black:
            reward = self.progress_scale * (black - self.best_black) / self.code_length
            self.best_black = black
        return (  # MoveResult(feedback, reward), the cheap way
            f"Turn {self.turn}: your guess {shown} gets {black} black peg(s) and {white} white peg(s).", reward
        )

    def _invalid_guess(self, guess: tuple[int, ...]) -> MoveResult:
        shown = " ".join(map(str, guess))
        if len(shown) > 60:
            shown = f"{len(guess)} numbers"
        if len(guess) != self.code_length:
            why = f"has {len(guess)} digits but the code has {self.code_length}"
        else:
            why = f"has digits outside 1-{self.num_numbers}"
        return MoveResult(f"Turn {self.turn}: your guess ({shown}) {why}.", self.invalid_penalty, invalid=True)

    def sample_random_action(self) -> str:
        digits = self.rng.sample(range(1, self.num_numbers + 1), min(self.code_length, self.num_numbers))
        while len(digits) < self.code_length:
            digits.append(self.rng.randint(1, self.num_numbers))
        return "\\boxed{" + " ".join(map(str, digits)) + "}"


@lru_cache(maxsize=16)
def _valid_codes(length: int, numbers: int) -> frozenset[tuple[int, ...]] | None:
    """Every in-range guess of the right length (repeats allowed), when there are few."""
    if numbers**length > 50_000:
        return None
    return frozenset(itertools.product(range(1, numbers + 1), repeat=length))


@lru_cache(maxsize=16)
def _all_codes(length: int, numbers: int, duplicates: bool) -> tuple[tuple[int, ...], ...]:
    digits = range(1, numbers + 1)
    if duplicates:
        return tuple(itertools.product(digits, repeat=length))
    return tuple(itertools.permutations(digits, length))


# Above this many consistent codes the oracle takes the first one instead of a minimax pick.
_MINIMAX_LIMIT = 120


def oracle(env: MastermindEnv) -> str:
    """A consistent-code solver: always guess a code that agrees with every peg count so far.

    Keeps the candidate set (cached on the env between calls of one episode). While it
    is small it picks, among the candidates, Knuth's minimax guess (the one whose worst
    peg answer leaves the fewest candidates); otherwise the first candidate. Never repeats
    a guess, so every move is valid.
    """
    env = env.unwrapped  # accept a wrapped env too
    state = getattr(env, "_oracle_state", None)
    if state is None or state[0] is not env._episode or state[1] > len(env.guesses):
        state = (env._episode, 0, _all_codes(env.code_length, env.num_numbers, env.duplicate_numbers))
    _, done, cands = state
    for guess, black, white in env.guesses[done:]:
        cands = tuple(c for c in cands if score_guess(c, guess) == (black, white))
    env._oracle_state = (env._episode, len(env.guesses), cands)
    if not cands:  # only if the env's feedback were inconsistent; stay well-formed
        return env.sample_random_action()
    pick = cands[0]
    if 2 < len(cands) <= _MINIMAX_LIMIT:
        best = len(cands) + 1
        for g in cands:
            worst = max(Counter(score_guess(c, g) for c in cands).values())
            if worst < best:
                best, pick = worst, g
    return "\\boxed{" + " ".join(map(str, pick)) + "}"
