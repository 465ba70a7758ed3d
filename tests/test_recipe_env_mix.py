"""`gem_core.rl.recipe_cli.parse_env_mix` / `mix_rows`: every dataset recipe's multi-task flag."""

from __future__ import annotations

from collections import Counter

import pytest

from gem_core.errors import InvalidArgument
from gem_core.rl.recipe_cli import mix_rows, parse_env_mix


def test_specs_parse_to_ids_and_weights_in_order():
    assert parse_env_mix(["game:A-v0", "toy:B-v0=3", "c:C-v0=0.5"]) == (
        ("game:A-v0", 1.0), ("toy:B-v0", 3.0), ("c:C-v0", 0.5))
    assert parse_env_mix("game:A-v0") == (("game:A-v0", 1.0),)


@pytest.mark.parametrize(
    ("specs", "match"),
    [
        ([], "name at least one env id"),
        (["a:B-v0=x"], "the weight after '=' must be a number"),
        (["a:B-v0=-1"], "finite and >= 0"),
        (["a:B-v0=inf"], "finite and >= 0"),
        (["a:B-v0", "a:B-v0=2"], "given twice"),
        (["a:B-v0=0", "c:D-v0=0"], "all 0"),
        (["=2"], "no env id"),
    ],
)
def test_bad_specs_are_named_with_the_flag(specs, match):
    with pytest.raises(InvalidArgument, match=match) as info:
        parse_env_mix(specs, flag="--env")
    assert "--env" in str(info.value)


@pytest.mark.parametrize("n", [1, 7, 100, 1001])
def test_rows_follow_the_weights_and_keep_the_seeds(n):
    mix = parse_env_mix(["a=3", "b=1", "c=0", "d=2"])
    seeds = range(500, 500 + n)
    rows = mix_rows(mix, seeds)
    assert [s for _, s in rows] == list(seeds)  # row i plays seed i of the range
    counts = Counter(e for e, _ in rows)
    assert "c" not in counts and sum(counts.values()) == n
    for env, w in (("a", 3), ("b", 1), ("d", 2)):
        assert abs(counts[env] - n * w / 6) < 1  # largest remainders: within one row
    if n >= 100:  # interleaved: every batch of 12 consecutive rows is within one of the mixture
        for start in range(0, n - 12, 12):
            batch = Counter(e for e, _ in rows[start:start + 12])
            assert abs(batch["a"] - 6) <= 1 and abs(batch["b"] - 2) <= 1 and abs(batch["d"] - 4) <= 1


def test_one_env_is_every_row():
    assert mix_rows(parse_env_mix(["game:A-v0"]), range(3)) == [("game:A-v0", 0), ("game:A-v0", 1), ("game:A-v0", 2)]
