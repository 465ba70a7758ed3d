"""Datasets for the reference-shaped task envs (`MathEnv`, `QaEnv`, `CodeEnv` of `gem_core.compat.envs`).

The reference envs hold a ``datasets.Dataset`` in ``self.dataset`` and code written against
them (ROLL's env managers) calls ``self.dataset.shuffle(seed=...)``, ``len`` and
``self.dataset[i]``. `task_rows` keeps a ``Dataset`` (or ``DatasetDict``) the caller
passes as it is, and serves a dataset named by ``dataset_name`` from gem_core's loader
(`gem_core.data.load_rows`: ``$GEM_DATA_DIR``, ``$GEM_DATA=sample``, the hub) as `Rows`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from gem_core.compat.core import Env
from gem_core.data import load_rows
from gem_core.errors import InvalidArgument

__all__ = ["Rows", "task_rows", "RowTaskEnv", "references"]


def references(gt_answer: Any) -> list[str]:
    """The acceptable answers of a row: a string or number, or a list of them.

    Raises:
        ValueError: another type (as the reference).
    """
    if isinstance(gt_answer, (str, float, int)):
        return [str(gt_answer)]
    if isinstance(gt_answer, list):
        return [str(a) for a in gt_answer]
    raise ValueError(f"Unexpected answer type: {type(gt_answer)}")


class Rows(list):
    """A list of row dicts with the few ``datasets.Dataset`` methods the reference envs use.

    ``rows[i]`` is a row, ``rows["col"]`` the column; ``shuffle(seed=)``, ``select``,
    ``map`` and ``column_names`` return or read new lists (the rows are copied, never
    mutated in place).
    """

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return [row[key] for row in self]
        got = super().__getitem__(key)
        return Rows(got) if isinstance(key, slice) else got

    @property
    def column_names(self) -> list[str]:
        return list(self[0]) if self else []

    def shuffle(self, seed: int | None = None, **_: Any) -> Rows:
        out = Rows(self)
        random.Random(seed).shuffle(out)
        return out

    def select(self, indices: Iterable[int]) -> Rows:
        return Rows(list.__getitem__(self, i) for i in indices)

    def map(self, function: Callable[[dict[str, Any]], dict[str, Any] | None], **_: Any) -> Rows:
        out = Rows()
        for row in self:
            new = dict(row)
            got = function(new)
            out.append(new if got is None else got)
        return out


def task_rows(owner: str, dataset_name: str | None, split: str | None, dataset: Any, required: tuple[str, ...]) -> Any:
    """The rows a reference-shaped task env serves.

    Args:
        owner: the env class (named in errors).
        dataset_name: the hub name (``"axon-rl/GSM-8k"``), loaded by gem_core when
            ``dataset`` is None.
        split: the split (default ``"train"`` for a named dataset; for a ``DatasetDict``
            the only split, else required).
        dataset: a ``datasets.Dataset``/``DatasetDict``, a list of row dicts, or None.
        required: columns every row must have.

    Raises:
        InvalidArgument: no dataset at all, an ambiguous ``DatasetDict`` split, or rows
            without a required column (named).
    """
    if dataset is None:
        if not dataset_name:
            raise InvalidArgument(f"{owner}: pass dataset_name= (a hub name) or dataset= (rows)")
        rows = load_rows(f"{owner}({dataset_name!r})", dataset_name, split or "train", required_keys=required)
        return Rows(rows)
    if hasattr(dataset, "keys") and not hasattr(dataset, "column_names"):  # a DatasetDict / dict of splits
        splits = list(dataset.keys())
        if split is not None:
            dataset = dataset[split]
        elif len(splits) == 1:
            dataset = dataset[splits[0]]
        else:
            raise InvalidArgument(f"{owner}: the dataset has several splits {splits}; pass split=")
    if isinstance(dataset, list) and not isinstance(dataset, Rows):
        dataset = Rows(dataset)
    if len(dataset) == 0:
        raise InvalidArgument(f"{owner}: the dataset is empty")
    columns = list(getattr(dataset, "column_names", None) or dataset[0])
    missing = [k for k in required if k not in columns]
    if missing:
        raise InvalidArgument(f"{owner}: the rows lack the column(s) {missing}; columns found: {sorted(columns)}")
    return dataset


class RowTaskEnv(Env):
    """The reference's row-serving base: ``dataset``, ``idx``, ``epoch``, ``seed``, ``first_obs``.

    ``reset(seed)`` with a seed serves a random row (drawn from the seeded global
    ``random``, as the reference); without one, the next row, reshuffling the dataset with
    ``seed + epoch`` after the last; ``reset(idx=i)`` serves row ``i``.
    Episodes are single-turn: every step ends the episode (``terminated=truncated=True``,
    the reference's), observation `TERMINAL_STATE`.
    """

    question_key = "problem"
    answer_key: str | None = "answer"

    def _init_rows(self, owner: str, dataset_name: Any, split: Any, dataset: Any, seed: int, shuffle: bool) -> None:
        self.seed = seed
        self.dataset_name = dataset_name or ""
        required = (self.question_key,) + ((self.answer_key,) if self.answer_key else ())
        rows = task_rows(owner, dataset_name, split, dataset, required)
        self.dataset = rows.shuffle(seed=seed) if shuffle else rows
        self.idx = 0
        self.epoch = 0
        self.first_obs: Any = None
        self.answer: Any = None

    def _next_row(self, seed: int | None, idx: int | None) -> dict[str, Any]:
        n = len(self.dataset)
        if idx is not None:
            if isinstance(idx, bool) or not 0 <= int(idx) < n:
                raise InvalidArgument(f"{type(self).__name__}.reset(idx={idx!r}): expected 0 <= idx < {n}")
            self.idx = int(idx)
        elif seed is not None:
            self.idx = random.randint(0, n - 1)
        elif self.idx >= n:
            self.epoch += 1
            self.dataset = self.dataset.shuffle(seed=self.seed + self.epoch)
            self.idx = 0
        row = self.dataset[self.idx]
        self.idx += 1
        return row

    def reset(self, seed: int | None = None, idx: int | None = None, **kwargs: Any):  # type: ignore[override]
        super().reset(seed)
        self._serve(self._next_row(seed, idx))
        return self.first_obs, {}

    def _serve(self, row: dict[str, Any]) -> None:
        self.first_obs = row[self.question_key]
        self.answer = row[self.answer_key]

    def get_state(self) -> dict[str, Any]:
        return {"first_obs": self.first_obs, "answer": self.answer}

    def set_state(self, state: dict[str, Any]) -> None:
        self.first_obs = state["first_obs"]
        self.answer = state["answer"]
