"""`DatasetTaskEnv`: the shared base of the task envs whose episodes are the rows of a dataset
(math, math with images, QA, logic, code)."""

from __future__ import annotations

import operator
import os
import random
from typing import Any

from gem_core.core import Env
from gem_core.data import load_rows
from gem_core.errors import InvalidArgument, ResetNeeded

__all__ = ["DatasetTaskEnv"]


class DatasetTaskEnv(Env[Any, str]):
    """Base of the envs whose episodes are the rows of a dataset: one question, graded.

    Rows: read once per process by `gem_core.data.load_rows` (``data_path`` argument →
    ``$GEM_DATA_DIR`` → ``$GEM_DATA=sample`` → the hub); ``data_path="sample"`` selects
    the small sample shipped with gem-core.

    Row choice (the same for every family):
        - ``reset(seed=s)`` starts a new pass over the rows (an *epoch*) from the seed and
          serves its first row: same seed, same row, in any process. Each epoch is a
          uniformly shuffled order of all rows, drawn lazily (O(1) per reset, however
          large the dataset), from a generator of its own seeded from ``self.rng`` — so
          the order does not depend on other draws such as `sample_random_action`.
        - Unseeded resets continue the epoch, and start a new one (``epoch`` + 1) when
          every row has been served. So the first ``n`` episodes after a seeded reset
          (that reset included) visit each of the ``n`` rows exactly once; an env never
          seeded starts its first epoch from fresh entropy.
        - ``shuffle=False`` keeps file order: an epoch begun by a seeded reset starts at
          a row drawn from the seed and wraps around; later epochs start at row 0.
        - ``reset(options={"index": i})`` serves row ``i`` (an integer, numpy's
          included, ``0 <= i < n``) without touching the epoch; a bad index raises
          `InvalidArgument` naming the range.

    Episode: `step` grades the action (`grade`). A correct answer, or the last of
    ``max_turns`` attempts (default 1: single-turn), ends the episode
    (``terminated=True``; never ``truncated``); otherwise the observation gets
    "Try again: k attempts left." and the episode goes on. A `step` before `reset` or
    after the end raises `ResetNeeded`.

    Info: at reset ``{"index", "turn": 0, "success": False}``; on every step
    ``success``, ``turn``, ``index``, ``format_error`` and ``invalid_action`` (a reply
    with no readable answer), plus the subclass's keys.

    Subclass hooks: `prompt` (the observation of a row; may prepare per-episode state),
    `grade` (``(observation, reward, info)`` with ``info["success"]``),
    `sample_random_action`.

    Args:
        env_id: the id named in error messages (set by the registration).
        dataset_name: the dataset's hub name (as in the reference GEM); also names the
            local copy under ``$GEM_DATA_DIR`` and the shipped sample.
        split: the split to read.
        data_path: a local copy, or ``"sample"`` for the shipped sample.
        required_keys: columns every row must have.
        max_turns: answer attempts per episode (>= 1).
        shuffle: shuffle the order of unseeded resets (``False``: file order).
    """

    def __init__(
        self,
        *,
        env_id: str | None,
        dataset_name: str,
        split: str,
        data_path: str | os.PathLike[str] | None,
        required_keys: tuple[str, ...],
        max_turns: int = 1,
        shuffle: bool = True,
    ):
        self.env_id = env_id or f"{type(self).__name__}({dataset_name!r})"
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise InvalidArgument(
                f"{self.env_id}: max_turns must be an int >= 1 (answer attempts per episode), "
                f"got {max_turns!r}"
            )
        self.dataset_name = dataset_name
        self.split = split
        self.max_turns = max_turns
        self.shuffle = bool(shuffle)
        self.rows: list[dict[str, Any]] = load_rows(
            self.env_id, dataset_name, split, data_path, required_keys=required_keys
        )
        self.row: dict[str, Any] | None = None
        self.index = -1
        self.turn = 0
        self.done = True
        self.epoch = -1  # the current pass over the rows; 0 after the first or a seeded reset
        self._order_rng: random.Random | None = None
        self._k = 0  # rows served in this epoch
        self._swaps: dict[int, int] = {}  # the lazy Fisher-Yates shuffle of this epoch
        self._offset = 0  # shuffle=False: the row the epoch starts at

    # --- row choice -------------------------------------------------------------------------
    def _start_epoch(self, *, seeded: bool) -> None:
        if seeded or self._order_rng is None:
            self._order_rng = random.Random(self.rng.getrandbits(64))
        self.epoch = 0 if seeded else self.epoch + 1
        self._k = 0
        self._swaps = {}
        self._offset = self._order_rng.randrange(len(self.rows)) if seeded and not self.shuffle else 0

    def _next_index(self) -> int:
        n = len(self.rows)
        if self._order_rng is None or self._k >= n:
            self._start_epoch(seeded=False)
        k = self._k
        self._k += 1
        if not self.shuffle:
            return (self._offset + k) % n
        # Fisher-Yates step k over a virtual list [0, n): positions never written hold
        # their own index; position k is not read again, so its entry is dropped.
        j = self._order_rng.randrange(k, n)  # type: ignore[union-attr]
        swaps = self._swaps
        picked = swaps.get(j, j)
        swaps[j] = swaps.get(k, k)
        swaps.pop(k, None)
        return picked

    def _index_option(self, index: Any) -> int:
        n = len(self.rows)
        i: int | None = None
        if not isinstance(index, bool):
            try:
                i = operator.index(index)  # int, numpy and torch integers
            except TypeError:
                i = None
        if i is None or not 0 <= i < n:
            raise InvalidArgument(
                f"{self.env_id}: reset(options={{'index': ...}}) expects an int in [0, {n}) "
                f"(the dataset has {n} rows), got {index!r}"
            )
        return i

    # --- the Env API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._start_epoch(seeded=True)
        if options and options.get("index") is not None:
            self.index = self._index_option(options["index"])
        else:
            self.index = self._next_index()
        self.row = self.rows[self.index]
        self.turn = 0
        self.done = False
        obs = self.prompt(self.row)
        return obs, {"index": self.index, "turn": 0, "success": False}

    def step(self, action: str):
        if self.done or self.row is None:
            raise ResetNeeded(
                f"{self.env_id}: step() called "
                + ("before reset()" if self.row is None else "after the episode ended")
                + "; each episode is one question: call reset() first"
            )
        self.turn += 1
        obs, reward, info = self.grade(action)
        success = bool(info.get("success", False))
        left = self.max_turns - self.turn
        terminated = success or left <= 0
        if not terminated:
            obs = f"{obs} Try again: {left} attempt{'s' if left != 1 else ''} left."
        self.done = terminated
        info["success"] = success
        info.setdefault("format_error", False)
        info.setdefault("invalid_action", info["format_error"])
        info["turn"] = self.turn
        info["index"] = self.index
        return obs, float(reward), terminated, False, info

    def close(self) -> None:
        self.done = True

    # --- hooks ------------------------------------------------------------------------------
    def prompt(self, row: dict[str, Any]) -> Any:
        """The observation of an episode over ``row`` (called once per reset, after
        ``self.row`` and ``self.index`` are set; may prepare per-episode state)."""
        raise NotImplementedError

    def grade(self, action: Any) -> tuple[Any, float, dict[str, Any]]:
        """Grade one reply: ``(observation, reward, info)``; ``info`` holds ``success``.

        Must not raise on bad input (empty, huge, not a string): that is a format error
        with its documented penalty and ``info["format_error"] = True``.
        """
        raise NotImplementedError
