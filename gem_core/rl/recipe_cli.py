"""The command line of a single-file recipe: a dataclass of arguments parsed by tyro.

Each recipe states its `Args` dataclass (a docstring under each field: tyro's ``--help``) and
a function naming what is wrong with a combination of arguments; `parse_recipe_args` does the
rest, the same way for every recipe. `field_docs` reads the docstrings back (the recipes'
tests check that ``--help`` shows each one).
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["field_docs", "parse_recipe_args", "use_recipe_env_modules", "ENV_MODULE_HELP"]

ENV_MODULE_HELP = (
    "modules (or .py paths) that register your own envs, imported in every process that builds "
    "envs (the trainer's workers, actors, ranks); not needed for envs installed with a "
    "gem_core.envs entry point (docs/plugins.md)"
)
"""The help of every recipe's ``--env-module``."""

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
