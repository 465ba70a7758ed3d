"""2048: slide and merge tiles on a grid until the target tile appears."""

from __future__ import annotations

import math
from functools import cache
from operator import itemgetter

from gem_core.envs.games.base import LanguageGame, MoveResult
from gem_core.errors import InvalidArgument

__all__ = ["Game2048Env", "oracle", "slide", "DIRECTIONS"]

DIRECTIONS = ("up", "down", "left", "right")
# (target_tile, max_turns) pairs of the reference GEM's -random variant.
_RANDOM_CONFIGS = ((16, 20), (32, 30), (64, 50))
_LINE_CACHE_MAX = 500_000
_LINES: dict[tuple[int, ...], tuple[int, ...]] = {}  # line -> the line slid toward index 0
_CELLS = {0: "   ."} | {2**k: f"{2**k:>4}" for k in range(1, 14)}  # 4-wide board cells


@cache
def _index_lines(n: int) -> dict[str, tuple[tuple[tuple[int, ...], itemgetter], ...]]:
    """For each direction, the board's lines as ``(cell indices, getter)``, listed toward
    the slide; ``getter(board)`` is the line's tuple of values."""
    rows = [tuple(r * n + c for c in range(n)) for r in range(n)]
    cols = [tuple(r * n + c for r in range(n)) for c in range(n)]
    lines = {
        "left": rows,
        "right": [r[::-1] for r in rows],
        "up": cols,
        "down": [c[::-1] for c in cols],
    }
    return {d: tuple((idx, itemgetter(*idx)) for idx in v) for d, v in lines.items()}


def _slide_line(line: tuple[int, ...]) -> tuple[int, ...]:
    out = _LINES.get(line)
    if out is None:
        vals = [v for v in line if v]
        merged: list[int] = []
        i = 0
        while i < len(vals):
            if i + 1 < len(vals) and vals[i] == vals[i + 1]:
                merged.append(vals[i] * 2)  # each tile merges at most once per move
                i += 2
            else:
                merged.append(vals[i])
                i += 1
        out = tuple(merged) + (0,) * (len(line) - len(merged))
        if len(_LINES) > _LINE_CACHE_MAX:
            _LINES.clear()
        _LINES[line] = out
    return out


def slide(board: tuple[int, ...] | list[int], n: int, direction: str) -> tuple[int, ...] | None:
    """The board after sliding ``direction`` (no new tile), or ``None`` if nothing moves."""
    new = list(board)
    changed = False
    for idx, get in _index_lines(n)[direction]:
        line = get(board)
        out = _slide_line(line)
        if out != line:
            changed = True
            for i, v in zip(idx, out, strict=True):
                new[i] = v
    return tuple(new) if changed else None


def _can_move(board: list[int], n: int) -> bool:
    for i, v in enumerate(board):
        if v == 0:
            return True
        if i % n < n - 1 and board[i + 1] == v:
            return True
        if i + n < len(board) and board[i + n] == v:
            return True
    return False


class Game2048Env(LanguageGame):
    r"""Slide the tiles of a ``board_size`` x ``board_size`` 2048 board until a tile of
    value ``target_tile`` appears.

    Observation: the rules at reset; then the feedback on the last move and the board,
        one row per line, empty cells shown as ``.``.
    Action: ``\boxed{up}``, ``\boxed{down}``, ``\boxed{left}`` or ``\boxed{right}``
        (case-insensitive): all tiles slide that way and equal neighbours merge once.
        After a move that changes the board a 2 (90%) or a 4 (10%) appears on a random
        empty cell. A direction that changes nothing is an *invalid move*:
        ``invalid_penalty`` (default 0.0), no new tile. Any other box content is a
        format error.
    Rewards: 1.0 when the target tile appears (terminates, success). Every other move
        pays a progress reward ``progress_scale * (Φ(s') − Φ(s))`` with
        ``Φ(s) = (log₂ min(max tile, target) − log₂ m₀) / (log₂ target − log₂ m₀)`` and
        ``m₀`` the largest starting tile. The largest tile never shrinks, so Φ only grows
        from 0 toward 1: the sum of progress rewards over any episode is in
        ``[0, progress_scale]`` (default 0.1) and cannot be farmed. Format errors pay
        ``format_penalty`` (-0.1).
    Episode end: terminated when the target appears (success) or when no move is left
        (failure); truncated after ``max_turns`` turns.
    Arguments:
        target_tile: tile to reach, a power of two ≥ 8 (``None``: drawn at each reset,
            -random).
        max_turns: turn budget (``None``: 20/30/50 for targets 16/32/64, else ``4 *
            target / 5`` rounded up, about what reaching the target takes).
        board_size: board side (default 4, at least 2).
        progress_scale: total progress reward available in one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Variants: easy 64 in 50 turns; hard 512 in 50 turns; extreme-hard 2048 in 100 turns;
        random: one of (16, 20), (32, 30), (64, 50) per reset. Hard and extreme-hard keep
        the reference's settings although no play can reach them: each move adds one
        2 or 4, so a 512 tile needs well over 200 moves and a 2048 tile about 1,000.
    Version history: v0 — the reference GEM's ids, settings and move words.
    """

    title = "2048"

    def __init__(
        self,
        target_tile: int | None = 2048,
        max_turns: int | None = 1000,
        board_size: int = 4,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        if target_tile is not None and (
            isinstance(target_tile, bool)
            or not isinstance(target_tile, int)
            or target_tile < 8
            or target_tile & (target_tile - 1)
        ):
            raise InvalidArgument(
                f"target_tile must be a power of two >= 8 or None, got {target_tile!r}"
            )
        if (
            isinstance(board_size, bool)
            or not isinstance(board_size, int)
            or not 2 <= board_size <= 8
        ):
            raise InvalidArgument(f"board_size must be an int in [2, 8], got {board_size!r}")
        self._target_arg = target_tile
        self.target_tile = target_tile or 64
        self.board_size = board_size
        self.progress_scale = float(progress_scale)
        self.board: list[int] = [0] * (board_size * board_size)
        self.max_tile = 0
        self.start_max_tile = 2
        self.moves: list[str] = []
        self._grid: str | None = None

    # --- setup ---------------------------------------------------------------------------
    def configure(self) -> None:
        target = self._target_arg
        if target is None:
            target, turns = self.rng.choice(_RANDOM_CONFIGS)
        else:
            turns = dict(_RANDOM_CONFIGS).get(target, -(-4 * target // 5))
        if self._max_turns_arg is None:
            self.max_turns = turns
        self.target_tile = target

    def new_game(self) -> None:
        self.board = [0] * (self.board_size * self.board_size)
        self._spawn()
        self._spawn()
        self.max_tile = self.start_max_tile = max(self.board)
        self.moves = []
        self._grid = None

    def _spawn(self) -> None:
        empty = [i for i, v in enumerate(self.board) if v == 0]
        if empty:
            rng = self.rng
            i = empty[rng.randrange(len(empty))]
            self.board[i] = 2 if rng.random() < 0.9 else 4

    def _potential(self, tile: int) -> float:
        lo, hi = math.log2(self.start_max_tile), math.log2(self.target_tile)
        if hi <= lo:
            return 1.0
        return (math.log2(min(tile, self.target_tile)) - lo) / (hi - lo)

    # --- text ----------------------------------------------------------------------------
    def instructions(self) -> str:
        return (
            f"You are playing {self.title} on a {self.board_size}x{self.board_size} board. "
            f"Reach a {self.target_tile} tile within {self.max_turns} turns. Each turn, slide "
            "all tiles up, down, left or right: two equal tiles that meet merge into one tile "
            "of twice the value (each tile merges at most once per move). After every move that "
            "changes the board, a new 2 (or sometimes 4) appears on a random empty cell; a move "
            "that changes nothing wastes the turn. The game is lost when no move is possible. "
            "Give each move as \\boxed{direction}, for example \\boxed{left}."
        )

    def format_hint(self) -> str:
        return r"Give your move as \boxed{up}, \boxed{down}, \boxed{left} or \boxed{right}."

    def _render_grid(self) -> str:
        if self._grid is None:
            n, b = self.board_size, self.board
            if self.max_tile < 10_000:
                cells = [_CELLS[v] for v in b]
            else:
                width = len(str(self.max_tile))
                cells = [f"{v or '.':>{width}}" for v in b]
            self._grid = "\n".join([" ".join(cells[r : r + n]) for r in range(0, n * n, n)])
        return self._grid

    def render(self) -> str:
        return (
            f"Board:\n{self._render_grid()}\nLargest tile: {self.max_tile} (target "
            f"{self.target_tile}). Turn {self.turn}/{self.max_turns}. Enter your move."
        )

    def state_summary(self) -> str:
        n = self.board_size
        rows = " / ".join(
            " ".join(str(v) if v else "." for v in self.board[r * n : r * n + n]) for r in range(n)
        )
        return (
            f"Turn {self.turn}/{self.max_turns}. Target {self.target_tile}, largest tile "
            f"{self.max_tile}. Board: {rows}."
        )

    # --- rules ---------------------------------------------------------------------------
    def parse_move(self, content: str) -> str | None:
        move = content.strip().lower()
        return move if move in DIRECTIONS else None

    def apply_move(self, move: str) -> MoveResult:
        new = slide(self.board, self.board_size, move)
        if new is None:
            return MoveResult(
                f"Turn {self.turn}: invalid move: sliding {move} changes nothing. No new tile.",
                self.invalid_penalty,
                invalid=True,
            )
        self.board = list(new)
        self.moves.append(move)
        before = self.max_tile
        self.max_tile = max(new)
        self._spawn()
        self._grid = None
        if self.max_tile >= self.target_tile:
            return MoveResult(
                f"Turn {self.turn}: you moved {move} and reached the {self.target_tile} tile. You win!",
                1.0,
                terminated=True,
                success=True,
            )
        reward = 0.0
        if self.max_tile > before:
            reward = self.progress_scale * (
                self._potential(self.max_tile) - self._potential(before)
            )
        if not _can_move(self.board, self.board_size):
            return MoveResult(
                f"Turn {self.turn}: you moved {move}. The board is full and no move is left: "
                f"game over (largest tile {self.max_tile}).",
                reward,
                terminated=True,
            )
        return MoveResult(f"Turn {self.turn}: you moved {move}.", reward)

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(DIRECTIONS)}}}"


_INFO: dict[tuple[int, ...], tuple[int, int, int, int]] = {}


def _line_info(line: tuple[int, ...]) -> tuple[int, int, int, int]:
    """``(moved, score)`` of the line slid toward its start, then toward its end.

    The score of a line is the oracle's heuristic: the sum of its squared tiles (which
    rewards merging into few large tiles) plus 4 per empty cell.
    """
    info = _INFO.get(line)
    if info is None:
        fwd = _slide_line(line)
        back = _slide_line(line[::-1])
        info = (
            int(fwd != line),
            sum(v * v if v else 4 for v in fwd),
            int(back != line[::-1]),
            sum(v * v if v else 4 for v in back),
        )
        if len(_INFO) > _LINE_CACHE_MAX:
            _INFO.clear()
        _INFO[line] = info
    return info


def oracle(env: Game2048Env) -> str:
    """Two-ply expectimax: each move, then a new 2 on each empty cell (averaged), then the
    best reply, scored by the sum of squared tiles plus 4 per empty cell.

    Reaches 64 within 50 turns on 199 of the seeds 0-199. The reply scores are summed line
    by line, so placing a tile only re-scores one row and one column.
    """
    n = env.board_size
    board = tuple(env.board)
    best, best_value = None, -1.0
    for move in DIRECTIONS:
        after = slide(board, n, move)
        if after is None:
            continue
        rows = [after[r * n : r * n + n] for r in range(n)]
        cols = [after[c::n] for c in range(n)]
        rinfo = [_line_info(x) for x in rows]
        cinfo = [_line_info(x) for x in cols]
        # Sums over the lines for the replies left (row fwd), right (row back), up, down.
        lm, ls, rm, rs = (sum(x[k] for x in rinfo) for k in range(4))
        um, us, dm, ds = (sum(x[k] for x in cinfo) for k in range(4))
        total, empty = 0, 0
        for i, v in enumerate(after):
            if v:
                continue
            empty += 1
            r, c = divmod(i, n)
            row, col = rows[r], cols[c]
            a = _line_info(row[:c] + (2,) + row[c + 1 :])
            b = _line_info(col[:r] + (2,) + col[r + 1 :])
            oa, ob = rinfo[r], cinfo[c]
            reply = 0
            if lm - oa[0] + a[0]:
                reply = ls - oa[1] + a[1]
            if rm - oa[2] + a[2]:
                reply = max(reply, rs - oa[3] + a[3])
            if um - ob[0] + b[0]:
                reply = max(reply, us - ob[1] + b[1])
            if dm - ob[2] + b[2]:
                reply = max(reply, ds - ob[3] + b[3])
            total += reply
        value = total / empty if empty else float(sum(v * v if v else 4 for v in after))
        if value > best_value:
            best, best_value = move, value
    return f"\\boxed{{{best or 'up'}}}"
