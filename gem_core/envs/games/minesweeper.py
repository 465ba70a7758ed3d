"""Minesweeper: reveal every safe cell of a grid without hitting a mine."""

from __future__ import annotations

import random
from functools import lru_cache
from math import comb

from gem_core.envs.games.base import LanguageGame, MoveResult
from gem_core.errors import InvalidArgument

__all__ = ["MinesweeperEnv", "mine_probabilities", "oracle"]

_VERBS = ("reveal", "flag")


@lru_cache(maxsize=64)
def _neighbours(rows: int, cols: int) -> tuple[tuple[int, ...], ...]:
    """For each flat cell index ``r * cols + c``, the indices of its (up to 8) neighbours."""
    out = []
    for r in range(rows):
        for c in range(cols):
            out.append(
                tuple(
                    rr * cols + cc
                    for rr in range(max(0, r - 1), min(rows, r + 2))
                    for cc in range(max(0, c - 1), min(cols, c + 2))
                    if (rr, cc) != (r, c)
                )
            )
    return tuple(out)


class MinesweeperEnv(LanguageGame):
    r"""Reveal every cell of a ``rows x cols`` grid that holds no mine.

    The mines are placed when the first cell is revealed, never in that cell nor its
    neighbours (when the board leaves room), so the first reveal is always safe and
    opens an area. The layout is a function of the reset seed and the first cell only.

    Observation: the rules at reset; then the result of the last move and the board:
        ``.`` hidden, ``F`` flagged, ``0``-``8`` a revealed cell with that many adjacent
        mines (rows and columns numbered from 0). When a mine is hit the final board
        shows the mines as ``*``.
    Action: ``\boxed{reveal R C}`` reveals row R, column C (a revealed 0 opens its
        neighbours); ``\boxed{flag R C}`` places or removes a flag (flagged cells cannot
        be revealed; flags are only notes, they are not needed to win). A box that is not
        ``WORD INT INT`` is a format error; another word (``\boxed{dig 1 2}``) is an
        invalid move.
    Rewards: 1.0 for revealing the last safe cell (terminates, success); 0.0 for
        revealing a mine (terminates, failure). Any other reveal pays ``progress_scale *
        newly revealed cells / safe cells``; these progress rewards sum to less than
        ``progress_scale`` (default 0.1) over an episode, since the winning reveal pays
        exactly 1.0. Flag moves pay 0. Out-of-bounds cells, revealing a revealed or
        flagged cell, flagging a revealed cell and unknown verbs are invalid moves
        (``invalid_penalty``, default 0.0, no state change). A format error pays
        ``format_penalty`` (-0.1) and ends the episode by default.
    Episode end: terminated on a win or a mine; truncated after ``max_turns`` turns.
    Arguments:
        rows, cols, num_mines: the board (any ``None``: a square board of side 5-8 with
            side² // 5 mines is drawn at each reset, -random).
        max_turns: turn budget (``None``: rows x cols).
        progress_scale: bound of the total progress reward of one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Variants: easy 5x5 with 5 mines in 25 turns; hard 8x8 with 12 mines in 64 turns;
        random side 5-8, side² // 5 mines, side² turns.
    Version history: v0 — the reference GEM's ids and settings, except that the game is
        won by revealing every safe cell (the reference also required every mine to be
        flagged, which its turn budgets rarely allow).
    """

    title = "Minesweeper"

    def __init__(
        self,
        rows: int | None = 8,
        cols: int | None = 8,
        num_mines: int | None = 10,
        max_turns: int | None = 20,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        for name, value in (("rows", rows), ("cols", cols), ("num_mines", num_mines)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidArgument(f"{name} must be a positive int or None, got {value!r}")
        if None not in (rows, cols, num_mines) and num_mines >= rows * cols:
            raise InvalidArgument(
                f"num_mines must be below rows x cols = {rows * cols} (at least one safe cell), "
                f"got {num_mines}"
            )
        self._board_arg = (rows, cols, num_mines)
        self.rows = rows or 5
        self.cols = cols or 5
        self.num_mines = num_mines or 5
        self.progress_scale = float(progress_scale)
        self._reset_board()

    # --- configuration and setup ------------------------------------------------------
    def configure(self) -> None:
        rows, cols, mines = self._board_arg
        if rows is None or cols is None or mines is None:
            side = self.rng.randint(5, 8)
            rows = cols = side
            mines = side * side // 5
        self.rows, self.cols, self.num_mines = rows, cols, mines
        if self._max_turns_arg is None:
            self.max_turns = rows * cols

    def _reset_board(self) -> None:
        n = self.rows * self.cols
        self.safe_cells = n - self.num_mines
        self.mines: list[bool] = [False] * n
        self.counts: list[int] = [0] * n
        self.revealed: list[bool] = [False] * n
        self.flagged: list[bool] = [False] * n
        self.mines_placed = False
        self.n_revealed = 0
        self._view: list[str] = ["."] * n
        self._neigh = _neighbours(self.rows, self.cols)

    def new_game(self) -> None:
        self._reset_board()
        # The layout is drawn from its own generator at the first reveal, so it depends
        # on the seed and the first cell only (not on how many random actions came before).
        self._layout_seed = self.rng.getrandbits(64)

    def _place_mines(self, first: int) -> None:
        zone = {first, *self._neigh[first]}
        if self.rows * self.cols - len(zone) < self.num_mines:
            zone = {first}
        spots = [i for i in range(self.rows * self.cols) if i not in zone]
        for i in random.Random(self._layout_seed).sample(spots, self.num_mines):
            self.mines[i] = True
        for i, nb in enumerate(self._neigh):
            self.counts[i] = sum(1 for j in nb if self.mines[j])
        self.mines_placed = True

    # --- text -------------------------------------------------------------------------
    def instructions(self) -> str:
        return (
            f"You are playing {self.title} on a {self.rows}x{self.cols} grid with "
            f"{self.num_mines} mines. Reveal every cell without a mine within {self.max_turns} "
            "turns; revealing a mine ends the game. A revealed cell shows how many of its 8 "
            "neighbours hold mines; a revealed 0 opens its neighbours automatically. Hidden "
            "cells are '.', flags 'F'. Rows and columns are numbered from 0. Moves: "
            "\\boxed{reveal R C} to reveal the cell in row R, column C, and \\boxed{flag R C} "
            "to place or remove a flag (flags are optional notes). Your first reveal is "
            f"always safe. For example: \\boxed{{reveal {self.rows // 2} {self.cols // 2}}}."
        )

    def format_hint(self) -> str:
        return r"Give your move as \boxed{reveal R C} or \boxed{flag R C} with R, C integers."

    def render(self, show_mines: bool = False) -> str:
        w = len(str(max(self.rows, self.cols) - 1))
        lines = [" " * (w + 1) + " ".join(str(c).rjust(w) for c in range(self.cols))]
        view = self._view
        if show_mines:
            view = ["*" if m else v for m, v in zip(self.mines, view, strict=True)]
        cols = self.cols
        for r in range(self.rows):
            cells = view[r * cols : (r + 1) * cols]
            if w > 1:
                cells = [v.rjust(w) for v in cells]
            lines.append(f"{str(r).rjust(w)} " + " ".join(cells))
        return "Board:\n" + "\n".join(lines)

    def state_summary(self) -> str:
        return (
            f"Minesweeper {self.rows}x{self.cols}, {self.num_mines} mines, turn "
            f"{self.turn}/{self.max_turns}, revealed {self.n_revealed}/{self.safe_cells} safe "
            f"cells, {sum(self.flagged)} flags.\n" + self.render()
        )

    # --- moves ------------------------------------------------------------------------
    def parse_move(self, content: str) -> tuple[str, int, int] | None:
        tokens = content.replace(",", " ").replace("(", " ").replace(")", " ").split()
        if len(tokens) != 3 or not tokens[0].isalpha():
            return None
        return tokens[0].lower(), int(tokens[1]), int(tokens[2])

    def apply_move(self, move: tuple[str, int, int]) -> MoveResult:
        verb, r, c = move
        t = self.turn
        if verb not in _VERBS:
            return self._invalid(f"Turn {t}: unknown move '{verb[:20]}'; use 'reveal' or 'flag'.")
        if not (0 <= r < self.rows and 0 <= c < self.cols):
            return self._invalid(
                f"Turn {t}: cell ({r}, {c}) is outside the {self.rows}x{self.cols} grid "
                f"(rows 0-{self.rows - 1}, columns 0-{self.cols - 1})."
                if abs(r) < 10**6 and abs(c) < 10**6
                else f"Turn {t}: that cell is outside the {self.rows}x{self.cols} grid."
            )
        i = r * self.cols + c
        if verb == "flag":
            if self.revealed[i]:
                return self._invalid(f"Turn {t}: cell ({r}, {c}) is already revealed; it cannot be flagged.")
            self.flagged[i] = not self.flagged[i]
            self._view[i] = "F" if self.flagged[i] else "."
            what = "placed a flag on" if self.flagged[i] else "removed the flag from"
            return MoveResult(f"Turn {t}: you {what} cell ({r}, {c}).")
        if self.revealed[i]:
            return self._invalid(f"Turn {t}: cell ({r}, {c}) is already revealed.")
        if self.flagged[i]:
            return self._invalid(f"Turn {t}: cell ({r}, {c}) is flagged; remove the flag before revealing it.")
        if not self.mines_placed:
            self._place_mines(i)
        if self.mines[i]:
            return MoveResult(
                f"Boom! Cell ({r}, {c}) holds a mine. Game over.\n\n{self.render(show_mines=True)}",
                0.0,
                terminated=True,
            )
        new = self._open(i)
        if self.n_revealed == self.safe_cells:
            return MoveResult(
                f"Congratulations! You revealed every safe cell in {t} turns.\n\n{self.render()}",
                1.0,
                terminated=True,
                success=True,
            )
        return MoveResult(
            f"Turn {t}: you revealed cell ({r}, {c}); {new} cell(s) opened.",
            self.progress_scale * new / self.safe_cells,
        )

    def _invalid(self, feedback: str) -> MoveResult:
        return MoveResult(feedback, self.invalid_penalty, invalid=True)

    def _open(self, start: int) -> int:
        """Reveal ``start`` (and flood-fill from zeros); return the number of cells opened."""
        revealed, flagged, counts, view, neigh = self.revealed, self.flagged, self.counts, self._view, self._neigh
        revealed[start] = True
        view[start] = str(counts[start])
        opened = 1
        stack = [start] if counts[start] == 0 else []
        while stack:
            for j in neigh[stack.pop()]:
                if not revealed[j] and not flagged[j]:
                    revealed[j] = True
                    view[j] = str(counts[j])
                    opened += 1
                    if counts[j] == 0:
                        stack.append(j)
        self.n_revealed += opened
        return opened

    def sample_random_action(self) -> str:
        verb = "flag" if self.rng.random() < 0.1 else "reveal"
        return f"\\boxed{{{verb} {self.rng.randrange(self.rows)} {self.rng.randrange(self.cols)}}}"


# --------------------------------------------------------------------------- the solver

# Backtracking nodes allowed per component before the solver falls back to local estimates.
_NODE_LIMIT = 300_000


def _component_solutions(cells: list[int], constraints: list[tuple[tuple[int, ...], int]], max_mines: int):
    """Enumerate mine assignments of ``cells`` satisfying ``constraints``.

    Returns ``(total, per_cell)`` where ``total[m]`` counts solutions with m mines and
    ``per_cell[m][k]`` counts those where ``cells[k]`` is a mine; or ``None`` when the
    enumeration exceeds the node limit.
    """
    pos = {cell: k for k, cell in enumerate(cells)}
    n = len(cells)
    cons = [([pos[x] for x in scope], need) for scope, need in constraints]
    # For each cell, the constraints it belongs to; each constraint tracks (mines, unassigned).
    of_cell: list[list[int]] = [[] for _ in range(n)]
    for ci, (scope, _) in enumerate(cons):
        for k in scope:
            of_cell[k].append(ci)
    need = [c[1] for c in cons]
    left = [len(c[0]) for c in cons]
    total = [0] * (n + 1)
    per_cell = [[0] * n for _ in range(n + 1)]
    assign = [0] * n
    nodes = 0

    def rec(k: int, mines: int) -> bool:
        nonlocal nodes
        nodes += 1
        if nodes > _NODE_LIMIT:
            return False
        if k == n:
            total[mines] += 1
            row = per_cell[mines]
            for j in range(n):
                if assign[j]:
                    row[j] += 1
            return True
        for value in (0, 1):
            if value and mines >= max_mines:
                continue
            ok = True
            for ci in of_cell[k]:
                left[ci] -= 1
                need[ci] -= value
            for ci in of_cell[k]:
                if need[ci] < 0 or need[ci] > left[ci]:
                    ok = False
                    break
            if ok:
                assign[k] = value
                if not rec(k + 1, mines + value):
                    for ci in of_cell[k]:
                        left[ci] += 1
                        need[ci] += value
                    return False
            for ci in of_cell[k]:
                left[ci] += 1
                need[ci] += value
        assign[k] = 0
        return True

    if not rec(0, 0):
        return None
    return total, per_cell


def _convolve(a: list[int], b: list[int], cap: int) -> list[int]:
    out = [0] * (min(len(a) + len(b) - 1, cap + 1))
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                if y and i + j <= cap:
                    out[i + j] += x * y
    return out


def mine_probabilities(env: MinesweeperEnv) -> dict[int, float]:
    """The probability that each hidden cell holds a mine, given only what the board shows.

    Exact (all layouts consistent with the numbers and the total mine count equally
    likely), by enumerating each independent part of the frontier; falls back to local
    estimates for a part too large to enumerate. Keys are flat indices ``r * cols + c``;
    flagged cells count as hidden (flags are not trusted).
    """
    n = env.rows * env.cols
    neigh = env._neigh
    revealed, counts = env.revealed, env.counts
    hidden = [i for i in range(n) if not revealed[i]]
    if not env.mines_placed:
        p = env.num_mines / max(1, len(hidden))
        return {i: p for i in hidden}
    constraints: list[tuple[tuple[int, ...], int]] = []
    for i in range(n):
        if revealed[i] and counts[i]:
            scope = tuple(j for j in neigh[i] if not revealed[j])
            if scope:
                constraints.append((scope, counts[i]))
    frontier = sorted({j for scope, _ in constraints for j in scope})
    # Group the frontier into independent components (cells linked through a constraint).
    parent = {c: c for c in frontier}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for scope, _ in constraints:
        root = find(scope[0])
        for j in scope[1:]:
            other = find(j)
            if other != root:
                parent[other] = root
    groups: dict[int, list[int]] = {}
    for c in frontier:
        groups.setdefault(find(c), []).append(c)
    cons_of: dict[int, list[tuple[tuple[int, ...], int]]] = {}
    for con in constraints:
        cons_of.setdefault(find(con[0][0]), []).append(con)

    remaining = env.num_mines
    others = len(hidden) - len(frontier)
    comps = []
    approx: dict[int, float] = {}
    for root, cells in groups.items():
        # Order cells breadth-first through shared constraints, so constraints close early.
        links: dict[int, set[int]] = {c: set() for c in cells}
        for scope, _ in cons_of[root]:
            for j in scope:
                links[j].update(scope)
        order, seen, head = [cells[0]], {cells[0]}, 0
        while head < len(order):
            for j in sorted(links[order[head]]):
                if j not in seen:
                    seen.add(j)
                    order.append(j)
            head += 1
        result = _component_solutions(order, cons_of[root], remaining)
        if result is None:
            for scope, need in cons_of[root]:
                for j in scope:
                    approx[j] = max(approx.get(j, 0.0), need / len(scope))
        else:
            comps.append((order, result[0], result[1]))
    if approx:  # some part too large: local estimates there, exact elsewhere ignored
        rest = [i for i in hidden if i not in approx]
        used = sum(approx.values())
        p_rest = max(0.0, remaining - used) / max(1, len(rest))
        probs = {i: p_rest for i in rest}
        probs.update(approx)
        return probs

    def weight(m: int) -> int:  # layouts of the non-frontier cells given m frontier mines
        k = remaining - m
        return comb(others, k) if 0 <= k <= others else 0

    full = [1]
    for _, tot, _ in comps:
        full = _convolve(full, tot, remaining)
    z = sum(t * weight(m) for m, t in enumerate(full))
    probs: dict[int, float] = {}
    if z == 0:  # cannot happen on a real board; keep the oracle well defined
        return {i: remaining / max(1, len(hidden)) for i in hidden}
    for ci, (order, tot, per_cell) in enumerate(comps):
        rest = [1]
        for cj, (_, tot_j, _) in enumerate(comps):
            if cj != ci:
                rest = _convolve(rest, tot_j, remaining)
        # w_m: weight of this component having m mines, over everything else.
        w = [sum(r * weight(m + mo) for mo, r in enumerate(rest)) for m in range(len(tot))]
        for k, cell in enumerate(order):
            num = sum(per_cell[m][k] * w[m] for m in range(len(tot)))
            probs[cell] = num / z
    if others:
        num = sum(t * weight(m) * (remaining - m) for m, t in enumerate(full))
        p_other = num / (z * others)
        for i in hidden:
            if i not in probs:
                probs[i] = p_other
    return probs


def oracle(env: MinesweeperEnv) -> str:
    """A constraint solver: reveal a provably safe cell, else the least likely mine.

    Uses only what the board shows. The first reveal is the centre (always safe). Then it
    computes exact mine probabilities (`mine_probabilities`: frontier components
    enumerated, weighted by the ways to place the remaining mines elsewhere), reveals a
    cell with probability 0 when there is one, and otherwise guesses the hidden cell with
    the lowest probability (ties: the one with the fewest hidden neighbours, whose number
    is most likely to open up the board). A flagged cell it wants to reveal is unflagged
    first.
    """
    env = env.unwrapped  # accept a wrapped env too
    cols = env.cols
    if not env.mines_placed:
        first = (env.rows // 2) * cols + cols // 2
        if env.flagged[first]:
            candidates = [i for i in range(env.rows * cols) if not env.flagged[i]]
            first = candidates[0] if candidates else first
        return _move(env, first)
    probs = mine_probabilities(env)
    neigh, revealed = env._neigh, env.revealed
    best = min(
        probs,
        key=lambda i: (round(probs[i], 9), sum(1 for j in neigh[i] if not revealed[j]), i),
    )
    return _move(env, best)


def _move(env: MinesweeperEnv, i: int) -> str:
    r, c = divmod(i, env.cols)
    verb = "flag" if env.flagged[i] else "reveal"  # unflag first, reveal next turn
    return f"\\boxed{{{verb} {r} {c}}}"
