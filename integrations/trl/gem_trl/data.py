"""The dataset a `gem_trl.trainer.GemGRPOTrainer` trains on: one row per env episode."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["PROMPT_PLACEHOLDER", "make_dataset"]

#: The ``prompt`` column's value: TRL's dataloader needs the column, the env's reset
#: observation is the real prompt.
PROMPT_PLACEHOLDER = "play"


def make_dataset(env_id: str | Iterable[str], seeds: Iterable[int]) -> Any:
    """A ``datasets.Dataset`` with columns ``prompt`` (a placeholder), ``env_id`` and ``seed``.

    TRL's sampler repeats each row ``num_generations`` times, so every group of GRPO
    generations plays the same env seed.

    Args:
        env_id: one env id for every row, or one per seed.
        seeds: the env seed of each row.
    """
    import datasets

    seeds = [int(s) for s in seeds]
    ids = [env_id] * len(seeds) if isinstance(env_id, str) else [str(e) for e in env_id]
    if len(ids) != len(seeds):
        from gem_core.errors import InvalidArgument

        raise InvalidArgument(f"make_dataset got {len(ids)} env ids for {len(seeds)} seeds; pass one per seed")
    return datasets.Dataset.from_dict({"prompt": [PROMPT_PLACEHOLDER] * len(seeds), "env_id": ids, "seed": seeds})
