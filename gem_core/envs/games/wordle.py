"""Wordle: guess a hidden word from green/yellow/grey letter feedback."""

from __future__ import annotations

from collections import Counter

from gem_core.envs.games import words
from gem_core.envs.games.base import LanguageGame, MoveResult
from gem_core.errors import InvalidArgument

__all__ = ["WordleEnv", "score_word", "oracle"]


def score_word(secret: str, guess: str) -> str:
    """The feedback string of ``guess`` against ``secret`` (same length), one letter a position.

    ``G``: right letter, right place. ``Y``: the letter is in the word elsewhere. ``X``:
    not in the word — or all its copies in the word are already accounted for: greens are
    matched first, then yellows left to right, each copy of a secret letter used once.

    >>> score_word("ABBEY", "BABES")
    'YYGGX'
    >>> score_word("ABBEY", "KEBAB")
    'XYGYY'
    >>> score_word("ABBEY", "BOBBY")
    'YXGXG'
    """
    fb = ["X"] * len(guess)
    unmatched: dict[str, int] = {}
    for i, (s, g) in enumerate(zip(secret, guess, strict=True)):
        if s == g:
            fb[i] = "G"
        else:
            unmatched[s] = unmatched.get(s, 0) + 1
    if unmatched:
        for i, g in enumerate(guess):
            if fb[i] == "X" and unmatched.get(g, 0) > 0:
                fb[i] = "Y"
                unmatched[g] -= 1
    return "".join(fb)


class WordleEnv(LanguageGame):
    r"""Guess a hidden English word of ``word_length`` letters.

    Observation: the rules at reset; then the feedback for the last guess and every
        guess so far with its feedback, one letter a position: ``G`` right letter in the
        right place, ``Y`` in the word elsewhere, ``X`` not in the word (repeated letters:
        greens first, then yellows left to right, each copy in the word used once).
    Action: ``\boxed{WORD}`` (letters only, any case; spaces between letters are
        ignored). Anything else in the box is a format error.
    Rewards: 1.0 for the hidden word (terminates, success). Another valid guess pays
        ``progress_scale / word_length`` for each position turned green for the first
        time; over an episode these progress rewards sum to at most ``progress_scale``
        (default 0.1; every position green at some point without a win), and to at most
        ``progress_scale * (word_length - 1) / word_length`` in a won episode, since the
        winning guess pays exactly 1.0. A guess of the wrong length, a repeated guess and
        (with ``only_real_words``) a word not in the word list are invalid moves
        (``invalid_penalty``, default 0.0, no state change). A format error pays
        ``format_penalty`` (-0.1) and ends the episode by default.
    Episode end: terminated on the right word; truncated after ``max_turns`` turns.
    Arguments:
        word_length: letters in the hidden word (``None``: 3-5, drawn at each reset).
        only_real_words: accept only guesses from the word list (the common secret words
            plus a public-domain dictionary); otherwise any letters of the right length.
        max_turns: turn budget (``None``: 5 x word_length).
        progress_scale: bound of the total progress reward of one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Variants: easy 3 letters in 15 turns; hard 5 letters in 25 turns; random 3-5 letters
        in 5 x length turns.
    Word lists: secrets from ``words("common", n)``, guesses checked against that plus
        ``words("web2", n)`` (`gem_core.envs.games.words`; shipped, offline).
    Version history: v0 — the reference GEM's ids and settings; ``only_real_words`` is
        enforced (the reference accepted any letters); progress pays first-time greens.
    """

    title = "Wordle"

    def __init__(
        self,
        word_length: int | None = 5,
        only_real_words: bool = True,
        max_turns: int | None = 20,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        if word_length is not None:
            if isinstance(word_length, bool) or not isinstance(word_length, int) or not words.words("common", word_length):
                available = [n for n in words.lengths("common")]
                raise InvalidArgument(f"word_length must be one of {available} or None, got {word_length!r}")
        self._length_arg = word_length
        self.word_length = word_length or 5
        self.only_real_words = bool(only_real_words)
        self.progress_scale = float(progress_scale)
        self.secret = ""
        self.guesses: list[tuple[str, str]] = []
        self._seen: set[str] = set()
        self._green: list[bool] = []
        self._history = ""
        self._episode = object()

    def configure(self) -> None:
        length = self._length_arg
        if length is None:
            length = self.rng.randint(3, 5)
        self.word_length = length
        if self._max_turns_arg is None:
            self.max_turns = 5 * length

    @property
    def answers(self) -> tuple[str, ...]:
        """The possible secret words of the current length."""
        return words.words("common", self.word_length)

    def is_valid_word(self, word: str) -> bool:
        """Whether ``word`` (upper-case, right length) is an accepted guess."""
        n = self.word_length
        return (not self.only_real_words) or word in words.word_set("common", n) or word in words.word_set("web2", n)

    def new_game(self) -> None:
        self.secret = self.rng.choice(self.answers)
        self.guesses = []
        self._seen = set()
        self._green = [False] * self.word_length
        self._history = ""
        self._episode = object()

    # --- text -------------------------------------------------------------------------
    def instructions(self) -> str:
        n = self.word_length
        return (
            f"You are playing {self.title}. Guess the secret {n}-letter English word within "
            f"{self.max_turns} turns. After each guess every letter is marked: G (green) right "
            "letter in the right position, Y (yellow) the letter is in the word at another "
            "position, X (grey) the letter is not in the word (for repeated letters, each "
            "copy in the secret is matched once, greens first). "
            + ("Guesses must be English words. " if self.only_real_words else "")
            + f"Give each guess as \\boxed{{WORD}}, for example \\boxed{{{self.answers[0]}}}."
        )

    def format_hint(self) -> str:
        return f"Give your guess as a {self.word_length}-letter word in \\boxed{{...}}, letters only."

    def render(self) -> str:
        if not self.guesses:
            return "No guesses yet. Enter your first guess."
        return f"Guesses so far:{self._history}\nEnter your next guess."

    def state_summary(self) -> str:
        return (
            f"Wordle, {self.word_length} letters, turn {self.turn}/{self.max_turns}. " + self.render()
        )

    # --- moves ------------------------------------------------------------------------
    def parse_move(self, content: str) -> str | None:
        word = "".join(content.split())
        if not word or not word.isascii() or not word.isalpha():
            return None
        return word.upper()

    def apply_move(self, guess: str) -> MoveResult:
        t = self.turn
        shown = guess if len(guess) <= 20 else guess[:17] + "..."
        if len(guess) != self.word_length:
            return MoveResult(
                f"Turn {t}: {shown} has {len(guess)} letters; the secret word has {self.word_length}.",
                self.invalid_penalty,
                invalid=True,
            )
        if guess in self._seen:
            return MoveResult(f"Turn {t}: you already guessed {guess}.", self.invalid_penalty, invalid=True)
        if not self.is_valid_word(guess):
            return MoveResult(
                f"Turn {t}: {guess} is not in the word list; guess an English word.",
                self.invalid_penalty,
                invalid=True,
            )
        self._seen.add(guess)
        fb = score_word(self.secret, guess)
        self.guesses.append((guess, fb))
        self._history += f"\n{len(self.guesses)}. {' '.join(guess)}\n   {' '.join(fb)}"
        if guess == self.secret:
            return MoveResult(
                f"Correct! The word was {self.secret}; found in {t} turns.", 1.0, terminated=True, success=True
            )
        new = 0
        for i, f in enumerate(fb):
            if f == "G" and not self._green[i]:
                self._green[i] = True
                new += 1
        return MoveResult(
            f"Turn {t}: {guess} -> {fb}.", self.progress_scale * new / self.word_length
        )

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(self.answers)}}}"


# Up to this many candidates the oracle scores guesses by the partitions they make.
_PARTITION_LIMIT = 60


def oracle(env: WordleEnv) -> str:
    """Filter the possible secrets by all feedback so far and guess a consistent word.

    The candidate set (cached on the env within an episode) holds the secret words that
    would have produced every feedback seen. With few candidates left it guesses the
    candidate whose feedback splits the rest into the smallest expected group; otherwise
    the candidate with the most common distinct letters (by position and presence).
    """
    env = env.unwrapped  # accept a wrapped env too
    state = getattr(env, "_oracle_state", None)
    if state is None or state[0] is not env._episode or state[1] > len(env.guesses):
        state = (env._episode, 0, env.answers)
    _, done, cands = state
    for guess, fb in env.guesses[done:]:
        cands = tuple(c for c in cands if score_word(c, guess) == fb)
    env._oracle_state = (env._episode, len(env.guesses), cands)
    if not cands:  # the secret is always a candidate; stay well-formed regardless
        return env.sample_random_action()
    if len(cands) <= 2:
        return f"\\boxed{{{cands[0]}}}"
    if len(cands) <= _PARTITION_LIMIT:
        def spread(g: str) -> int:
            return sum(v * v for v in Counter(score_word(c, g) for c in cands).values())

        return f"\\boxed{{{min(cands, key=spread)}}}"
    presence = Counter(ch for c in cands for ch in set(c))
    positional = Counter((i, ch) for c in cands for i, ch in enumerate(c))

    def freq(w: str) -> int:
        return sum(presence[ch] for ch in set(w)) + sum(positional[(i, ch)] for i, ch in enumerate(w))

    return f"\\boxed{{{max(cands, key=freq)}}}"
