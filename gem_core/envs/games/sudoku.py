"""Sudoku: fill a grid whose solution is unique by construction."""

from __future__ import annotations

import random
from functools import cache

from gem_core.envs.games.base import LanguageGame, MoveResult, MoveScanner
from gem_core.errors import InvalidArgument

__all__ = ["SudokuEnv", "oracle", "count_solutions", "generate_puzzle", "MAX_CLUES"]

# (scale, clues, max_turns) triples of the reference GEM's -random variant.
_RANDOM_CONFIGS = ((4, 10, 15), (9, 50, 50))
_DEFAULTS = {s: (c, t) for s, c, t in _RANDOM_CONFIGS}
# The most cells that may be emptied: 4x4 puzzles need at least 4 givens; past 55 blanks
# a 9x9 puzzle with a unique solution takes too long to generate (p99 reset > 200 ms).
MAX_CLUES = {4: 12, 9: 55}
_CELLS = (" .",) + tuple(f"{d:>2}" for d in range(1, 10))


@cache
def _units(scale: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Row, column and box index of every cell (row-major)."""
    box = int(round(scale**0.5))
    cells = range(scale * scale)
    return (
        tuple(i // scale for i in cells),
        tuple(i % scale for i in cells),
        tuple((i // scale) // box * box + (i % scale) // box for i in cells),
    )


def _search(
    grid: list[int],
    scale: int,
    limit: int,
    rng: random.Random | None = None,
    ban_cell: int = -1,
    ban_digit: int = 0,
) -> tuple[int, list[int] | None]:
    """Count the solutions of ``grid`` (0 = empty) up to ``limit``; also return the first.

    Bitmask backtracking that always branches on the empty cell with the fewest
    candidates. ``rng`` shuffles the branch order (to fill random grids); ``ban_cell`` /
    ``ban_digit`` forbid one digit in one cell (to ask "is there another solution?").
    """
    R, C, B = _units(scale)
    rows, cols, boxes = [0] * scale, [0] * scale, [0] * scale
    empty = []
    for i, v in enumerate(grid):
        if v:
            bit = 1 << v
            if (rows[R[i]] | cols[C[i]] | boxes[B[i]]) & bit:
                return 0, None
            rows[R[i]] |= bit
            cols[C[i]] |= bit
            boxes[B[i]] |= bit
        else:
            empty.append(i)
    full = ((1 << scale) - 1) << 1
    ban_bit = 1 << ban_digit if ban_digit else 0
    g = list(grid)
    found = 0
    first: list[int] | None = None

    def rec(k: int) -> bool:
        nonlocal found, first
        if k == 0:
            found += 1
            if first is None:
                first = list(g)
            return found >= limit
        best, best_count, best_mask = -1, 99, 0
        for j in range(k):
            i = empty[j]
            m = full & ~(rows[R[i]] | cols[C[i]] | boxes[B[i]])
            if i == ban_cell:
                m &= ~ban_bit
            if not m:
                return False
            n = m.bit_count()
            if n < best_count:
                best, best_count, best_mask = j, n, m
                if n == 1:
                    break
        i = empty[best]
        empty[best], empty[k - 1] = empty[k - 1], i
        r, c, b = R[i], C[i], B[i]
        bits = []
        m = best_mask
        while m:
            bit = m & -m
            m ^= bit
            bits.append(bit)
        if rng is not None and len(bits) > 1:
            rng.shuffle(bits)
        for bit in bits:
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            g[i] = bit.bit_length() - 1
            done = rec(k - 1)
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[b] ^= bit
            g[i] = 0
            if done:
                return True
        # No need to undo the swap: deeper calls only permute empty[:k - 1].
        return False

    rec(len(empty))
    return found, first


def count_solutions(grid: list[int], scale: int, limit: int = 2) -> int:
    """How many solutions ``grid`` (row-major, 0 = empty) has, counting up to ``limit``."""
    return _search(list(grid), scale, limit)[0]


def generate_puzzle(scale: int, clues: int, rng: random.Random) -> tuple[list[int], list[int]]:
    """A ``(solution, puzzle)`` pair: ``clues`` cells emptied, the solution still unique.

    Fills a random grid, then empties cells in random order, keeping each removal only
    when no other digit fits that cell in any solution; restarts from a new grid in the
    rare case the order runs out before ``clues`` cells are empty.
    """
    size = scale * scale
    while True:
        _, solution = _search([0] * size, scale, 1, rng=rng)
        assert solution is not None
        puzzle = list(solution)
        order = list(range(size))
        rng.shuffle(order)
        removed = 0
        for i in order:
            digit = puzzle[i]
            puzzle[i] = 0
            if _search(puzzle, scale, 1, ban_cell=i, ban_digit=digit)[0]:
                puzzle[i] = digit  # another solution would exist: keep the clue
                continue
            removed += 1
            if removed == clues:
                return solution, puzzle


class SudokuEnv(LanguageGame):
    r"""Fill a ``scale`` x ``scale`` Sudoku (4 or 9) whose solution is unique.

    Observation: the rules at reset; then the feedback on the last move and the grid with
        row labels R1.. and column labels C1.., empty cells shown as ``.``.
    Action: ``\boxed{row col digit}``, 1-based, e.g. ``\boxed{1 3 5}`` puts 5 in row 1,
        column 3 (commas and ``R``/``C`` prefixes also parse: ``\boxed{R1, C3, 5}``). A
        parsable move that cannot be right is an *invalid move* with its own message and
        ``invalid_penalty`` (default 0.0), no state change: outside the grid, a filled
        cell, a digit already in the row, column or box, or a digit that admits no
        solution (the puzzle's solution is unique, so only its digit fits). Anything else
        is a format error.
    Rewards: 1.0 for the move that completes the grid (terminates, success). Every other
        correct placement pays ``progress_scale / clues``; cells never empty again, so the
        sum of progress rewards over any episode is in ``[0, progress_scale)`` (default
        0.1) and cannot be farmed. Format errors pay ``format_penalty`` (-0.1).
    Episode end: terminated when the grid is complete; truncated after ``max_turns``.
    Generation: a random full grid, then cells emptied in random order while the
        solution stays unique (checked by an exact bitmask solver), until exactly
        ``clues`` cells are empty. 9x9 with 50 empty cells takes about 5 ms.
    Arguments:
        clues: the number of EMPTY cells — the reference GEM's meaning (its generator
            removes ``clues`` cells), so a puzzle shows ``scale² − clues`` given digits.
            At most 12 for 4x4 and 55 for 9x9. ``None``: drawn at each reset (-random).
        scale: grid side, 4 or 9 (``None``: drawn at each reset, -random).
        max_turns: turn budget (``None``: 15 for 4x4 / 10 clues, 50 for 9x9 / 50 clues,
            else ``clues + 5``).
        progress_scale: total progress reward available in one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Variants: easy 4x4 with 10 empty cells in 15 turns; hard 9x9 with 50 empty cells in
        50 turns (no room for mistakes); random: one of (4, 10, 15) and (9, 50, 50) as
        (scale, clues, max_turns) per reset.
    Version history: v0 — the reference GEM's ids, settings and ``\boxed{row col digit}``.
    """

    title = "Sudoku"

    def __init__(
        self,
        clues: int | None = 30,
        scale: int | None = 9,
        max_turns: int | None = 100,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        if scale is not None and scale not in MAX_CLUES:
            raise InvalidArgument(f"scale must be 4, 9 or None, got {scale!r}")
        if clues is not None:
            cap = MAX_CLUES[scale] if scale is not None else min(MAX_CLUES.values())
            if isinstance(clues, bool) or not isinstance(clues, int) or not 1 <= clues <= cap:
                raise InvalidArgument(
                    f"clues (the number of empty cells) must be an int in [1, {cap}] for "
                    f"scale={scale}, got {clues!r}"
                )
        self._clues_arg = clues
        self._scale_arg = scale
        self.scale = scale or 9
        self.clues = clues or 1
        self.progress_scale = float(progress_scale)
        self.solution: list[int] = []
        self.board: list[int] = []
        self.empty = 0
        self.history: list[str] = []
        self._rows: list[int] = []
        self._cols: list[int] = []
        self._boxes: list[int] = []
        self._grid: str | None = None
        self._row_text: list[str] = []
        self._box = 3

    # --- setup ---------------------------------------------------------------------------
    def configure(self) -> None:
        scale, clues = self._scale_arg, self._clues_arg
        if scale is None:
            scale, default_clues, default_turns = self.rng.choice(_RANDOM_CONFIGS)
        else:
            default_clues, default_turns = _DEFAULTS[scale]
        if clues is None:
            clues = default_clues
        if self._max_turns_arg is None:
            self.max_turns = default_turns if clues == default_clues else clues + 5
        self.scale, self.clues = scale, clues

    def new_game(self) -> None:
        s = self.scale
        self.solution, self.board = generate_puzzle(s, self.clues, self.rng)
        self.empty = self.clues
        self.history = []
        R, C, B = _units(s)
        self._rows, self._cols, self._boxes = [0] * s, [0] * s, [0] * s
        for i, v in enumerate(self.board):
            if v:
                self._rows[R[i]] |= 1 << v
                self._cols[C[i]] |= 1 << v
                self._boxes[B[i]] |= 1 << v
        self._box = int(round(s**0.5))
        self._row_text = []
        self._grid = None

    # --- text ----------------------------------------------------------------------------
    def instructions(self) -> str:
        s = self.scale
        box = int(round(s**0.5))
        return (
            f"You are playing {self.title} on a {s}x{s} grid. Fill every empty cell (shown as "
            f".) with a digit from 1 to {s} so that each row, each column and each {box}x{box} "
            f"box contains every digit exactly once. Rows are numbered 1 to {s} from the top "
            f"and columns 1 to {s} from the left. Given digits cannot be changed. The puzzle "
            f"has exactly one solution; {self.clues} cells are empty and you have "
            f"{self.max_turns} turns. Give each move as \\boxed{{row column digit}}, for "
            "example \\boxed{1 3 4} puts 4 in row 1, column 3."
        )

    def format_hint(self) -> str:
        return r"Give your move as \boxed{row column digit}, e.g. \boxed{1 3 4}."

    def _render_row(self, r: int) -> str:
        s, box = self.scale, self._box
        cells = [_CELLS[v] for v in self.board[r * s : r * s + s]]
        return f"R{r + 1:<2} " + " | ".join(
            [" ".join(cells[g : g + box]) for g in range(0, s, box)]
        )

    def _render_grid(self) -> str:
        if self._grid is None:
            s, box = self.scale, self._box
            if not self._row_text:
                self._row_text = [self._render_row(r) for r in range(s)]
            head = "    " + " | ".join(
                " ".join(f"C{c + 1}" for c in range(g, g + box)) for g in range(0, s, box)
            )
            sep = "    " + "-+-".join("-" * (3 * box - 1) for _ in range(0, s, box))
            lines = [head]
            for r in range(s):
                if r and r % box == 0:
                    lines.append(sep)
                lines.append(self._row_text[r])
            self._grid = "\n".join(lines)
        return self._grid

    def render(self) -> str:
        return (
            f"{self._render_grid()}\nEmpty cells left: {self.empty}. "
            f"Turn {self.turn}/{self.max_turns}. Enter your move."
        )

    def state_summary(self) -> str:
        s = self.scale
        rows = "/".join(
            "".join(str(v) if v else "." for v in self.board[r * s : r * s + s]) for r in range(s)
        )
        last = f" Last moves: {'; '.join(self.history[-3:])}." if self.history else ""
        return (
            f"Turn {self.turn}/{self.max_turns}. {self.empty} empty cells. Grid rows: {rows}.{last}"
        )

    # --- rules ---------------------------------------------------------------------------
    def parse_move(self, content: str) -> tuple[int, int, int] | None:
        # "row column digit": optional R/C prefixes, commas or spaces between, ":" or "="
        # before the digit (``R1, C2 = 5``). Read with a scanner: the former regex
        # backtracked through the runs of spaces (307 s on an 803-character box).
        sc = MoveScanner(content)
        sc.space()
        sc.take("Rr")
        sc.space()
        row = sc.integer()
        if row is None or not sc.separator(","):
            return None
        sc.take("Cc")
        sc.space()
        col = sc.integer()
        if col is None or not sc.separator(",:="):
            return None
        digit = sc.integer()
        sc.space()
        if digit is None or not sc.at_end():
            return None
        return int(row), int(col), int(digit)

    def apply_move(self, move: tuple[int, int, int]) -> MoveResult:
        r, c, d = move
        s = self.scale
        where = f"{d} at row {r}, column {c}"
        if not (1 <= r <= s and 1 <= c <= s):
            return self._invalid(f"row {r}, column {c} is outside the {s}x{s} grid")
        if not 1 <= d <= s:
            return self._invalid(f"the digit must be between 1 and {s}, got {d}")
        i = (r - 1) * s + (c - 1)
        if self.board[i]:
            return self._invalid(f"row {r}, column {c} is already filled with {self.board[i]}")
        R, C, B = _units(s)
        bit = 1 << d
        if self._rows[R[i]] & bit:
            return self._invalid(f"cannot place {where}: row {r} already has a {d}")
        if self._cols[C[i]] & bit:
            return self._invalid(f"cannot place {where}: column {c} already has a {d}")
        if self._boxes[B[i]] & bit:
            return self._invalid(f"cannot place {where}: its box already has a {d}")
        if self.solution[i] != d:
            return self._invalid(f"cannot place {where}: the grid would then have no solution")
        self.board[i] = d
        self._rows[R[i]] |= bit
        self._cols[C[i]] |= bit
        self._boxes[B[i]] |= bit
        self.empty -= 1
        self.history.append(f"{r} {c} {d}")
        if self._row_text:
            self._row_text[r - 1] = self._render_row(r - 1)
        self._grid = None
        if self.empty == 0:
            return MoveResult(
                f"Turn {self.turn}: placed {where}. The grid is complete. Solved!",
                1.0,
                terminated=True,
                success=True,
            )
        return MoveResult(f"Turn {self.turn}: placed {where}.", self.progress_scale / self.clues)

    def _invalid(self, why: str) -> MoveResult:
        return MoveResult(
            f"Turn {self.turn}: invalid move: {why}. Nothing changed.",
            self.invalid_penalty,
            invalid=True,
        )

    def sample_random_action(self) -> str:
        s, rng = self.scale, self.rng
        return f"\\boxed{{{rng.randint(1, s)} {rng.randint(1, s)} {rng.randint(1, s)}}}"


def oracle(env: SudokuEnv) -> str:
    """Fill the first empty cell (row-major) with the solution's digit."""
    s = env.scale
    for i, v in enumerate(env.board):
        if not v:
            return f"\\boxed{{{i // s + 1} {i % s + 1} {env.solution[i]}}}"
    return r"\boxed{1 1 1}"
