"""`gem_core.envs` (the built-in catalog): every registration is what it was when the turn
limit was stated twice, and ``make(id, max_turns=N)`` reaches an env that owns its budget."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import gem_core
from gem_core.registration import EnvSpec, registry

SNAPSHOT = Path(__file__).with_name("data") / "catalog_specs.json"
"""Written by `dump_specs` from the catalog as it was before `register(pass_max_turns=True)`
replaced the constructor's copy of the turn limit (regenerate only on purpose:
``GEM_WRITE_CATALOG_SNAPSHOT=1 pytest tests/envs/test_catalog.py``)."""


def _spec_record(s: EnvSpec) -> dict[str, Any]:
    return {
        "entry_point": s.entry_point if isinstance(s.entry_point, str) else repr(s.entry_point),
        "kwargs": {k: repr(v) for k, v in sorted(s.kwargs.items())},
        "max_turns": s.max_turns,
        "constructor_max_turns": repr(s.kwargs["max_turns"]) if "max_turns" in s.kwargs else "<not passed>",
        "wrappers": [repr(w) for w in s.wrappers],
        "description": s.description,
        "order_enforce": s.order_enforce,
        "disable_env_checker": s.disable_env_checker,
        "offline": s.offline,
    }


def dump_specs() -> dict[str, dict[str, Any]]:
    """Every built-in registration (``gem_core.envs``), as comparable JSON."""
    import gem_core.envs  # noqa: F401 - the catalog

    return {env_id: _spec_record(s) for env_id, s in sorted(registry.items())
            if isinstance(s.entry_point, str) and s.entry_point.startswith("gem_core.")}


def test_every_built_in_spec_is_unchanged():
    now = dump_specs()
    if os.environ.get("GEM_WRITE_CATALOG_SNAPSHOT") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    before = json.loads(SNAPSHOT.read_text())
    assert len(before) > 150  # the whole catalog, not a sample
    missing = sorted(set(before) - set(now))
    assert not missing, f"ids no longer registered: {missing}"
    changed = {i: {k: (before[i][k], now[i][k]) for k in before[i] if before[i][k] != now[i][k]}
               for i in before if before[i] != now[i]}
    assert not changed, changed


def test_owned_turn_budgets_are_stated_once_in_the_catalog():
    source = Path(gem_core.__file__).with_name("envs").joinpath("__init__.py").read_text()
    assert '"max_turns":' not in source and "'max_turns':" not in source


@pytest.mark.parametrize("env_id", ["game:GuessTheNumber-v0-easy", "game:Sudoku-v0-easy", "toy:Echo-v0"])
def test_make_with_max_turns_overrides_limit_and_owned_budget(env_id):
    env = gem_core.make(env_id, max_turns=3)
    try:
        assert env.spec.max_turns == 3
        owns = "max_turns" in registry[env_id].kwargs
        assert env.unwrapped.spec.kwargs.get("max_turns") == (3 if owns else None)
        if owns:
            assert env.unwrapped.max_turns == 3
    finally:
        env.close()
