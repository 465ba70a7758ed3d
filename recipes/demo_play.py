"""Play episodes of the built-in envs through vector envs and print a summary table.

Launch: ``python recipes/demo_play.py`` (or ``make demo-play``); ``--help`` lists the options.

For every game id (and the toy envs) it runs a random policy and, for games, the oracle,
through `gem_core.make_vec` with autoreset, and prints success rate, mean turns, mean return
and throughput. The random policy runs in an `AsyncVectorEnv` (worker processes); the
oracle needs each sub-env's state, so it runs in a `SyncVectorEnv`.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import gem_core
from gem_core.vector import AsyncVectorEnv, SyncVectorEnv


@dataclass
class Args:
    """Options of the demo."""

    pattern: str = ""
    """only env ids containing this text"""
    num_envs: int = 8
    """sub-envs per vector env"""
    episodes: int = 16
    """finished episodes to collect per env id and policy"""
    seed: int = 0
    """first seed (sub-env i gets seed + i)"""
    mode: str = "async"
    """vectorization of the random policy: sync or async"""


@dataclass
class Tally:
    episodes: int = 0
    successes: int = 0
    turns: list[int] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    steps: int = 0


def run(vec, policy, episodes: int, seed: int) -> tuple[Tally, float]:
    """Step ``vec`` with ``policy(i) -> action`` until ``episodes`` episodes finished."""
    tally = Tally()
    ret = [0.0] * vec.num_envs
    turns = [0] * vec.num_envs
    vec.reset(seed=seed)
    start = time.perf_counter()
    while tally.episodes < episodes:
        actions = [policy(i) for i in range(vec.num_envs)]
        _, rewards, terminated, truncated, infos = vec.step(actions)
        tally.steps += vec.num_envs
        for i in range(vec.num_envs):
            ret[i] += float(rewards[i])
            turns[i] += 1
            if terminated[i] or truncated[i]:
                tally.episodes += 1
                tally.successes += bool(infos[i].get("success", False))
                tally.turns.append(turns[i])
                tally.returns.append(ret[i])
                ret[i], turns[i] = 0.0, 0
        # NEXT_STEP autoreset: the step after an end resets that sub-env (its action ignored).
    return tally, time.perf_counter() - start


def main(args: Args) -> None:
    from gem_core.envs.games.oracles import oracle_for

    ids = sorted(i for i in gem_core.registry if i.startswith(("game:", "toy:")) and args.pattern in i)
    if not ids:
        raise SystemExit(f"no built-in env id contains {args.pattern!r}; see `gem list`")
    print(f"{'env id':<34} {'policy':<7} {'episodes':>8} {'success':>8} {'turns':>6} {'return':>7} {'steps/s':>9}")
    for env_id in ids:
        rows = []
        kind = "async" if args.mode == "async" else "sync"
        vec = gem_core.make_vec(env_id, args.num_envs, vectorization_mode=kind)
        sampler = gem_core.make(env_id)  # draws random actions for any sub-env
        sampler.reset(seed=args.seed)
        try:
            rows.append(("random", *run(vec, lambda i, s=sampler: s.sample_random_action(), args.episodes, args.seed)))
        finally:
            vec.close()
        if env_id.startswith("game:"):
            vec = gem_core.make_vec(env_id, args.num_envs, vectorization_mode="sync")
            assert isinstance(vec, SyncVectorEnv) and not isinstance(vec, AsyncVectorEnv)
            oracle = oracle_for(vec.envs[0])
            try:
                rows.append(("oracle", *run(vec, lambda i, o=oracle, v=vec: o(v.envs[i]), args.episodes, args.seed)))
            finally:
                vec.close()
        for policy, t, seconds in rows:
            n = max(t.episodes, 1)
            print(
                f"{env_id:<34} {policy:<7} {t.episodes:>8} {t.successes / n:>8.2f} "
                f"{sum(t.turns) / n:>6.1f} {sum(t.returns) / n:>7.3f} {t.steps / seconds:>9.0f}"
            )


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, f in Args.__dataclass_fields__.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(f.default), default=f.default)
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    main(parse_args())
