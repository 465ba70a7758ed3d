"""A user's env module reaches oat's actors through ``--env_modules``: launchpad sends the
arguments to each actor node, whose `GemActor` imports the modules before it makes any env;
without them the actor's constructor refuses the id with the fix."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("oat", reason="gem-oat's tests need oat-llm 0.2.4 (make venv-oat)")

from gem_core.testing.user_env import USER_ENV_REWARDS, write_user_env_module  # noqa: E402
from tests.conftest import make_args  # noqa: E402

HERE = Path(__file__).resolve().parents[1]

# The actor node: a fresh interpreter that receives the pickled arguments (as launchpad's
# nodes do), builds oat's actor through its constructor (scripted engine) and plays a step.
NODE = """
import json, pickle, sys
from gem_core.errors import InvalidArgument
from tests.oat_harness import scripted_actor
args = pickle.loads(open(sys.argv[1], "rb").read())
try:
    actor = scripted_actor("guess", **{k: getattr(args, k) for k in ("env_ids", "env_modules", "env_seeds")})
except InvalidArgument as exc:
    print(json.dumps({"error": str(exc), "cause": str(exc.__cause__)}))
    raise SystemExit(0)
episodes, _ = actor.collect_experience()
print(json.dumps({"rewards": [[t.rewards for t in ep] for ep in episodes]}))
"""


def _node(args, tmp_path) -> dict:
    import json

    blob = tmp_path / "args.pkl"
    blob.write_bytes(pickle.dumps(args))
    proc = subprocess.run([sys.executable, "-c", NODE, str(blob)], cwd=HERE, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_env_modules_reach_the_actor_node_and_a_driver_registration_does_not(tmp_path):
    mod = write_user_env_module(tmp_path / "user_code")
    # Registered in the launcher only (imported there): the actor node does not know the id.
    sys.path.insert(0, str(mod.folder))
    try:
        __import__(mod.name)
        out = _node(make_args(env_ids=[mod.env_id], env_seeds=[0, 1]), tmp_path)
    finally:
        sys.path.remove(str(mod.folder))
    assert f"--env_ids {mod.env_id!r}" in out["error"]
    assert f"no env registered with id {mod.env_id!r}" in out["cause"] and "--env-module" in out["cause"]
    # Named in the arguments: the node imports it and plays the env's per-turn rewards.
    out = _node(make_args(env_ids=[mod.env_id], env_modules=[str(mod.path)], env_seeds=[0, 1]), tmp_path)
    assert out["rewards"] == [list(USER_ENV_REWARDS)] * 2


def test_a_module_that_cannot_be_imported_is_refused_by_name():
    from gem_oat import validate_args

    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="--env_modules: env module 'no_such_env_module_xyz' cannot be imported"):
        validate_args(make_args(env_modules=["no_such_env_module_xyz"]))
