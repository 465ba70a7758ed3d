"""recipes/oat_rebn.py: the launch command in its header parses into GemArgs and passes the checks."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

pytest.importorskip("oat", reason="gem-oat's tests need oat-llm 0.2.4 (make venv-oat)")

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "oat_rebn.py"


def header_command() -> list[str]:
    lines, started = [], False
    for line in RECIPE.read_text().splitlines():
        text = line.removeprefix("#").strip()
        if text.startswith("python recipes/oat_rebn.py"):
            started = True
        if started:
            lines.append(text.rstrip("\\").strip())
            if not text.endswith("\\"):
                break
    return shlex.split(" ".join(lines))[2:]


def test_the_header_command_parses_and_passes_the_checks():
    import tyro
    from gem_oat import GemArgs, validate_args

    argv = header_command()
    assert "--reinforce_update" not in argv and "--whiten_adv" in argv
    args = tyro.cli(GemArgs, args=argv)
    assert (args.gamma, args.whiten_adv, args.critic_type, args.beta) == (0.9, True, "drgrpo", 0.0)
    plan = validate_args(args)
    assert plan.env_ids == ("game:GuessTheNumber-v0-easy",)


def test_the_recipe_refuses_a_bad_env_id_before_launching(monkeypatch):
    import runpy
    import sys

    from gem_core.errors import InvalidArgument

    monkeypatch.setattr(sys, "argv", ["oat_rebn.py", "--env_ids", "game:NoSuchGame-v0"])
    with pytest.raises(InvalidArgument, match="--env_ids 'game:NoSuchGame-v0'"):
        runpy.run_path(str(RECIPE), run_name="__main__")
