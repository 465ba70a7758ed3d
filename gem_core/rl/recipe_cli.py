"""The command line of a single-file recipe: a dataclass of arguments parsed by tyro.

Each recipe states its `Args` dataclass (a docstring under each field: tyro's ``--help``) and
a function naming what is wrong with a combination of arguments; `parse_recipe_args` does the
rest, the same way for every recipe. `field_docs` reads the docstrings back (the recipes'
tests check that ``--help`` shows each one).

Multi-task: every recipe's env flag takes ``ID`` or ``ID=WEIGHT``, repeatable
(`parse_env_mix`); the dataset recipes turn a mixture into rows with `mix_rows`, which
allots the seeds to the envs in proportion to the weights and interleaves them, so every
batch of consecutive rows is close to the mixture.
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "field_docs",
    "parse_recipe_args",
    "use_recipe_env_modules",
    "ENV_MODULE_HELP",
    "ENV_MIX_HELP",
    "parse_env_mix",
    "mix_rows",
]

ENV_MODULE_HELP = (
    "modules (or .py paths) that register your own envs, imported in every process that builds "
    "envs (the trainer's workers, actors, ranks); not needed for envs installed with a "
    "gem_core.envs entry point (docs/plugins.md)"
)
"""The help of every recipe's ``--env-module``."""

ENV_MIX_HELP = (
    "the gem_core env(s) to train on: any registered text env id (`gem list`), each optionally "
    "ID=WEIGHT; several make a multi-task mixture in proportion to the weights (default 1 each)"
)
"""The help of every dataset recipe's env flag."""

T = TypeVar("T")


def parse_recipe_args(
    cls: type[T],
    argv: Sequence[str] | None,
    *,
    description: str | None,
    problem: Callable[[T], str | None],
    passthrough: bool = False,
) -> tuple[T, list[str]]:
    """Parse ``argv`` (default ``sys.argv[1:]``) into ``cls`` with tyro.

    Args:
        cls: the recipe's arguments dataclass.
        argv: the command line without the program name; ``None``: ``sys.argv[1:]``.
        description: the text above ``--help``'s options (its first paragraph is used).
        problem: what is wrong with a parsed combination of arguments, or ``None``; a
            problem prints ``<program>: error: <problem>`` on stderr and exits 2.
        passthrough: everything after the first ``--`` is returned untouched (a trainer's
            own overrides) instead of being parsed.

    Returns:
        ``(args, extra)``: the arguments and what followed ``--`` (empty without
        ``passthrough``).
    """
    import tyro

    args_list = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if passthrough and "--" in args_list:
        cut = args_list.index("--")
        args_list, extra = args_list[:cut], args_list[cut + 1 :]
    args = tyro.cli(cls, args=args_list, description=(description or "").split("\n\n")[0])
    why = problem(args)
    if why is not None:
        print(f"{Path(sys.argv[0]).name}: error: {why}", file=sys.stderr)
        raise SystemExit(2)
    return args, extra


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of the dataclass ``cls`` (what tyro shows as its help),
    by field name, white space folded."""
    body: list[Any] = ast.parse(inspect.getsource(cls)).body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
        ):
            docs[node.target.id] = " ".join(str(nxt.value.value).split())
    return docs


def use_recipe_env_modules(modules: Sequence[str], flag: str = "--env-module") -> dict[str, str]:
    """`gem_core.use_env_modules` for a recipe's ``--env-module``: a module that cannot be
    imported prints ``<program>: error: ...`` and exits 2. Returns the variables that carry
    the modules to the trainer's processes (set in this process's environment too)."""
    from gem_core.env_modules import use_env_modules
    from gem_core.errors import InvalidArgument

    try:
        return use_env_modules(modules)
    except InvalidArgument as exc:
        print(f"{Path(sys.argv[0]).name}: error: {flag}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def parse_env_mix(specs: Sequence[str] | str, flag: str = "--env-id") -> tuple[tuple[str, float], ...]:
    """``["id", "id2=3"]`` -> ``(("id", 1.0), ("id2", 3.0))``: each env once, weights finite,
    >= 0 and not all 0.

    Raises:
        InvalidArgument: a malformed spec, a repeated id, or bad weights, naming the flag.
    """
    import math

    from gem_core.errors import InvalidArgument

    specs = [specs] if isinstance(specs, str) else list(specs)
    if not specs:
        raise InvalidArgument(f"{flag}: name at least one env id (gem list)")
    mix: dict[str, float] = {}
    for spec in specs:
        env_id, sep, weight = str(spec).partition("=")
        env_id = env_id.strip()
        if not env_id:
            raise InvalidArgument(f"{flag} {spec!r}: no env id before '='")
        try:
            w = float(weight) if sep else 1.0
        except ValueError:
            raise InvalidArgument(f"{flag} {spec!r}: the weight after '=' must be a number, e.g. {flag} {env_id}=2") from None
        if not math.isfinite(w) or w < 0:
            raise InvalidArgument(f"{flag} {spec!r}: the weight must be finite and >= 0")
        if env_id in mix:
            raise InvalidArgument(f"{flag}: {env_id!r} is given twice; give each env once, with its weight")
        mix[env_id] = w
    if not any(mix.values()):
        raise InvalidArgument(f"{flag}: the weights are all 0")
    return tuple(mix.items())


def mix_rows(mix: Sequence[tuple[str, float]], seeds: Sequence[int]) -> list[tuple[str, int]]:
    """One ``(env_id, seed)`` row per seed, the envs in proportion to the weights.

    Each env gets ``round(len(seeds) * w / sum(w))`` rows (largest remainders, ties to the
    earlier env, so the counts sum to ``len(seeds)``), and the rows are interleaved by a
    smooth weighted round robin: any run of consecutive rows (a batch) holds each env close
    to its share. Row ``i`` plays seed ``seeds[i]``, so train and validation seed ranges
    stay apart whatever the mixture.
    """
    weights = [float(w) for _, w in mix]
    total = sum(weights)
    n = len(seeds)
    exact = [n * w / total for w in weights]
    counts = [int(e) for e in exact]
    for i in sorted(range(len(mix)), key=lambda i: (-(exact[i] - counts[i]), i))[: n - sum(counts)]:
        counts[i] += 1
    left, credit, order = list(counts), [0.0] * len(mix), []
    for _ in range(n):
        live = [i for i in range(len(mix)) if left[i] > 0]
        for i in live:
            credit[i] += counts[i]
        pick = max(live, key=lambda i: (credit[i], -i))
        credit[pick] -= sum(counts[i] for i in live)
        left[pick] -= 1
        order.append(pick)
    return [(mix[k][0], int(seed)) for k, seed in zip(order, seeds, strict=True)]
