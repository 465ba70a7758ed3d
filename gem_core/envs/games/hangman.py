"""Hangman: guess a hidden word letter by letter (or all at once)."""

from __future__ import annotations

from collections import Counter

from gem_core.envs.games import words
from gem_core.envs.games.base import LanguageGame, MoveResult

__all__ = ["HangmanEnv", "oracle", "RANDOM_CONFIGS"]

# (word_length, max_turns) drawn uniformly by the -random variant (the reference's).
RANDOM_CONFIGS: tuple[tuple[int, int], ...] = ((3, 10), (5, 15), (7, 20))
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class HangmanEnv(LanguageGame):
    r"""Guess a hidden English word of ``word_length`` letters.

    There are no lives: every guess, right or wrong, uses one of ``max_turns`` turns
    (the reference's rules).

    Observation: the rules at reset; then the result of the last guess, the word with
        the found letters shown and ``_`` for the others, the letters guessed so far and
        the wrong whole-word guesses.
    Action: ``\boxed{L}`` guesses one letter (every copy of it in the word is revealed);
        ``\boxed{WORD}`` guesses the whole word. Letters only, any case (spaces between
        letters are ignored); anything else in the box is a format error.
    Rewards: 1.0 for completing the word, by the last missing letter or a right
        whole-word guess (terminates, success). A right letter that does not complete
        the word pays ``progress_scale * positions revealed / word_length``; over an
        episode these progress rewards sum to at most ``progress_scale * (word_length -
        1) / word_length`` < ``progress_scale`` (default 0.1). A wrong letter or a wrong
        whole word pays 0. A letter or word guessed before, and a whole word of the wrong
        length, are invalid moves (``invalid_penalty``, default 0.0, no state change). A
        format error pays ``format_penalty`` (-0.1) and ends the episode by default.
    Episode end: terminated when the word is complete; truncated after ``max_turns``.
    Arguments:
        word_length: letters in the hidden word (``None``: drawn at each reset, -random).
        hardcore: draw the word from a large dictionary (``words("web2", n)``, 3-7
            letters, many rare words) instead of the common-word list.
        max_turns: turn budget (``None``: drawn with the -random configuration, else 20).
        progress_scale: bound of the total progress reward of one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Variants: easy 3 letters in 10 turns; hard 7 letters in 20 turns; random one of
        (3, 10), (5, 15), (7, 20) (letters, turns) per reset; common words.
    Version history: v0 — the reference GEM's ids and settings; a completed word pays
        1.0 however it was completed; progress is scaled to ``progress_scale``.
    """

    title = "Hangman"

    def __init__(
        self,
        word_length: int | None = 5,
        hardcore: bool = False,
        max_turns: int | None = 20,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        self.word_list = "web2" if hardcore else "common"
        if word_length is not None:
            if isinstance(word_length, bool) or not isinstance(word_length, int) or not words.words(self.word_list, word_length):
                raise ValueError(
                    f"word_length must be one of {list(words.lengths(self.word_list))} or None "
                    f"(word list {self.word_list!r}), got {word_length!r}"
                )
        self.hardcore = bool(hardcore)
        self._length_arg = word_length
        self.word_length = word_length or 5
        self.progress_scale = float(progress_scale)
        self.secret = ""
        self.board: list[str] = []
        self.letters: list[str] = []
        self.wrong_words: list[str] = []
        self.n_hidden = 0
        self._episode = object()

    def configure(self) -> None:
        length = self._length_arg
        if length is None:
            length, turns = self.rng.choice(RANDOM_CONFIGS)
            if self._max_turns_arg is None:
                self.max_turns = turns
        elif self._max_turns_arg is None:
            self.max_turns = 20
        self.word_length = length

    @property
    def vocabulary(self) -> tuple[str, ...]:
        """The possible secret words of the current length."""
        return words.words(self.word_list, self.word_length)

    def new_game(self) -> None:
        self.secret = self.rng.choice(self.vocabulary)
        self.board = ["_"] * self.word_length
        self.n_hidden = self.word_length
        self.letters = []
        self.wrong_words = []
        self._episode = object()

    # --- text -------------------------------------------------------------------------
    def instructions(self) -> str:
        return (
            f"You are playing {self.title}. Find the secret {self.word_length}-letter English "
            f"word within {self.max_turns} turns. Each turn, guess one letter, e.g. \\boxed{{E}} "
            "(every copy of it in the word is revealed), or the whole word, e.g. "
            f"\\boxed{{{self.vocabulary[0]}}}. Every guess uses a turn. Hidden letters are "
            "shown as '_'."
        )

    def format_hint(self) -> str:
        return r"Give one letter or the whole word in \boxed{...}, letters only."

    def render(self) -> str:
        text = "Word: " + " ".join(self.board)
        text += "\nGuessed letters: " + (", ".join(self.letters) if self.letters else "none")
        if self.wrong_words:
            text += "\nWrong words: " + ", ".join(self.wrong_words)
        return text + "\nEnter your next guess."

    def state_summary(self) -> str:
        return f"Hangman, {self.word_length} letters, turn {self.turn}/{self.max_turns}. " + self.render()

    # --- moves ------------------------------------------------------------------------
    def parse_move(self, content: str) -> str | None:
        guess = "".join(content.split())
        if not guess or not guess.isascii() or not guess.isalpha():
            return None
        return guess.upper()

    def apply_move(self, guess: str) -> MoveResult:
        t = self.turn
        if len(guess) == 1:
            if guess in self.letters:
                return MoveResult(f"Turn {t}: you already guessed '{guess}'.", self.invalid_penalty, invalid=True)
            self.letters.append(guess)
            found = 0
            for i, ch in enumerate(self.secret):
                if ch == guess:
                    self.board[i] = ch
                    found += 1
            if not found:
                return MoveResult(f"Turn {t}: '{guess}' is not in the word.")
            self.n_hidden -= found
            if not self.n_hidden:
                return MoveResult(
                    f"Congratulations! The word is {self.secret}; found in {t} turns.", 1.0, terminated=True, success=True
                )
            return MoveResult(
                f"Turn {t}: '{guess}' is in the word ({found} position{'s' if found > 1 else ''}).",
                self.progress_scale * found / self.word_length,
            )
        shown = guess if len(guess) <= 20 else guess[:17] + "..."
        if len(guess) != self.word_length:
            return MoveResult(
                f"Turn {t}: {shown} has {len(guess)} letters; the word has {self.word_length}.",
                self.invalid_penalty,
                invalid=True,
            )
        if guess == self.secret:
            return MoveResult(
                f"Congratulations! The word is {self.secret}; found in {t} turns.", 1.0, terminated=True, success=True
            )
        if guess in self.wrong_words:
            return MoveResult(f"Turn {t}: you already guessed {guess}.", self.invalid_penalty, invalid=True)
        self.wrong_words.append(guess)
        return MoveResult(f"Turn {t}: {guess} is not the word.")

    def sample_random_action(self) -> str:
        if self.rng.random() < 0.5:
            return f"\\boxed{{{self.rng.choice(self.vocabulary)}}}"
        return f"\\boxed{{{self.rng.choice(_ALPHABET)}}}"


# Up to this many candidates the oracle searches for a move with the best worst case.
_EXACT_LIMIT = 12


def _candidates(env: HangmanEnv) -> tuple[str, ...]:
    state = getattr(env, "_oracle_state", None)
    cands = state[1] if state is not None and state[0] is env._episode else env.vocabulary
    board, guessed, wrong = env.board, set(env.letters), set(env.wrong_words)

    def fits(w: str) -> bool:
        for b, ch in zip(board, w):
            if b == "_":
                if ch in guessed:
                    return False
            elif b != ch:
                return False
        return w not in wrong

    cands = tuple(w for w in cands if fits(w))
    env._oracle_state = (env._episode, cands)
    return cands


def _split(cands, letter: str) -> dict[tuple[int, ...], list[str]]:
    parts: dict[tuple[int, ...], list[str]] = {}
    for w in cands:
        parts.setdefault(tuple(i for i, ch in enumerate(w) if ch == letter), []).append(w)
    return parts


def oracle(env: HangmanEnv) -> str:
    """Letter frequencies over the words consistent with the board, with a short search.

    The candidates are the words of the list that match the revealed letters, contain no
    wrongly guessed letter where a blank is, and were not guessed whole. One candidate
    left: guess it. Otherwise guess the letter whose answer (where it appears) splits the
    candidates into the smallest worst-case and then expected group (with a small set,
    an exact search for the move with the fewest turns in the worst case, whole-word
    guesses included).
    """
    cands = _candidates(env)
    if not cands:  # the secret is always a candidate; stay well-formed regardless
        return env.sample_random_action()
    if len(cands) == 1:
        return f"\\boxed{{{cands[0]}}}"
    guessed = set(env.letters)
    hidden = env.n_hidden
    if len(cands) <= _EXACT_LIMIT:
        _, move = _best(frozenset(cands), frozenset(guessed), hidden, {})
        return f"\\boxed{{{move}}}"
    present = Counter(ch for w in cands for ch in set(w) if ch not in guessed)
    n = len(cands)
    best_key, best = None, None
    for letter in present:
        parts = _split(cands, letter)
        sizes = [len(p) for pos, p in parts.items() if len(pos) < hidden or not pos]
        key = (max(sizes, default=0), sum(s * s for s in sizes) / n, -present[letter], letter)
        if best_key is None or key < best_key:
            best_key, best = key, letter
    return f"\\boxed{{{best}}}"


def _best(cands: frozenset[str], guessed: frozenset[str], hidden: int, memo: dict) -> tuple[int, str]:
    """``(turns, move)``: the fewest turns that surely win from here, and a first move."""
    if len(cands) == 1:
        return 1, next(iter(cands))
    key = (cands, guessed)
    if key in memo:
        return memo[key]
    # A whole-word guess: wins now or leaves the other candidates.
    word = min(cands)
    best = (1 + _best(cands - {word}, guessed, hidden, memo)[0], word)
    letters = sorted({ch for w in cands for ch in w} - guessed)
    for letter in letters:
        if best[0] <= 2:
            break
        parts = _split(cands, letter)
        if len(parts) == 1:
            continue  # no information
        worst = 0
        for pos, part in parts.items():
            if pos and len(pos) == hidden:
                continue  # completes the word: won this turn
            worst = max(worst, _best(frozenset(part), guessed | {letter}, hidden - len(pos), memo)[0])
            if 1 + worst >= best[0]:
                break
        if 1 + worst < best[0]:
            best = (1 + worst, letter)
    memo[key] = best
    return best
