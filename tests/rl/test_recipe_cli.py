"""`gem_core.rl.recipe_cli`: the recipes' one way of parsing their arguments."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

pytest.importorskip("tyro", reason="recipes parse with tyro (gem-core[rl])")

from gem_core.rl.recipe_cli import field_docs, parse_recipe_args  # noqa: E402


@dataclass
class Args:
    steps: int = 3
    """how many   steps
    to take"""
    name: str | None = None
    """a name (None: none)"""


def _problem(args: Args) -> str | None:
    return None if args.steps >= 1 else f"--steps must be >= 1, got {args.steps}"


def test_parses_the_dataclass_and_passes_what_follows_the_separator_through():
    args, extra = parse_recipe_args(
        Args, ["--steps", "5", "--", "trainer.x=1", "--steps", "9"], description="d", problem=_problem,
        passthrough=True,
    )  # fmt: skip
    assert (args.steps, args.name, extra) == (5, None, ["trainer.x=1", "--steps", "9"])


def test_without_passthrough_nothing_is_split_off():
    args, extra = parse_recipe_args(Args, ["--name", "x"], description=None, problem=_problem)
    assert (args.steps, args.name, extra) == (3, "x", [])


def test_a_bad_combination_exits_2_with_its_message(capsys):
    with pytest.raises(SystemExit) as exc:
        parse_recipe_args(Args, ["--steps", "0"], description="d", problem=_problem)
    assert exc.value.code == 2
    assert "error: --steps must be >= 1, got 0" in capsys.readouterr().err


def test_field_docs_reads_each_fields_docstring_folded():
    assert field_docs(Args) == {"steps": "how many steps to take", "name": "a name (None: none)"}
