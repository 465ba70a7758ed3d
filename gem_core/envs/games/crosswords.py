"""Crosswords: fill a small crossword, letter by letter, from its clues."""

from __future__ import annotations

import json
import string
from functools import cache
from importlib import resources

from gem_core.envs.games.base import LanguageGame, MoveResult, MoveScanner
from gem_core.errors import InvalidArgument

__all__ = ["CrosswordsEnv", "oracle", "load_clues", "build_layout", "Layout", "PlacedWord"]

_DATA = "crossword_clues.jsonl"
_ACROSS, _DOWN = "across", "down"
_STEP = {_ACROSS: (0, 1), _DOWN: (1, 0)}


@cache
def load_clues(level: str) -> tuple[tuple[str, str], ...]:
    """The ``(WORD, clue)`` pairs of one level (``"easy"`` or ``"hard"``), read once per process.

    The list ships with the package (``gem_core/envs/games/data/crossword_clues.jsonl``;
    see ``data/SOURCES.md``): about 240 everyday words and 130 harder ones, 3–11 letters.
    """
    if level not in ("easy", "hard"):
        raise InvalidArgument(f"level must be 'easy' or 'hard', got {level!r}")
    text = (
        resources.files("gem_core.envs.games").joinpath("data", _DATA).read_text(encoding="utf-8")
    )
    pairs = []
    for line in text.splitlines():
        if line.strip():
            row = json.loads(line)
            if row["level"] == level:
                pairs.append((row["word"].upper(), row["clue"]))
    return tuple(pairs)


class PlacedWord:
    """One answer of a layout: its number, start cell, direction, word and clue."""

    __slots__ = ("number", "row", "col", "direction", "word", "clue")

    def __init__(self, row: int, col: int, direction: str, word: str, clue: str, number: int = 0):
        self.row, self.col, self.direction = row, col, direction
        self.word, self.clue, self.number = word, clue, number

    def cells(self) -> list[tuple[int, int]]:
        """The cells of the word, first letter first."""
        dr, dc = _STEP[self.direction]
        return [(self.row + i * dr, self.col + i * dc) for i in range(len(self.word))]

    def __repr__(self) -> str:
        return (
            f"PlacedWord({self.number} {self.direction} at ({self.row}, {self.col}): {self.word})"
        )


class Layout:
    """A crossword grid (``None`` = block) and its numbered words."""

    __slots__ = ("grid", "words")

    def __init__(self, grid: list[list[str | None]], words: list[PlacedWord]):
        self.grid, self.words = grid, words

    @property
    def rows(self) -> int:
        return len(self.grid)

    @property
    def cols(self) -> int:
        return len(self.grid[0])

    def letter_cells(self) -> list[tuple[int, int]]:
        """Every cell that holds a letter, row by row."""
        return [
            (r, c) for r, row in enumerate(self.grid) for c, ch in enumerate(row) if ch is not None
        ]


def _can_place(grid: dict, dirs: dict, word: str, r: int, c: int, direction: str) -> int:
    """Crossings made by placing ``word`` at (r, c); -1 when the placement breaks a rule.

    Rules: letters agree where words cross; a cell is crossed by at most one across and
    one down word; the cells before the first and after the last letter are empty; a new
    letter has no letter beside it across the word (no accidental two-letter runs).
    """
    dr, dc = _STEP[direction]
    n = len(word)
    if (r - dr, c - dc) in grid or (r + n * dr, c + n * dc) in grid:
        return -1
    crossings = 0
    for i, ch in enumerate(word):
        cell = (r + i * dr, c + i * dc)
        have = grid.get(cell)
        if have is not None:
            if have != ch or direction in dirs[cell]:
                return -1
            crossings += 1
        elif (cell[0] + dc, cell[1] + dr) in grid or (cell[0] - dc, cell[1] - dr) in grid:
            return -1
    return crossings


def _runs_are_words(grid: dict, placed: list[PlacedWord]) -> bool:
    """Every maximal run of two or more letters, across or down, is a placed word."""
    starts = {(w.row, w.col, w.direction) for w in placed}
    for r, c in grid:
        for direction, (dr, dc) in _STEP.items():
            if (r - dr, c - dc) in grid or (r + dr, c + dc) not in grid:
                continue
            if (r, c, direction) not in starts:
                return False
            n = 1
            while (r + n * dr, c + n * dc) in grid:
                n += 1
            if not any(
                w.row == r and w.col == c and w.direction == direction and len(w.word) == n
                for w in placed
            ):
                return False
    return True


def build_layout(
    rng,
    pairs: tuple[tuple[str, str], ...],
    num_words: int,
    max_cells: int,
    *,
    max_side: int = 15,
    tries: int = 200,
) -> Layout:
    """A connected crossword of ``num_words`` words from ``pairs`` with at most ``max_cells`` letters.

    Deterministic given ``rng``. Every word after the first crosses an earlier one, and
    every run of letters in the grid is one of the words (checked at the end).
    """
    if num_words > len(pairs):
        raise InvalidArgument(f"asked for {num_words} words, the list has {len(pairs)}")
    for _ in range(tries):
        first_word, first_clue = rng.choice(pairs)
        if len(first_word) > min(max_cells, max_side):
            continue
        first_dir = rng.choice((_ACROSS, _DOWN))
        grid: dict[tuple[int, int], str] = {}
        dirs: dict[tuple[int, int], set[str]] = {}
        placed = [PlacedWord(0, 0, first_dir, first_word, first_clue)]
        for cell, ch in zip(placed[0].cells(), first_word, strict=True):
            grid[cell] = ch
            dirs[cell] = {first_dir}
        used = {first_word}
        while len(placed) < num_words:
            options = []
            for word, clue in rng.sample(pairs, min(len(pairs), 60)):
                if word in used or any(word in u or u in word for u in used):
                    continue
                for (r, c), ch in grid.items():
                    for direction in (_ACROSS, _DOWN):
                        if direction in dirs[(r, c)]:
                            continue
                        dr, dc = _STEP[direction]
                        for i, wch in enumerate(word):
                            if wch != ch:
                                continue
                            sr, sc = r - i * dr, c - i * dc
                            crossings = _can_place(grid, dirs, word, sr, sc, direction)
                            if crossings < 1 or crossings == len(word):
                                continue
                            if len(grid) + len(word) - crossings > max_cells:
                                continue
                            cells = list(grid) + [
                                (sr + k * dr, sc + k * dc) for k in range(len(word))
                            ]
                            rows = max(p[0] for p in cells) - min(p[0] for p in cells) + 1
                            cols = max(p[1] for p in cells) - min(p[1] for p in cells) + 1
                            if rows > max_side or cols > max_side:
                                continue
                            options.append((sr, sc, direction, word, clue))
                if options:
                    break
            if not options:
                break
            sr, sc, direction, word, clue = rng.choice(sorted(set(options)))
            pw = PlacedWord(sr, sc, direction, word, clue)
            for cell, ch in zip(pw.cells(), word, strict=True):
                grid[cell] = ch
                dirs.setdefault(cell, set()).add(direction)
            placed.append(pw)
            used.add(word)
        if len(placed) < num_words or not _runs_are_words(grid, placed):
            continue
        # Crop to the bounding box and number the words in reading order.
        r0 = min(r for r, _ in grid)
        c0 = min(c for _, c in grid)
        rows = max(r for r, _ in grid) - r0 + 1
        cols = max(c for _, c in grid) - c0 + 1
        out: list[list[str | None]] = [[None] * cols for _ in range(rows)]
        for (r, c), ch in grid.items():
            out[r - r0][c - c0] = ch
        for w in placed:
            w.row -= r0
            w.col -= c0
        numbers: dict[tuple[int, int], int] = {}
        for r, c in sorted({(w.row, w.col) for w in placed}):
            numbers[(r, c)] = len(numbers) + 1
        for w in placed:
            w.number = numbers[(w.row, w.col)]
        placed.sort(key=lambda w: (w.direction != _ACROSS, w.number))
        return Layout(out, placed)
    raise RuntimeError(f"could not build a crossword of {num_words} words within {max_cells} cells")


class CrosswordsEnv(LanguageGame):
    r"""Fill a small crossword, one letter per turn, from its numbered clues.

    Observation: the rules at reset; then the feedback on the last guess, the grid (rows
        ``R00``…, columns ``C00``…; ``_`` a cell still to fill, ``.`` a block, letters
        filled in), the clues (number, direction, start cell, length, clue, solved words
        marked) and the wrong letters tried so far.
    Action: ``\boxed{row column letter}``, e.g. ``\boxed{0 2 D}`` (0-based indices as
        shown; ``\boxed{[0 2 D]}`` and commas also parse; the letter is case-insensitive).
        A right letter is written into the grid; a wrong one is reported and recorded.
        Out-of-grid cells, blocks, cells already filled and a wrong letter tried before on
        the same cell are invalid moves (``invalid_penalty``, default 0.0; no state change).
    Rewards: 1.0 when the last cell is filled (terminates, success). Each other correct
        letter pays ``progress_scale / letter cells``; each cell can pay once, so progress
        rewards summed over an episode stay in ``[0, progress_scale)`` (default 0.1). A
        wrong letter pays 0. A format error pays ``format_penalty`` (-0.1) and ends the
        episode by default.
    Episode end: terminated when the grid is full; truncated after ``max_turns``.
    Arguments:
        hardcore: draw from the hard word list (rarer, longer words) instead of everyday
            words (``None``: drawn at each reset, -random).
        num_words: words in the crossword (``None``: 2–4, drawn at each reset).
        max_turns: turn budget (``None``: ``10 * num_words + 10``). Layouts never have more
            letter cells than ``max_turns``, so a perfect solver always finishes.
        progress_scale: total progress reward available in one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Layout: every word after the first crosses an earlier one; letters agree at crossings;
        no letters touch except where words cross, so every run of letters is an answer.
    Variants: easy 3 everyday words in 30 turns; hard 3 hard words in 40 turns; random:
        word list, 2–4 words and ``10 * num_words + 10`` turns drawn per reset.
    Version history: v0 — the reference GEM's ids, settings, grid style and
        ``\boxed{row column letter}`` syntax; own word/clue list shipped with the package;
        layouts always connected and valid; clues numbered with their start cells.
    """

    title = "Crosswords"

    def __init__(
        self,
        hardcore: bool | None = False,
        num_words: int | None = 3,
        max_turns: int | None = 30,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        if num_words is not None and not (isinstance(num_words, int) and 1 <= num_words <= 8):
            raise InvalidArgument(f"num_words must be an int in [1, 8] or None, got {num_words!r}")
        self._hardcore_arg = hardcore
        self._num_words_arg = num_words
        self.hardcore = bool(hardcore)
        self.num_words = num_words or 3
        self.progress_scale = float(progress_scale)
        self.layout: Layout | None = None
        self.board: list[list[str | None]] = []
        self.wrong: list[tuple[int, int, str]] = []
        self._empty = 0
        self._total = 1
        self._text: tuple[str, str] | None = None  # cached (grid, clues), redrawn on change

    def configure(self) -> None:
        self.hardcore = (
            self.rng.random() < 0.5 if self._hardcore_arg is None else bool(self._hardcore_arg)
        )
        self.num_words = (
            self.rng.randint(2, 4) if self._num_words_arg is None else self._num_words_arg
        )
        if self._max_turns_arg is None:
            self.max_turns = 10 * self.num_words + 10

    def new_game(self) -> None:
        pairs = load_clues("hard" if self.hardcore else "easy")
        self.layout = build_layout(self.rng, pairs, self.num_words, self.max_turns)
        self.board = [["_" if ch is not None else "." for ch in row] for row in self.layout.grid]
        self._total = self._empty = len(self.layout.letter_cells())
        self.wrong = []
        self._text = None

    # --- text ----------------------------------------------------------------------
    def instructions(self) -> str:
        return (
            f"You are playing Crosswords{' (hardcore)' if self.hardcore else ''}.\n"
            "Each row and column of the grid is numbered. Cells to fill with letters are shown "
            "as '_'; blocks that take no letter are shown as '.'.\n"
            "Each turn, fill one cell: answer in the format \\boxed{row column letter}, e.g. "
            "\\boxed{0 0 D} or \\boxed{1 2 G}. A correct letter is written in; a wrong one is "
            "reported.\n"
            f"You have to finish the crossword in at most {self.max_turns} turns (it has "
            f"{self._total} letter cells)."
        )

    def format_hint(self) -> str:
        return r"Give your guess as \boxed{row column letter}, e.g. \boxed{0 2 A}."

    def grid_text(self) -> str:
        """The grid with row and column numbers."""
        if self._text is None:
            self._text = (self._draw_grid(), self._draw_clues())
        return self._text[0]

    def clues_text(self) -> str:
        """The numbered clues, solved ones marked."""
        if self._text is None:
            self._text = (self._draw_grid(), self._draw_clues())
        return self._text[1]

    def _draw_grid(self) -> str:
        cols = len(self.board[0]) if self.board else 0
        lines = ["    " + " ".join(f"C{i:02}" for i in range(cols))]
        for i, row in enumerate(self.board):
            lines.append(f"R{i:02} " + " ".join(f" {v} " for v in row))
        return "\n".join(lines)

    def _draw_clues(self) -> str:
        lines = []
        for w in self.layout.words:
            solved = all(self.board[r][c] != "_" for r, c in w.cells())
            mark = " [solved]" if solved else ""
            lines.append(
                f"{w.number} {w.direction.capitalize()} (starts at row {w.row}, column {w.col}; "
                f"{len(w.word)} letters): {w.clue}{mark}"
            )
        return "\n".join(lines)

    def render(self) -> str:
        text = f"Current board:\n{self.grid_text()}\nClues:\n{self.clues_text()}"
        if self.wrong:
            tried = ", ".join(f"{ch} at ({r}, {c})" for r, c, ch in self.wrong[-20:])
            text += f"\nWrong letters tried: {tried}"
        return text + "\nEnter your guess."

    def state_summary(self) -> str:
        filled = self._total - self._empty
        return (
            f"Turn {self.turn}/{self.max_turns}. Filled {filled}/{self._total} cells; "
            f"{len(self.wrong)} wrong letters.\n{self.grid_text()}\nClues:\n{self.clues_text()}"
        )

    # --- rules ---------------------------------------------------------------------
    def parse_move(self, content: str) -> tuple[int, int, str] | None:
        # "row column letter": integers of at most 6 digits, an ASCII letter, spaces or one
        # comma between, optionally in brackets. Read with a scanner: the former regex
        # backtracked through the runs of spaces (9 s on a 2,000-character box).
        sc = MoveScanner(content.strip())
        sc.take("[")
        sc.space()
        row = sc.integer("-", max_digits=6)
        if row is None or not sc.separator(","):
            return None
        col = sc.integer("-", max_digits=6)
        if col is None or not sc.separator(","):
            return None
        letter = sc.take(string.ascii_letters)
        sc.space()
        sc.take("]")
        if letter is None or not sc.at_end():
            return None
        return int(row), int(col), letter.upper()

    def apply_move(self, move: tuple[int, int, str]) -> MoveResult:
        r, c, ch = move
        where = f"At turn {self.turn}, you tried to place {ch} at ({r}, {c})"
        if not (0 <= r < len(self.board) and 0 <= c < len(self.board[0])):
            return MoveResult(
                f"{where}, which is outside the grid.", self.invalid_penalty, invalid=True
            )
        if self.board[r][c] == ".":
            return MoveResult(
                f"{where}, which is a block and takes no letter.",
                self.invalid_penalty,
                invalid=True,
            )
        if self.board[r][c] != "_":
            return MoveResult(
                f"{where}, but the cell is already filled.", self.invalid_penalty, invalid=True
            )
        if (r, c, ch) in self.wrong:
            return MoveResult(
                f"{where}, which you already tried: it is wrong.",
                self.invalid_penalty,
                invalid=True,
            )
        if self.layout.grid[r][c] != ch:
            self.wrong.append((r, c, ch))
            return MoveResult(f"{where}, but it is incorrect.")
        self.board[r][c] = ch
        self._empty -= 1
        self._text = None
        if self._empty == 0:
            return MoveResult(
                f"{where}: correct. Congratulations! You completed the crossword!",
                1.0,
                terminated=True,
                success=True,
            )
        return MoveResult(f"{where}: correct.", self.progress_scale / self._total)

    def sample_random_action(self) -> str:
        empty = [(r, c) for r, row in enumerate(self.board) for c, v in enumerate(row) if v == "_"]
        r, c = self.rng.choice(empty) if empty else (0, 0)
        return f"\\boxed{{{r} {c} {self.rng.choice(string.ascii_uppercase)}}}"


def oracle(env: CrosswordsEnv) -> str:
    """Fill the first empty cell (reading order) with its solution letter."""
    for r, row in enumerate(env.board):
        for c, v in enumerate(row):
            if v == "_":
                return f"\\boxed{{{r} {c} {env.layout.grid[r][c]}}}"
    return r"\boxed{0 0 A}"
