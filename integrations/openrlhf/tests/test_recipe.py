"""``recipes/openrlhf_rebn.py``'s command line: tyro's help from the field docstrings, the parser's
and the recipe's own argument checks, the derived sizes, the ``--`` passthrough of OpenRLHF flags."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import pytest

from gem_core.rl.recipe_cli import field_docs

pytest.importorskip("openrlhf", reason="gem-openrlhf's tests need openrlhf (make test-openrlhf builds its venv)")

from openrlhf_harness import RECIPE, load_recipe  # noqa: E402


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(RECIPE), *args], capture_output=True, text=True, timeout=120, cwd="/",
        env={**os.environ, "COLUMNS": "200"},  # tyro wraps its help and errors to the terminal width
    )  # fmt: skip


def test_help_shows_every_option_with_its_docstring():
    out = _run("--help")
    assert out.returncode == 0, out.stderr[-2000:]
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", out.stdout).split())  # tyro's boxes and wrapping away
    assert "Multi-turn REINFORCE + ReBN on GEM envs with OpenRLHF" in flat
    args = load_recipe().Args
    docs = field_docs(args)
    for field in dataclasses.fields(args):
        flag = "--" + field.name.replace("_", "-")
        assert docs.get(field.name), f"Args.{field.name} has no docstring"
        if not field.init:  # a derived size: computed after parsing, not an option
            assert flag not in flat, field.name
            continue
        assert flag in flat, field.name
        assert " ".join(docs[field.name].split()[:6]) in flat, field.name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--train-seeds", "many"], "--train-seeds"),
        (["--vllm-num-engines", "3"], "--vllm-num-engines"),  # derived, not an option
    ],
)
def test_bad_option_values_are_rejected_by_the_parser(args, message, tmp_path):
    out = _run(*args, "--data-dir", str(tmp_path))
    assert out.returncode == 2 and message in out.stderr
    assert not (tmp_path / "train.jsonl").exists()  # nothing written before the arguments are checked


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gamma", "-0.1"], "--gamma must be in [0, 1], got -0.1"),
        (["--train-batch-size", "0"], "--train-batch-size must be >= 1, got 0"),
        (["--max-tokens-per-turn", "4096"], "--max-tokens-per-turn (4096) must be below --max-len (4096)"),
        (["--vllm-tensor-parallel-size", "3"], "--vllm-tensor-parallel-size (3) must divide the GPUs (1 x 8)"),
    ],
)
def test_bad_combinations_exit_2_with_the_reason(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        load_recipe().parse_args(args)
    assert exit_.value.code == 2
    assert f"error: {message}" in capsys.readouterr().err


def test_derived_sizes_and_the_passthrough_of_openrlhf_flags(tmp_path):
    recipe = load_recipe()
    args, extra = recipe.parse_args([
        "--nnodes", "2", "--n-gpus-per-node", "4", "--vllm-tensor-parallel-size", "2",
        "--", "--ckpt.save_steps", "5", "--",
    ])  # fmt: skip
    assert args.vllm_num_engines == 4  # 2 nodes x 4 GPUs over tensor parallel 2
    assert extra == ["--ckpt.save_steps", "5", "--"]  # after the first `--`, verbatim
    flags = recipe.openrlhf_flags(args, tmp_path / "train.jsonl", None)
    i = flags.index("--vllm.num_engines")
    assert flags[i + 1] == "4"


def test_a_multi_task_mixture_writes_samples_by_weight(tmp_path, capsys):
    """--env-id takes several ids, each optionally ID=WEIGHT: the samples' labels follow the
    weights, interleaved; a bad weight exits 2 before anything is written; each id is checked."""
    import json

    recipe = load_recipe()
    args, _ = recipe.parse_args(["--env-id", "game:GuessTheNumber-v0-easy=3", "toy:Echo-v0", "--max-turns", "2"])
    assert recipe.write_dataset(tmp_path / "train.jsonl", args, range(8)) == 8
    labels = [json.loads(json.loads(line)["label"]) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert [lab["seed"] for lab in labels] == list(range(8))
    envs = [lab["env_id"] for lab in labels]
    assert envs.count("game:GuessTheNumber-v0-easy") == 6 and envs.count("toy:Echo-v0") == 2
    assert set(envs[:4]) == {"game:GuessTheNumber-v0-easy", "toy:Echo-v0"}  # interleaved
    assert {lab["max_turns"] for lab in labels} == {2}
    with pytest.raises(SystemExit) as info:
        recipe.parse_args(["--env-id", "toy:Echo-v0", "toy:Echo-v0=2"])
    assert info.value.code == 2 and "'toy:Echo-v0' is given twice" in capsys.readouterr().err
    out = _run("--dry-run", "--data-dir", str(tmp_path / "typo"), "--train-seeds", "2", "--eval-seeds", "0",
               "--env-id", "toy:Echo-v0", "game:GuessTheNumbr-v0")
    assert out.returncode == 1 and "GuessTheNumbr" in out.stderr, out.stdout[-2000:] + out.stderr[-2000:]
