"""Word Search: find the words hidden across and down in a grid of letters."""

from __future__ import annotations

import string

from gem_core.envs.games.base import LanguageGame, MoveResult, MoveScanner
from gem_core.envs.games.crosswords import load_clues
from gem_core.errors import InvalidArgument

__all__ = ["WordSearchEnv", "oracle", "build_grid"]

# (dr, dc) of each reading direction: across, down, and (hardcore) their reverses.
_FORWARD = ((0, 1), (1, 0))
_ALL = ((0, 1), (1, 0), (0, -1), (-1, 0))

Segment = tuple[tuple[int, int], tuple[int, int]]


def _segment(a: tuple[int, int], b: tuple[int, int]) -> Segment:
    """An unordered pair of end cells (a guess may name either end first)."""
    return (a, b) if a <= b else (b, a)


def _occurrences(grid: list[list[str]], word: str) -> set[Segment]:
    """Every segment where ``word`` reads across or down, forwards or backwards."""
    n, size = len(word), len(grid)
    found = set()
    for r in range(size):
        for c in range(size):
            if grid[r][c] != word[0]:
                continue
            for dr, dc in _ALL:
                er, ec = r + (n - 1) * dr, c + (n - 1) * dc
                if (
                    0 <= er < size
                    and 0 <= ec < size
                    and all(grid[r + i * dr][c + i * dc] == word[i] for i in range(n))
                ):
                    found.add(_segment((r, c), (er, ec)))
    return found


def _fits(grid, word: str, r: int, c: int, dr: int, dc: int) -> bool:
    for i, ch in enumerate(word):
        have = grid[r + i * dr][c + i * dc]
        if have is not None and have != ch:
            return False
    return True


def _find_spot(rng, grid, word: str, directions, guesses: int = 40):
    """A random place for ``word`` (cells empty or already holding the same letter).

    Tries random placements first (the grid is mostly empty, so one usually fits at
    once) and falls back to choosing among all fitting placements.
    """
    size, n = len(grid), len(word)
    for _ in range(guesses):
        dr, dc = rng.choice(directions)
        r = rng.randrange(size - (n - 1) * abs(dr)) + (n - 1) * max(0, -dr)
        c = rng.randrange(size - (n - 1) * abs(dc)) + (n - 1) * max(0, -dc)
        if _fits(grid, word, r, c, dr, dc):
            return r, c, dr, dc
    spots = []
    for dr, dc in directions:
        for r in range(size):
            if not 0 <= r + (n - 1) * dr < size:
                continue
            for c in range(size):
                if 0 <= c + (n - 1) * dc < size and _fits(grid, word, r, c, dr, dc):
                    spots.append((r, c, dr, dc))
    return rng.choice(spots) if spots else None


def build_grid(rng, words: list[str], directions, *, min_size: int = 0, refills: int = 20):
    """A square letter grid hiding ``words``; returns ``(grid, {word: (start, end)})``.

    Deterministic given ``rng``. Words (longest first) go in random positions along the
    allowed ``directions`` and may share letters; the rest is random letters, redrawn
    until every word reads exactly once in the grid (in any of the four directions),
    so each answer is unambiguous. The side starts at ``round(1.5 * longest)`` (as in the
    reference) and grows until everything fits.
    """
    words = sorted(words, key=lambda w: (-len(w), w))
    size = max(min_size, round(1.5 * len(words[0])), len(words[0]))
    for _ in range(8):
        for _ in range(10):
            grid: list[list[str | None]] = [[None] * size for _ in range(size)]
            where: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {}
            for word in words:
                spot = _find_spot(rng, grid, word, directions)
                if spot is None:
                    break
                r, c, dr, dc = spot
                n = len(word)
                for i in range(n):
                    grid[r + i * dr][c + i * dc] = word[i]
                where[word] = ((r, c), (r + (n - 1) * dr, c + (n - 1) * dc))
            if len(where) < len(words):
                continue
            holes = [(r, c) for r in range(size) for c in range(size) if grid[r][c] is None]
            for _ in range(refills):
                for r, c in holes:
                    grid[r][c] = rng.choice(string.ascii_uppercase)
                if all(_occurrences(grid, w) == {_segment(*where[w])} for w in words):
                    return grid, where
        size += 1
    raise RuntimeError(f"could not hide {words} so that each reads exactly once")


class WordSearchEnv(LanguageGame):
    r"""Find the hidden words in a square grid of letters.

    Observation: the rules at reset; then the feedback on the last guess, the grid (rows
        ``R00``…, columns ``C00``…; letters of found words in ``[ ]``), the words to find
        (found ones marked) and ``Words found: k/n``.
    Action: ``\boxed{start_row start_col end_row end_col}``: the cells of a word's first
        and last letters, e.g. ``\boxed{1 1 1 5}`` (0-based, as shown; either end may come
        first; ``\boxed{[1 1 1 5]}`` and commas also parse). Coordinates outside the grid,
        a diagonal or bent line, a word already found and a repeated wrong guess are
        invalid moves (``invalid_penalty``, default 0.0; no state change). A straight line
        that is not a hidden word is a wrong guess (reward 0).
    Rewards: 1.0 when the last word is found (terminates, success). Each other word found
        pays ``progress_scale / num_words``, once per word, so progress rewards summed
        over an episode stay in ``[0, progress_scale)`` (default 0.1). A format error pays
        ``format_penalty`` (-0.1) and ends the episode by default.
    Episode end: terminated when every word is found; truncated after ``max_turns``.
    Arguments:
        num_words: words hidden in the grid (``None``: 3–7, drawn at each reset).
        hardcore: harder words (rarer, longer) that may also read backwards (right to
            left, bottom to top); otherwise everyday words reading across (left to right)
            or down (``None``: drawn at each reset, -random).
        max_turns: turn budget (``None``: ``4 * num_words``).
        show_words: list the words to find (default). ``False`` hides the list, as the
            reference GEM did: the agent must spot real words among random letters.
        progress_scale: total progress reward available in one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Generation: every hidden word reads exactly once in the grid (random filler letters
        are redrawn until no second copy appears in any direction), so answers are unique.
    Variants: easy 5 everyday words across/down in 20 turns; hard 5 hard words, also
        backwards, in 20 turns; random: 3–7 words, word list drawn, ``4 * num_words`` turns.
    Version history: v0 — the reference GEM's ids, settings, grid style and
        ``\boxed{start_row start_col end_row end_col}`` syntax; own word list shipped with
        the package; the words to find are listed (``show_words``); unique answers; a word
        already found cannot be rewarded again.
    """

    title = "Word Search"

    def __init__(
        self,
        num_words: int | None = 5,
        hardcore: bool | None = False,
        max_turns: int | None = 20,
        show_words: bool = True,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        if num_words is not None and not (isinstance(num_words, int) and 1 <= num_words <= 12):
            raise InvalidArgument(f"num_words must be an int in [1, 12] or None, got {num_words!r}")
        self._num_words_arg = num_words
        self._hardcore_arg = hardcore
        self.num_words = num_words or 5
        self.hardcore = bool(hardcore)
        self.show_words = bool(show_words)
        self.progress_scale = float(progress_scale)
        self.grid: list[list[str]] = []
        self.where: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {}
        self.words: list[str] = []
        self.found: list[str] = []
        self.highlighted: set[tuple[int, int]] = set()
        self.attempts: set[Segment] = set()
        self._by_segment: dict[Segment, str] = {}
        self._grid_text: str | None = None  # cache of grid_text(), redrawn when a word is found

    def configure(self) -> None:
        self.num_words = (
            self.rng.randint(3, 7) if self._num_words_arg is None else self._num_words_arg
        )
        self.hardcore = (
            self.rng.random() < 0.5 if self._hardcore_arg is None else bool(self._hardcore_arg)
        )
        if self._max_turns_arg is None:
            self.max_turns = 4 * self.num_words

    def new_game(self) -> None:
        pool = [w for w, _ in load_clues("hard" if self.hardcore else "easy")]
        words: list[str] = []
        for w in self.rng.sample(pool, len(pool)):
            # No word may hide inside another, forwards or backwards (DOG in GOD).
            if not any(w in u or u in w or w[::-1] in u or u in w[::-1] for u in words):
                words.append(w)
                if len(words) == self.num_words:
                    break
        directions = _ALL if self.hardcore else _FORWARD
        self.grid, self.where = build_grid(self.rng, words, directions)
        self.words = sorted(words)
        self._by_segment = {_segment(*ends): w for w, ends in self.where.items()}
        self.found, self.highlighted, self.attempts = [], set(), set()
        self._grid_text = None

    # --- text ----------------------------------------------------------------------
    def instructions(self) -> str:
        lines = "across (left to right) or down (top to bottom)"
        if self.hardcore:
            lines = "across or down, forwards or backwards (right to left, bottom to top)"
        listed = "The words to find are listed below the grid. " if self.show_words else ""
        return (
            f"You are participating in a Word Search challenge ({'Hardcore' if self.hardcore else 'Basic'}).\n"
            f"Find the {self.num_words} words hidden in the grid. {listed}Words read {lines}; "
            "rows and columns are numbered, and letters of words you have found are marked "
            "in square brackets [ ].\n"
            "To locate a word, give the row and column of its first and last letters in the "
            "format \\boxed{start_row start_col end_row end_col}, e.g. \\boxed{1 1 1 5} for a word "
            "from row 1, column 1 to row 1, column 5.\n"
            f"You have at most {self.max_turns} turns to find all the words; each guess must be new."
        )

    def format_hint(self) -> str:
        return (
            r"Give your guess as \boxed{start_row start_col end_row end_col}, e.g. \boxed{1 1 1 5}."
        )

    def grid_text(self) -> str:
        """The grid with row and column numbers; found letters in brackets."""
        if self._grid_text is None:
            self._grid_text = self._draw_grid()
        return self._grid_text

    def _draw_grid(self) -> str:
        lines = ["    " + " ".join(f"C{i:02}" for i in range(len(self.grid)))]
        for r, row in enumerate(self.grid):
            cells = (
                f"[{v}]" if (r, c) in self.highlighted else f" {v} " for c, v in enumerate(row)
            )
            lines.append(f"R{r:02} " + " ".join(cells))
        return "\n".join(lines)

    def render(self) -> str:
        text = f"Current board:\n{self.grid_text()}\n"
        if self.show_words:
            listed = ", ".join(f"{w} (found)" if w in self.found else w for w in self.words)
            text += f"Words to find: {listed}\n"
        return text + f"Words found: {len(self.found)}/{len(self.words)}\nEnter your guess."

    def state_summary(self) -> str:
        found = ", ".join(self.found) or "none"
        return (
            f"Turn {self.turn}/{self.max_turns}. Found {len(self.found)}/{len(self.words)}: {found}.\n"
            + self.render()
        )

    # --- rules ---------------------------------------------------------------------
    def parse_move(self, content: str) -> tuple[int, int, int, int] | None:
        # "r1 c1 r2 c2": four integers of at most 6 digits, spaces or one comma between,
        # optionally in brackets. Read with a scanner: the former regex backtracked through
        # the runs of spaces (40 s on a 603-character box).
        sc = MoveScanner(content.strip())
        sc.take("[")
        sc.space()
        values = []
        for i in range(4):
            if i and not sc.separator(","):
                return None
            value = sc.integer("-", max_digits=6)
            if value is None:
                return None
            values.append(int(value))
        sc.space()
        sc.take("]")
        return tuple(values) if sc.at_end() else None  # type: ignore[return-value]

    def apply_move(self, move: tuple[int, int, int, int]) -> MoveResult:
        r1, c1, r2, c2 = move
        where = f"At turn {self.turn}, your guess ({r1}, {c1}) to ({r2}, {c2})"
        size = len(self.grid)
        if not all(0 <= v < size for v in move):
            return MoveResult(f"{where} is out of bounds.", self.invalid_penalty, invalid=True)
        if r1 != r2 and c1 != c2:
            return MoveResult(
                f"{where} is not valid: words run across (horizontal) or down (vertical).",
                self.invalid_penalty,
                invalid=True,
            )
        seg = _segment((r1, c1), (r2, c2))
        word = self._by_segment.get(seg)
        if word is not None and word in self.found:
            return MoveResult(
                f"{where} is {word}, which you already found.", self.invalid_penalty, invalid=True
            )
        if seg in self.attempts:
            return MoveResult(f"{where} was already tried.", self.invalid_penalty, invalid=True)
        self.attempts.add(seg)
        if word is None:
            return MoveResult(f"{where}: incorrect, no hidden word there.")
        self.found.append(word)
        (a, b), (c, d) = seg
        self.highlighted.update((r, col) for r in range(a, c + 1) for col in range(b, d + 1))
        self._grid_text = None
        if len(self.found) == len(self.words):
            return MoveResult(
                f"{where}: correct, you found {word}. Congratulations! You completed the Word Search puzzle!",
                1.0,
                terminated=True,
                success=True,
            )
        return MoveResult(
            f"{where}: correct, you found {word}.", self.progress_scale / len(self.words)
        )

    def sample_random_action(self) -> str:
        size = max(1, len(self.grid))
        rng = self.rng
        r, c = rng.randrange(size), rng.randrange(size)
        if rng.random() < 0.5:
            r2, c2 = r, rng.randrange(size)
        else:
            r2, c2 = rng.randrange(size), c
        return f"\\boxed{{{r} {c} {r2} {c2}}}"


def oracle(env: WordSearchEnv) -> str:
    """Name the first word not yet found (alphabetical), from its hidden position."""
    for word in env.words:
        if word not in env.found:
            (r1, c1), (r2, c2) = env.where[word]
            return f"\\boxed{{{r1} {c1} {r2} {c2}}}"
    return r"\boxed{0 0 0 0}"
