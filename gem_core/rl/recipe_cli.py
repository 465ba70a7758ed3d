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

__all__ = ["field_docs", "parse_recipe_args"]

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
