"""Tower of Hanoi: move a tower of disks from peg A to peg C, one disk at a time."""

from __future__ import annotations

import string

from gem_core.envs.games.base import LanguageGame, MoveResult, MoveScanner
from gem_core.errors import InvalidArgument

__all__ = ["TowerofHanoiEnv", "oracle", "distance_to_goal", "PEGS"]

PEGS = "ABC"
_GOAL = 2  # peg C
# (num_disks, max_turns) pairs of the reference GEM's -random variant.
_RANDOM_CONFIGS = ((3, 10), (4, 20), (5, 35))
_DEFAULT_TURNS = dict(_RANDOM_CONFIGS)
_INDEX = {p: i for i, p in enumerate(PEGS)}
# What the former ``[A-Za-z]`` under ``re.IGNORECASE`` matched: ASCII letters and the four
# letters Unicode case-folds onto them (they name no peg, so they give "there is no peg").
_LETTERS = string.ascii_letters + "\u0130\u0131\u017f\u212a"
_ARROWS = (",", "->", "→", "to", "To", "tO", "TO")


def _last_peg(sc: MoveScanner) -> str | None:
    """The target letter when the rest of the text is that letter and an optional full stop."""
    letter = sc.take(_LETTERS)
    sc.space()
    sc.take(".")
    sc.space()
    return letter if letter is not None and sc.at_end() else None


def _plan(peg_of: list[int], target: int = _GOAL) -> tuple[int, list[tuple[int, int, int]]]:
    """Distance to "all disks on ``target``" and the chain of pending disk moves.

    ``peg_of[d]`` is the peg (0-2) of disk ``d`` (1 = smallest; index 0 unused). Walking
    from the largest disk down: a disk already on its target keeps the target for the
    smaller ones; a disk that must move costs ``2**(d-1)`` moves (it moves once, and the
    ``d-1`` smaller disks first gather on the third peg and later follow), and the third
    peg becomes the target of the smaller disks. The last pending move is the one to
    make now. This is the exact shortest distance on the Hanoi graph.
    """
    dist = 0
    pending: list[tuple[int, int, int]] = []
    for d in range(len(peg_of) - 1, 0, -1):
        src = peg_of[d]
        if src != target:
            dist += 1 << (d - 1)
            pending.append((d, src, target))
            target = 3 - src - target
    return dist, pending


def _distance(peg_of: list[int]) -> int:
    """`_plan`'s distance alone (the per-step hot path)."""
    dist, target = 0, _GOAL
    for d in range(len(peg_of) - 1, 0, -1):
        src = peg_of[d]
        if src != target:
            dist += 1 << (d - 1)
            target = 3 - src - target
    return dist


def distance_to_goal(pegs: list[list[int]]) -> int:
    """The fewest legal moves from ``pegs`` (bottom-to-top disk lists) to all disks on C."""
    n = sum(len(p) for p in pegs)
    peg_of = [0] * (n + 1)
    for i, peg in enumerate(pegs):
        for d in peg:
            peg_of[d] = i
    return _plan(peg_of)[0]


class TowerofHanoiEnv(LanguageGame):
    r"""Move ``num_disks`` disks from peg A to peg C; never put a disk on a smaller one.

    Observation: the rules at reset; then the feedback on the last move and the three
        pegs, each listed bottom to top (``A: [3, 2, 1]``; larger number = larger disk).
    Action: ``\boxed{A C}`` — move the top disk of the first peg onto the second
        (``\boxed{AC}``, ``\boxed{a, c}`` and ``\boxed{A to C}`` also parse). Two letters
        that are not a legal move (empty source, larger onto smaller, the same peg, a peg
        other than A/B/C) are *invalid moves*: ``invalid_penalty`` (default 0.0), no state
        change. Anything else is a format error.
    Rewards: 1.0 when every disk is on C (terminates, success). Every other legal move
        pays a potential-based progress reward ``progress_scale * (Φ(s') − Φ(s))`` with
        ``Φ(s) = 1 − d(s) / (2ⁿ − 1)`` and ``d(s)`` the exact fewest moves left (the Hanoi
        graph distance, at most 2ⁿ − 1 from any state). An optimal move earns
        ``progress_scale / (2ⁿ − 1)``, a move away from the goal costs as much, so moving a
        disk back and forth nets zero. Since ``Φ(start) = 0`` and ``Φ ∈ [0, 1]``, the sum of
        progress rewards over any episode is ``progress_scale * Φ(last state)``, in
        ``[0, progress_scale]`` (default 0.1). Format errors pay ``format_penalty`` (-0.1).
    Episode end: terminated when the tower stands on C; truncated after ``max_turns``.
    Arguments:
        num_disks: tower height (``None``: drawn at each reset, -random).
        max_turns: turn budget (``None``: 10/20/35 for 3/4/5 disks, else ``2ⁿ + n``).
        progress_scale: total progress reward available in one episode.
        format_error, format_penalty, invalid_penalty: see `LanguageGame`.
    Variants: easy 3 disks in 10 turns; hard 5 disks in 35 turns; random: one of
        (3, 10), (4, 20), (5, 35) per reset. The optimal solution takes 2ⁿ − 1 moves.
    Version history: v0 — the reference GEM's ids, settings and ``\boxed{A C}`` syntax.
    """

    title = "Tower of Hanoi"

    def __init__(
        self,
        num_disks: int | None = 3,
        max_turns: int | None = 10,
        progress_scale: float = 0.1,
        **game_kwargs,
    ):
        super().__init__(max_turns=max_turns, **game_kwargs)
        if num_disks is not None and (
            isinstance(num_disks, bool)
            or not isinstance(num_disks, int)
            or not 1 <= num_disks <= 20
        ):
            raise InvalidArgument(f"num_disks must be an int in [1, 20] or None, got {num_disks!r}")
        self._num_disks_arg = num_disks
        self.num_disks = num_disks or 3
        self.progress_scale = float(progress_scale)
        self.pegs: list[list[int]] = [[], [], []]
        self.peg_of: list[int] = []
        self.distance = 0
        self.moves: list[str] = []
        self._board: str | None = None

    # --- setup ---------------------------------------------------------------------------
    def configure(self) -> None:
        n = self._num_disks_arg
        if n is None:
            n, turns = self.rng.choice(_RANDOM_CONFIGS)
            if self._max_turns_arg is None:
                self.max_turns = turns
        elif self._max_turns_arg is None:
            self.max_turns = _DEFAULT_TURNS.get(n, 2**n + n)
        self.num_disks = n

    def new_game(self) -> None:
        n = self.num_disks
        self.pegs = [list(range(n, 0, -1)), [], []]
        self.peg_of = [0] * (n + 1)
        self.distance = 2**n - 1
        self.moves = []
        self._board = None

    # --- text ----------------------------------------------------------------------------
    def instructions(self) -> str:
        n = self.num_disks
        return (
            f"You are playing {self.title} with {n} disks (numbered 1 = smallest to {n} = "
            "largest). Move the whole tower from peg A to peg C. Each turn, move the top disk "
            "of one peg onto another peg; a disk may never be placed on a smaller disk. "
            f"You have {self.max_turns} turns (the shortest solution takes {2**n - 1} moves). "
            "Give each move as \\boxed{SOURCE TARGET}, for example \\boxed{A C} moves the top "
            "disk of A onto C. Pegs are listed bottom to top."
        )

    def format_hint(self) -> str:
        return r"Give your move as \boxed{A C}: the source peg, then the target peg (A, B or C)."

    def render(self) -> str:
        if self._board is None:
            a, b, c = self.pegs
            self._board = f"A: {a}\nB: {b}\nC: {c}"
        return f"Pegs (bottom to top):\n{self._board}\nTurn {self.turn}/{self.max_turns}. Enter your move."

    def state_summary(self) -> str:
        pegs = "; ".join(f"{PEGS[i]}: {peg}" for i, peg in enumerate(self.pegs))
        last = f" Last moves: {', '.join(self.moves[-5:])}." if self.moves else ""
        return f"Turn {self.turn}/{self.max_turns}, {self.num_disks} disks, A to C. {pegs}.{last}"

    # --- rules ---------------------------------------------------------------------------
    def step(self, action: str):
        # The common move in one frame: a flat last box holding "X Y" (two peg letters) that
        # does not solve the puzzle, legal or not. It returns exactly what LanguageGame.step
        # returns for it (tests/envs/games/test_tower_of_hanoi.py plays both side by side);
        # any other action (a format error, other box text, the solving move, a finished
        # episode, a subclass) goes there.
        if type(action) is str and not self.done and self._fast_step:
            _, opener, tail = action.rpartition("\\boxed{")
            content, close, _ = tail.partition("}")
            if opener and close and len(content) == 3 and content[1] == " " and "\\" not in tail:
                s, t = content[0], content[2]
                si, ti = _INDEX.get(s), _INDEX.get(t)
                if si is not None and ti is not None:
                    turn = self.turn + 1
                    pegs = self.pegs
                    src, dst = pegs[si], pegs[ti]
                    if si == ti:
                        why = f"the source and target peg are both {s}"
                    elif not src:
                        why = f"peg {s} is empty"
                    elif dst and dst[-1] < src[-1]:
                        why = f"disk {src[-1]} (top of {s}) cannot go on the smaller disk {dst[-1]} (top of {t})"
                    else:
                        why = None
                    if why is not None:
                        feedback = f"Turn {turn}: invalid move: {why}. Nothing moved."
                        reward = self.invalid_penalty
                        reward = reward if type(reward) is float else float(reward)
                    else:
                        disk = src[-1]
                        peg_of = self.peg_of
                        peg_of[disk] = ti
                        after = _distance(peg_of)
                        if after == 0:  # solved: the general path's terminal step
                            peg_of[disk] = si
                            return LanguageGame.step(self, action)
                        src.pop()
                        dst.append(disk)
                        self.moves.append(content)
                        self._board = None
                        before, self.distance = self.distance, after
                        reward = self.progress_scale * (before - after) / ((1 << self.num_disks) - 1)
                        feedback = f"Turn {turn}: you moved disk {disk} from {s} to {t}."
                    self.turn = turn
                    board = self._board
                    if board is None:
                        a, b, c = pegs
                        self._board = board = f"A: {a}\nB: {b}\nC: {c}"
                    max_turns = self.max_turns
                    obs = f"{feedback}\n\nPegs (bottom to top):\n{board}\nTurn {turn}/{max_turns}. Enter your move."
                    return self._end_fast_turn(turn, obs, reward, why is not None, content)
        return LanguageGame.step(self, action)

    def parse_move(self, content: str) -> tuple[str, str] | None:
        if (
            len(content) == 3
            and content[1] == " "
            and content[0] in _INDEX
            and content[2] in _INDEX
        ):
            return content[0], content[2]  # fast path: "A C"
        # "source target": two letters, optionally joined by ",", "->", "→" or "to" and
        # followed by a full stop. Read with a scanner: the former regex backtracked through
        # the runs of spaces (4.5 s on a 2,000-character box).
        sc = MoveScanner(content)
        sc.space()
        source = sc.take(_LETTERS)
        if source is None:
            return None
        sc.space()
        joint = sc.pos
        target = _last_peg(sc)  # "A B"
        if target is None:  # "A to B" (a text reads one way at most: a joiner is no letter)
            sc.pos = joint
            if sc.literal(*_ARROWS) is None:
                return None
            sc.space()
            target = _last_peg(sc)
        return None if target is None else (source.upper(), target.upper())

    def apply_move(self, move: tuple[str, str]) -> MoveResult | tuple[str, float]:
        s, t = move
        si, ti = _INDEX.get(s), _INDEX.get(t)
        if si is None or ti is None:
            return self._invalid(
                f"there is no peg {s if si is None else t}; the pegs are A, B and C"
            )
        if si == ti:
            return self._invalid(f"the source and target peg are both {s}")
        src, dst = self.pegs[si], self.pegs[ti]
        if not src:
            return self._invalid(f"peg {s} is empty")
        disk = src[-1]
        if dst and dst[-1] < disk:
            return self._invalid(
                f"disk {disk} (top of {s}) cannot go on the smaller disk {dst[-1]} (top of {t})"
            )
        src.pop()
        dst.append(disk)
        self.peg_of[disk] = ti
        self.moves.append(f"{s} {t}")
        self._board = None
        before = self.distance
        self.distance = _distance(self.peg_of)
        if self.distance == 0:
            return MoveResult(
                f"Turn {self.turn}: you moved disk {disk} from {s} to {t}. Solved! The tower "
                f"stands on C after {len(self.moves)} moves.",
                1.0,
                terminated=True,
                success=True,
            )
        reward = self.progress_scale * (before - self.distance) / ((1 << self.num_disks) - 1)
        return f"Turn {self.turn}: you moved disk {disk} from {s} to {t}.", reward  # MoveResult(feedback, reward)

    def _invalid(self, why: str) -> MoveResult:
        return MoveResult(
            f"Turn {self.turn}: invalid move: {why}. Nothing moved.",
            self.invalid_penalty,
            invalid=True,
        )

    def sample_random_action(self) -> str:
        s, t = self.rng.sample(PEGS, 2)
        return f"\\boxed{{{s} {t}}}"


def oracle(env: TowerofHanoiEnv) -> str:
    """The optimal next move from any legal state (2ⁿ − 1 moves from the start)."""
    _, pending = _plan(env.peg_of)
    if not pending:  # already solved; any well-formed action
        return r"\boxed{A C}"
    _, src, dst = pending[-1]
    return f"\\boxed{{{PEGS[src]} {PEGS[dst]}}}"
