"""Fifteen Puzzle: slide numbered tiles into the blank until the board is in order."""

from __future__ import annotations

import heapq
from functools import cache

from gem_core.envs.games.base import LanguageGame, MoveResult
from gem_core.errors import InvalidArgument

__all__ = ["FifteenPuzzleEnv", "oracle", "solve", "manhattan", "is_solvable", "DIRECTIONS"]

DIRECTIONS = ("up", "down", "left", "right")
_DIRECTION_SET = frozenset(DIRECTIONS)
# (num_rows, max_turns) pairs of the reference GEM's -random variant.
_RANDOM_CONFIGS = ((2, 10), (3, 20), (4, 50))
_DEFAULT_TURNS = dict(_RANDOM_CONFIGS)
_MAX_ROWS = 5
# Oracle: exact IDA* up to this many expanded nodes, then weighted A* (bounded suboptimal).
_IDA_NODE_LIMIT = 300_000
_WA_WEIGHT = 1.5
_PLAN_CACHE_MAX = 200_000
_NEXT: dict[tuple[int, ...], str] = {}  # board -> next move on a solution (the oracle's memo)
_CELLS = ("__",) + tuple(f"{x:2}" for x in range(1, _MAX_ROWS * _MAX_ROWS))


@cache
def _tables(n: int) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[tuple[int, str], ...], ...]]:
    """``md[t][p]``: distance of tile ``t`` at ``p`` from its goal; ``moves[b]``: ``(new blank, name)``."""
    size = n * n
    md = [tuple(0 for _ in range(size))]
    for t in range(1, size):
        g = t - 1
        md.append(tuple(abs(p // n - g // n) + abs(p % n - g % n) for p in range(size)))
    moves = []
    for b in range(size):
        r, c = divmod(b, n)
        opts = []
        # A direction names where the *tile* goes: "up" slides the tile below the blank up.
        if r < n - 1:
            opts.append((b + n, "up"))
        if r > 0:
            opts.append((b - n, "down"))
        if c < n - 1:
            opts.append((b + 1, "left"))
        if c > 0:
            opts.append((b - 1, "right"))
        moves.append(tuple(opts))
    return tuple(md), tuple(moves)


@cache
def _targets(n: int) -> tuple[dict[str, int], ...]:
    """``_targets(n)[blank][direction]``: the cell whose tile slides into the blank."""
    return tuple({name: nb for nb, name in opts} for opts in _tables(n)[1])


def _goal(n: int) -> list[int]:
    return list(range(1, n * n)) + [0]


def manhattan(tiles: list[int] | tuple[int, ...], n: int) -> int:
    """Sum over tiles (not the blank, ``0``) of the distance to their goal cell."""
    md = _tables(n)[0]
    return sum(md[t][p] for p, t in enumerate(tiles))


def is_solvable(tiles: list[int] | tuple[int, ...], n: int) -> bool:
    """Whether the goal is reachable (the permutation-parity invariant)."""
    seq = [t for t in tiles if t]
    inversions = sum(1 for i in range(len(seq)) for j in range(i + 1, len(seq)) if seq[i] > seq[j])
    if n % 2:
        return inversions % 2 == 0
    blank_row_from_bottom = n - list(tiles).index(0) // n
    return (inversions + blank_row_from_bottom) % 2 == 1


def _ida_star(tiles: list[int], n: int, node_limit: int) -> list[str] | None:
    """An optimal solution (move names), or ``None`` past ``node_limit`` expansions."""
    md, moves = _tables(n)
    board = list(tiles)
    blank = board.index(0)
    h0 = manhattan(board, n)
    path: list[str] = []
    nodes = 0
    found = False

    def dfs(blank: int, prev: int, g: int, h: int, bound: int) -> int:
        nonlocal nodes, found
        f = g + h
        if f > bound:
            return f
        if h == 0:
            found = True
            return f
        nodes += 1
        if nodes > node_limit:
            return -1
        best = 1 << 30
        for nb, name in moves[blank]:
            if nb == prev:
                continue
            t = board[nb]
            row = md[t]
            nh = h + row[blank] - row[nb]
            board[blank], board[nb] = t, 0
            path.append(name)
            r = dfs(nb, blank, g + 1, nh, bound)
            if found:
                return r
            board[nb], board[blank] = t, 0
            path.pop()
            if r < 0:
                return -1
            if r < best:
                best = r
        return best

    bound = h0
    while True:
        r = dfs(blank, -1, 0, h0, bound)
        if found:
            return path
        if r < 0 or r >= 1 << 30:
            return None
        bound = r


def _weighted_a_star(tiles: list[int], n: int, weight: float) -> list[str]:
    """A solution at most ``weight`` times longer than optimal (the puzzle must be solvable)."""
    md, moves = _tables(n)
    start = tuple(tiles)
    h0 = manhattan(start, n)
    parent: dict[tuple[int, ...], tuple[tuple[int, ...], str] | None] = {start: None}
    g_of = {start: 0}
    heap = [(weight * h0, 0, h0, start.index(0), start)]
    while heap:
        _, g, h, blank, state = heapq.heappop(heap)
        if h == 0:
            out = []
            while parent[state] is not None:
                state, name = parent[state]  # type: ignore[misc]
                out.append(name)
            return out[::-1]
        if g > g_of[state]:
            continue
        for nb, name in moves[blank]:
            t = state[nb]
            nxt = list(state)
            nxt[blank], nxt[nb] = t, 0
            key = tuple(nxt)
            if g + 1 < g_of.get(key, 1 << 30):
                g_of[key] = g + 1
                parent[key] = (state, name)
                nh = h + md[t][blank] - md[t][nb]
                heapq.heappush(heap, (g + 1 + weight * nh, g + 1, nh, nb, key))
    raise ValueError("unsolvable board")


def solve(
    tiles: list[int] | tuple[int, ...], n: int, node_limit: int = _IDA_NODE_LIMIT
) -> list[str]:
    """Moves that solve the board: optimal (IDA*, Manhattan heuristic) when found within
    ``node_limit`` expansions, else weighted A* (at most 1.5x optimal)."""
    if not is_solvable(tiles, n):
        raise InvalidArgument(f"board {list(tiles)} is not solvable")
    plan = _ida_star(list(tiles), n, node_limit)
    return plan if plan is not None else _weighted_a_star(list(tiles), n, _WA_WEIGHT)


class FifteenPuzzleEnv(LanguageGame):
    r"""Slide tiles on an ``num_rows`` x ``num_rows`` board until it reads 1, 2, ... in order
    with the blank in the bottom-right corner.

    Observation: the rules at reset; then the feedback on the last move and the board,
        one row per line, the blank shown as ``__``.
    Action: ``\boxed{up}``, ``\boxed{down}``, ``\boxed{left}`` or ``\boxed{right}``
        (case-insensitive): the direction a tile slides *into* the blank — ``up`` moves the
        tile below the blank up. A direction with no tile to slide (the blank is on that
        edge) is an *invalid move*: ``invalid_penalty`` (default 0.0), no state change.
        Any other box content is a format error.
    Rewards: 1.0 when solved (terminates, success). Every other legal move pays a
        potential-based progress reward ``progress_scale * (Φ(s') − Φ(s))`` with
        ``Φ(s) = −min(M(s), M₀) / M₀``, where ``M`` is the Manhattan distance of the tiles
        to their goal cells and ``M₀ = M(start) > 0``. Each move changes ``M`` by one, so a
        move toward the goal earns ``progress_scale / M₀`` and a move away costs as much
        (nothing below the starting potential): sliding a tile back and forth nets zero.
        The sum of progress rewards over any episode is ``progress_scale * (Φ(last) + 1)``,
        in ``[0, progress_scale]`` (default 0.1). Format errors pay ``format_penalty``.
    Episode end: terminated when solved; truncated after ``max_turns`` turns.
    Generation: a random walk from the solved board (never undoing its previous step) of
        a length drawn uniformly from ``[ceil(L/2), L]``, ``L = scramble_moves``, redrawn
        if it ends solved. Every board is therefore reachable and solvable in at most
        ``L ≤ max_turns`` moves (the reference's 100-move walks often are not).
    Arguments:
        num_rows: board side, 2 to 5 (``None``: drawn at each reset, -random).
        max_turns: turn budget (``None``: 10/20/50 for 2/3/4 rows, else ``3 n²``).
        scramble_moves: longest scramble walk ``L`` (``None``: ``3 * max_turns // 5``);
            must not exceed ``max_turns``.
        progress_scale: total progress reward available in one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Variants: easy 2x2 in 10 turns; hard 4x4 in 50 turns; random: one of (2, 10),
        (3, 20), (4, 50) per reset.
    Version history: v0 — the reference GEM's ids, settings and move words; boards are
        scrambled by bounded walks so they fit the turn budget.
    """

    title = "Fifteen Puzzle"

    def __init__(
        self,
        num_rows: int | None = 2,
        max_turns: int | None = 20,
        scramble_moves: int | None = None,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        if num_rows is not None and (
            isinstance(num_rows, bool)
            or not isinstance(num_rows, int)
            or not 2 <= num_rows <= _MAX_ROWS
        ):
            raise InvalidArgument(
                f"num_rows must be an int in [2, {_MAX_ROWS}] or None, got {num_rows!r}"
            )
        if scramble_moves is not None:
            if (
                isinstance(scramble_moves, bool)
                or not isinstance(scramble_moves, int)
                or scramble_moves < 1
            ):
                raise InvalidArgument(
                    f"scramble_moves must be a positive int or None, got {scramble_moves!r}"
                )
            if max_turns is not None and scramble_moves > max_turns:
                raise InvalidArgument(
                    f"scramble_moves={scramble_moves} exceeds max_turns={max_turns}: boards "
                    "could need more moves than the budget allows; lower scramble_moves"
                )
        self._num_rows_arg = num_rows
        self._scramble_arg = scramble_moves
        self.num_rows = num_rows or 2
        self.scramble_moves = 1
        self.progress_scale = float(progress_scale)
        self.tiles: list[int] = _goal(self.num_rows)
        self.blank = len(self.tiles) - 1
        self.distance = 0  # Manhattan distance now
        self.start_distance = 1
        self.moves: list[str] = []
        self._board: str | None = None
        self._md, _ = _tables(self.num_rows)
        self._targets = _targets(self.num_rows)

    # --- setup ---------------------------------------------------------------------------
    def configure(self) -> None:
        n = self._num_rows_arg
        if n is None:
            n, turns = self.rng.choice(_RANDOM_CONFIGS)
            if self._max_turns_arg is None:
                self.max_turns = turns
        elif self._max_turns_arg is None:
            self.max_turns = _DEFAULT_TURNS.get(n, 3 * n * n)
        self.num_rows = n
        scramble = self._scramble_arg or max(1, 3 * self.max_turns // 5)
        self.scramble_moves = min(scramble, self.max_turns)

    def new_game(self) -> None:
        n = self.num_rows
        _, moves = _tables(n)
        rng = self.rng
        goal = _goal(n)
        high = self.scramble_moves
        low = (high + 1) // 2
        while True:
            tiles = list(goal)
            blank, prev = len(tiles) - 1, -1
            for _ in range(rng.randint(low, high)):
                opts = [m for m in moves[blank] if m[0] != prev]
                nb = rng.choice(opts)[0]
                tiles[blank], tiles[nb] = tiles[nb], 0
                prev, blank = blank, nb
            if tiles != goal:
                break
        self.tiles = tiles
        self.blank = blank
        self.distance = self.start_distance = manhattan(tiles, n)
        self.moves = []
        self._board = None
        self._md = _tables(n)[0]
        self._targets = _targets(n)

    # --- text ----------------------------------------------------------------------------
    def instructions(self) -> str:
        n = self.num_rows
        last = n * n - 1
        return (
            f"You are playing the {last}-Puzzle ({n}x{n} {self.title}). Arrange the tiles in "
            f"ascending order from 1 to {last}, row by row, with the empty space (shown as __) "
            "in the bottom-right corner. Each turn, slide one tile next to the empty space "
            "into it:\n"
            "- up: the tile below the empty space moves up.\n"
            "- down: the tile above the empty space moves down.\n"
            "- left: the tile right of the empty space moves left.\n"
            "- right: the tile left of the empty space moves right.\n"
            f"You have {self.max_turns} turns. Give each move as \\boxed{{direction}}, for "
            "example \\boxed{up}."
        )

    def format_hint(self) -> str:
        return r"Give your move as \boxed{up}, \boxed{down}, \boxed{left} or \boxed{right}."

    def _grid(self) -> str:
        if self._board is None:
            n, cells = self.num_rows, [_CELLS[x] for x in self.tiles]
            self._board = "\n".join([" ".join(cells[r : r + n]) for r in range(0, n * n, n)])
        return self._board

    def render(self) -> str:
        return f"Board:\n{self._grid()}\nTurn {self.turn}/{self.max_turns}. Enter your move."

    def observe(self, feedback: str) -> str:
        # ``f"{feedback}\n\n{self.render()}"`` in one string.
        return f"{feedback}\n\nBoard:\n{self._grid()}\nTurn {self.turn}/{self.max_turns}. Enter your move."

    def state_summary(self) -> str:
        rows = " / ".join(
            " ".join(
                "_" if x == 0 else str(x)
                for x in self.tiles[r * self.num_rows : (r + 1) * self.num_rows]
            )
            for r in range(self.num_rows)
        )
        return (
            f"Turn {self.turn}/{self.max_turns}. Board: {rows}. Tiles out of place (Manhattan "
            f"distance {self.distance}); last moves: {', '.join(self.moves[-5:]) or 'none'}."
        )

    # --- rules ---------------------------------------------------------------------------
    def step(self, action: str):
        # The common move in one frame: a flat last box holding a clean direction that does
        # not solve the board. It returns exactly what LanguageGame.step returns for it
        # (tests/envs/games/test_fifteen_puzzle.py plays both side by side); any other action
        # (a format error, other box text, the solving move, a finished episode, a subclass)
        # goes there.
        if type(action) is str and not self.done and self._fast_step:
            _, opener, tail = action.rpartition("\\boxed{")
            move, close, _ = tail.partition("}")
            if opener and close and move in _DIRECTION_SET and "\\" not in tail:
                blank = self.blank
                nb = self._targets[blank].get(move)
                turn = self.turn + 1
                if nb is None:  # no tile on that side of the blank: an invalid move
                    feedback = (
                        f"Turn {turn}: invalid move: no tile can slide {move} (the empty space is "
                        "on that edge). Nothing moved."
                    )
                    reward, invalid = self.invalid_penalty, True
                    reward = reward if type(reward) is float else float(reward)
                else:
                    tiles = self.tiles
                    t = tiles[nb]
                    row = self._md[t]
                    before = self.distance
                    after = before + row[blank] - row[nb]
                    if after == 0:  # solved: the general path's terminal step
                        return LanguageGame.step(self, action)
                    tiles[blank], tiles[nb] = t, 0
                    self.blank, self.distance = nb, after
                    self.moves.append(move)
                    self._board = None
                    m0 = self.start_distance
                    reward = self.progress_scale * (min(before, m0) - min(after, m0)) / m0
                    feedback, invalid = f"Turn {turn}: tile {t} slid {move}.", False
                self.turn = turn
                max_turns = self.max_turns
                obs = f"{feedback}\n\nBoard:\n{self._grid()}\nTurn {turn}/{max_turns}. Enter your move."
                return self._end_fast_turn(turn, obs, reward, invalid, move)
        return LanguageGame.step(self, action)

    def parse_move(self, content: str) -> str | None:
        if content in _DIRECTION_SET:  # the usual move, already clean
            return content
        move = content.strip().lower()
        return move if move in _DIRECTION_SET else None

    def apply_move(self, move: str) -> MoveResult | tuple[str, float]:
        nb = self._targets[self.blank].get(move)
        if nb is None:
            return MoveResult(
                f"Turn {self.turn}: invalid move: no tile can slide {move} (the empty space is "
                "on that edge). Nothing moved.",
                self.invalid_penalty,
                invalid=True,
            )
        tiles, blank = self.tiles, self.blank
        t = tiles[nb]
        tiles[blank], tiles[nb] = t, 0
        self.blank = nb
        row = self._md[t]
        before, self.distance = self.distance, self.distance + row[blank] - row[nb]
        self.moves.append(move)
        self._board = None
        if self.distance == 0:
            return MoveResult(
                f"Turn {self.turn}: tile {t} slid {move}. Solved in {len(self.moves)} moves!",
                1.0,
                terminated=True,
                success=True,
            )
        m0 = self.start_distance
        reward = self.progress_scale * (min(before, m0) - min(self.distance, m0)) / m0
        return f"Turn {self.turn}: tile {t} slid {move}.", reward  # MoveResult(feedback, reward)

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.choice(DIRECTIONS)}}}"


def oracle(env: FifteenPuzzleEnv) -> str:
    """The next move of a shortest solution (IDA* with the Manhattan heuristic; weighted A*,
    at most 1.5x longer, past a node budget).

    Every board of a solution found is memoised with its move (never overwritten, so the
    memo cannot cycle); a move memoised from an exact solution lies on a shortest path, but
    which of several equally short ones is played can depend on earlier calls in the process.
    """
    key = tuple(env.tiles)
    move = _NEXT.get(key)
    if move is None:
        if env.distance == 0:
            return r"\boxed{up}"
        n = env.num_rows
        plan = solve(env.tiles, n)
        if len(_NEXT) > _PLAN_CACHE_MAX:
            _NEXT.clear()
        _, moves = _tables(n)
        tiles, blank = list(env.tiles), env.blank
        for name in plan:
            # Never overwrite: every memoised chain then leads to the goal without cycles.
            _NEXT.setdefault(tuple(tiles), name)
            nb = next(b for b, m in moves[blank] if m == name)
            tiles[blank], tiles[nb] = tiles[nb], 0
            blank = nb
        move = _NEXT[key]
    return f"\\boxed{{{move}}}"
