"""Hangman: guess a hidden word letter by letter (or all at once)."""

from __future__ import annotations

from collections import Counter

from gem_core.envs.games import words
from gem_core.envs.games.base import LanguageGame, MoveResult
from gem_core.errors import InvalidArgument

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
                raise InvalidArgument(
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


# Candidate sets up to this size get the exact search; larger ones the split heuristic.
_EXACT_LIMIT = 10
# Search nodes one oracle call may expand before it settles for estimates.
_NODE_BUDGET = 2_000


def _candidates(env: HangmanEnv) -> tuple[str, ...]:
    state = getattr(env, "_oracle_state", None)
    cands = state[1] if state is not None and state[0] is env._episode else env.vocabulary
    board, guessed, wrong = env.board, set(env.letters), set(env.wrong_words)

    def fits(w: str) -> bool:
        for b, ch in zip(board, w, strict=True):
            if b == "_":
                if ch in guessed:
                    return False
            elif b != ch:
                return False
        return w not in wrong

    cands = tuple(w for w in cands if fits(w))
    env._oracle_state = (env._episode, cands)
    return cands


def _split(cands, letter: str, hidden: tuple[int, ...]) -> dict[tuple[int, ...], list[str]]:
    """Group ``cands`` by the hidden positions where ``letter`` would be revealed."""
    parts: dict[tuple[int, ...], list[str]] = {}
    for w in cands:
        parts.setdefault(tuple(i for i in hidden if w[i] == letter), []).append(w)
    return parts


def _family_bound(cands, hidden: tuple[int, ...]) -> int:
    """The largest group of candidates that differ at one position only.

    Each guess separates at most one word of such a group from the others, so its
    last word needs at least that many turns: a lower bound on the worst case.
    """
    best = 1
    for i in hidden:
        counts = Counter(w[:i] + w[i + 1 :] for w in cands)
        best = max(best, max(counts.values()))
    return best


class _Search:
    """Best-first moves for Hangman with a turn budget: maximise the words surely won."""

    def __init__(self) -> None:
        self.memo: dict[tuple, tuple[int, str | None]] = {}
        self.nodes = 0

    def wins(self, cands: tuple[str, ...], hidden: tuple[int, ...], turns: int) -> tuple[int, str | None]:
        """``(words, move)``: how many of ``cands`` can surely be won within ``turns``, and how."""
        n = len(cands)
        if n <= turns:
            return n, cands[0]  # guess them one by one
        if turns <= 0:
            return 0, None
        key = (cands, hidden, turns)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        excess = _family_bound(cands, hidden) - turns
        cap = n - max(0, excess)  # the words of a too-large family beyond the budget are lost
        if self.nodes >= _NODE_BUDGET or n > _EXACT_LIMIT:
            return cap, None  # an optimistic estimate; no move chosen
        self.nodes += 1
        moves = []
        for letter in {w[i] for w in cands for i in hidden}:
            parts = _split(cands, letter, hidden)
            if len(parts) == 1 and not next(iter(parts)):
                continue
            moves.append((sum(len(p) ** 2 for p in parts.values()), letter, parts))
        moves.sort()
        # A whole-word guess (the first candidate): wins now or leaves the others.
        best, move = 1 + self.wins(cands[1:], hidden, turns - 1)[0], cands[0]
        for _, letter, parts in moves:
            if best >= cap:
                break
            total, left = 0, n
            for pos, part in sorted(parts.items(), key=lambda kv: -len(kv[1])):
                left -= len(part)
                if pos and len(pos) == len(hidden):
                    total += len(part)  # completes the word: won this turn
                else:
                    rest = tuple(i for i in hidden if i not in pos)
                    total += self.wins(tuple(part), rest, turns - 1)[0]
                if total + left <= best:
                    break
            if total > best:
                best, move = total, letter
        self.memo[key] = (best, move)
        return best, move


def oracle(env: HangmanEnv) -> str:
    """Letter choice over the words consistent with the board, with a turn-aware endgame.

    The candidates are the words of the list that match the revealed letters, hold no
    guessed letter at a blank and were not guessed whole. When no more candidates are
    left than turns, the win is sure: it guesses the best letter if every group it can
    leave still fits the turns left, else the words whole one by one. With up to 10 it
    searches exactly (within a node budget) for the move that surely wins the most
    candidates in the turns left, whole-word guesses included. Otherwise it guesses the
    letter whose answer (the positions it appears at) leaves the smallest largest group,
    then the smallest expected group.

    Short words in a short budget cannot all be won: the 27 three-letter words
    ``?AT``, ``?ET``, ``?IT`` of the common list cannot all be found within 10 turns by
    any strategy (an exhaustive search; each guess rules out at most one word of a
    ``?AT`` family), so ``Hangman-v0-easy`` has no strategy that wins every word.
    """
    env = env.unwrapped  # accept a wrapped env too
    cands = _candidates(env)
    if not cands:  # the secret is always a candidate; stay well-formed regardless
        return env.sample_random_action()
    if len(cands) == 1:
        return f"\\boxed{{{cands[0]}}}"
    turns = env.max_turns - env.turn
    hidden = tuple(i for i, b in enumerate(env.board) if b == "_")
    letter, worst = _split_letter(cands, hidden)
    if len(cands) <= turns:
        # A sure win either way: whole words one by one, or a letter whose groups all fit.
        return f"\\boxed{{{letter if worst < turns else cands[0]}}}"
    if len(cands) <= _EXACT_LIMIT:
        _, move = _Search().wins(cands, hidden, turns)
        if move is not None:
            return f"\\boxed{{{move}}}"
    return f"\\boxed{{{letter}}}"


def _split_letter(cands: tuple[str, ...], hidden: tuple[int, ...]) -> tuple[str, int]:
    """The letter leaving the smallest largest group (then expected group), and the
    size of its largest group that the guess does not complete."""
    # Group sizes per letter in one pass: letter -> {positions revealed: words}.
    groups: dict[str, Counter] = {}
    for w in cands:
        at: dict[str, tuple[int, ...]] = {}
        for i in hidden:
            at[w[i]] = at.get(w[i], ()) + (i,)
        for ch, pos in at.items():
            groups.setdefault(ch, Counter())[pos] += 1
    n, full = len(cands), len(hidden)
    best_key, best, worst = None, cands[0], n
    for ch, counter in groups.items():
        sizes = list(counter.values())
        absent = n - sum(sizes)
        if absent:
            sizes.append(absent)
        if len(sizes) == 1:
            continue  # no information
        key = (max(sizes), sum(x * x for x in sizes), ch)
        if best_key is None or key < best_key:
            open_sizes = [k for pos, k in counter.items() if len(pos) < full]
            best_key, best, worst = key, ch, max(open_sizes + [absent])
    return best, worst
