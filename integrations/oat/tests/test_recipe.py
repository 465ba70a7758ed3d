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


def test_help_and_checks_need_no_launchpad(tmp_path):
    """Where launchpad is missing (no wheel beyond cp310; oat imports it at import) --help lists
    gem-oat's options and says why oat's are missing, and a launch stops with the install hint
    (vLLM: the tests' import-only stand-in)."""
    import os
    import subprocess
    import sys

    stubs = Path(__file__).resolve().parent / "stubs"
    only_vllm = tmp_path / "stubs"
    only_vllm.mkdir()
    (only_vllm / "vllm").symlink_to(stubs / "vllm", target_is_directory=True)
    (only_vllm / "_gem_oat_stand_in.py").symlink_to(stubs / "_gem_oat_stand_in.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(only_vllm), os.environ.get("PYTHONPATH", "")])}
    probe = subprocess.run([sys.executable, "-c", "import launchpad"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0, "launchpad should be missing here"
    out = subprocess.run([sys.executable, str(RECIPE), "--help"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--env_modules" in out.stdout and "--env_ids" in out.stdout and "No module named 'launchpad'" in out.stdout
    out = subprocess.run([sys.executable, str(RECIPE), "--env_ids", "toy:Echo-v0"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode != 0 and "oat cannot be imported" in out.stderr and "No module named 'launchpad'" in out.stderr


def test_the_dry_run_checks_a_mixture_without_launching(monkeypatch, capsys):
    import runpy
    import sys

    monkeypatch.setattr(sys, "argv", ["oat_rebn.py", "--dry-run", "--env_ids", "game:GuessTheNumber-v0-easy",
                                      "toy:Echo-v0", "--env_weights", "3", "1", "--gamma", "0.8"])
    runpy.run_path(str(RECIPE), run_name="__main__")
    out = capsys.readouterr().out
    assert "dry run: envs game:GuessTheNumber-v0-easy (weight 3), toy:Echo-v0 (weight 1); gamma 0.8" in out
    assert "not launched" in out
