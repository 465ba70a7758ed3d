"""`play_row`: play the env a trainer's dataset row names, one episode, for any adapter.

A trainer's dataset row names the env and the seed of one episode: columns ``env_id``
and ``seed``, or the same keys inside the row's ``extra_info`` mapping (numpy scalars
are fine). `play_row` makes the env off the event loop, plays one episode with
`gem_core.rl.run_episode`, closes the env and returns the `gem_core.rl.Episode`; a bad
row or a failed episode raises one error, `gem_core.errors.PlayRowError` (a bad row: its
subclass `gem_core.errors.InvalidRow`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gem_core.errors import InvalidRow, PlayRowError, UnregisteredEnv

if TYPE_CHECKING:
    from gem_core.rl import Episode, SamplingParams

__all__ = ["play_row", "row_value"]

logger = logging.getLogger(__name__)


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") and callable(value.item) else value


def row_value(row: Mapping[str, Any], key: str) -> Any:
    """``row[key]``, else ``row["extra_info"][key]``, as a plain Python value (``None`` if absent)."""
    if row.get(key) is not None:
        return _scalar(row[key])
    extra = row.get("extra_info")
    if isinstance(extra, Mapping) and extra.get(key) is not None:
        return _scalar(extra[key])
    return None


def _env_and_seed(row: Mapping[str, Any], env_key: str, seed_key: str, hint: str) -> tuple[str, int | None]:
    env_id = row_value(row, env_key)
    if not isinstance(env_id, str) or not env_id:
        raise InvalidRow(
            f"play_row needs the env id in the row's {env_key!r} column (or extra_info.{env_key}), "
            f"got {env_id!r} among keys {sorted(row)}{hint}"
        )
    seed = row_value(row, seed_key)
    if seed is not None:
        try:
            if isinstance(seed, bool) or int(seed) != seed:
                raise ValueError
            seed = int(seed)
        except (TypeError, ValueError):
            raise InvalidRow(
                f"the row's {seed_key!r} must be an integer (or missing), got {seed!r} for {env_id}{hint}",
                env_id=env_id,
            ) from None
    return env_id, seed


async def play_row(
    row: Mapping[str, Any],
    policy: Any,
    formatter: Any,
    *,
    env_kwargs: Mapping[str, Any] | None = None,
    sampling: SamplingParams | None = None,
    max_turns: int | None = None,
    truncated_response: str = "pass",
    truncation_reward: float = -1.0,
    generation_timeout: float | None = None,
    executor: concurrent.futures.Executor | None = None,
    env_key: str = "env_id",
    seed_key: str = "seed",
    hint: str = "",
) -> Episode:
    """Play one episode of the env named by a dataset row (packed layout).

    Args:
        row: the row's fields (a dict-like: verl's ``kwargs``, a dataset record).
        policy: the `gem_core.rl.Policy` (typically a `gem_core.rl.BudgetedPolicy`).
        formatter: the episode's `gem_core.rl.ChatFormatter`.
        env_kwargs: keyword arguments of ``gem_core.make``.
        sampling: the `gem_core.rl.SamplingParams` (default ``policy.sampling`` when
            the policy has one, as `BudgetedPolicy` does, else `SamplingParams()`).
        max_turns, truncated_response, truncation_reward, generation_timeout: see
            `gem_core.rl.run_episode`.
        executor: where ``make``, the env calls and ``close`` run (the loop's default
            thread pool when ``None``).
        env_key, seed_key: the row's column names.
        hint: appended to error messages about the row (e.g. how the adapter's dataset
            is written).

    Returns:
        The episode (``episode.error`` is ``None``).

    Raises:
        InvalidRow: the row names no env id, or its seed is not an integer.
        PlayRowError: the env could not be made, or the episode failed (the message
            holds the episode's error).
        UnregisteredEnv: the row's id is not registered in this process (its message names
            the process and how to make a user's env reach it: `gem_core.env_modules`);
            adapters let it stop the step instead of flagging the row.
    """
    from gem_core.rl import run_episode

    env_id, seed = _env_and_seed(row, env_key, seed_key, hint)
    kwargs = dict(env_kwargs or {})
    loop = asyncio.get_running_loop()

    def make() -> Any:
        import gem_core

        return gem_core.make(env_id, **kwargs)

    try:
        env = await loop.run_in_executor(executor, make)
    except UnregisteredEnv:
        raise  # the id is unknown in this process: a deployment error, never a failed row
    except Exception as exc:
        raise PlayRowError(
            f"play_row could not make {env_id} (kwargs {kwargs}): {type(exc).__name__}: {exc}",
            env_id=env_id,
            seed=seed,
        ) from exc
    try:
        episode = await run_episode(
            env,
            policy,
            formatter,
            seed=seed,
            max_turns=max_turns,
            sampling=sampling if sampling is not None else getattr(policy, "sampling", None),
            layout="packed",
            truncated_response=truncated_response,
            truncation_reward=truncation_reward,
            generation_timeout=generation_timeout,
            env_id=env_id,
            executor=executor,
        )
    finally:
        try:
            await loop.run_in_executor(executor, env.close)
        except Exception as exc:  # a failing close must not hide the episode's outcome
            logger.warning("closing %s (seed %s) failed: %s: %s", env_id, seed, type(exc).__name__, exc)
    if episode.error is not None:
        raise PlayRowError(
            f"episode of {env_id} (seed {seed}) failed: {episode.error}", env_id=env_id, seed=seed
        )
    return episode
