"""A user's env module, outside every installed package, reaches other processes through
`gem_core.use_env_modules` / ``GEM_ENV_MODULES`` only; a registration in the driver alone
gives the lookup's clear error (the id, the process, both fixes)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gem_core
from gem_core import env_modules
from gem_core.errors import InvalidArgument, NameNotFound, UnregisteredEnv


def _child(env_id: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A fresh interpreter (elsewhere) that makes ``env_id`` and plays it to the end."""
    script = (
        "import json, gem_core\n"
        f"env = gem_core.make({env_id!r})\n"
        "obs, _ = env.reset(seed=1)\n"
        "rewards, done = [], False\n"
        "while not done:\n"
        "    obs, r, term, trunc, info = env.step('x')\n"
        "    rewards.append(r); done = term or trunc\n"
        "print(json.dumps(rewards))\n"
    )
    return subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (env_modules.ENV_MODULES_VAR, "PYTHONPATH")}
    env["PYTHONPATH"] = str(Path(gem_core.__file__).resolve().parents[1])  # gem_core itself
    return env


def test_a_registration_in_the_driver_alone_gives_the_clear_error_in_a_child(user_module, tmp_path):
    folder, name, env_id = user_module
    sys.path.insert(0, str(folder))
    __import__(name)  # the driver registers it (docs/plugins.md's simplest example) ...
    assert gem_core.make(env_id).reset(seed=0)[0] == "Turn 0. Say anything."
    proc = _child(env_id, tmp_path, _base_env())  # ... and a worker process does not know it
    assert proc.returncode != 0
    err = proc.stderr
    assert f"NameNotFound: no env registered with id {env_id!r}" in err
    assert "Looked up in pid " in err and "GEM_ENV_MODULES is not set" in err
    assert "'gem_core.envs' entry point" in err and "--env-module" in err and "use_env_modules" in err


@pytest.mark.parametrize("form", ["module", "path"])
def test_use_env_modules_reaches_a_child_started_elsewhere(user_module, tmp_path, form):
    folder, name, env_id = user_module
    if form == "module":
        sys.path.insert(0, str(folder))  # importable here as the user's script dir would make it
        entry = name
    else:
        entry = str(folder / f"{name}.py")
    env = _base_env()
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    carried = gem_core.use_env_modules([entry])
    assert env_id in gem_core.registry  # imported here too
    assert carried[env_modules.ENV_MODULES_VAR].endswith(name if form == "module" else f"{name}.py")
    assert str(folder) in carried["PYTHONPATH"].split(os.pathsep)  # not an installed package
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _child(env_id, elsewhere, {**env, **carried})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [1.0, 2.0, 3.0]


def _spawned_make(env_id: str, queue) -> None:
    try:
        queue.put(("ok", gem_core.make(env_id).reset(seed=0)[0]))
    except UnregisteredEnv as exc:
        queue.put(("error", str(exc)))


def test_spawned_processes_inherit_the_modules(user_module):
    folder, name, env_id = user_module
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter, as torch.multiprocessing uses
    queue = ctx.Queue()
    sys.path.insert(0, str(folder))
    __import__(name)
    p = ctx.Process(target=_spawned_make, args=(env_id, queue))
    p.start()
    status, text = queue.get(timeout=120)
    p.join(60)
    assert status == "error" and env_id in text and "Looked up in pid " in text
    gem_core.use_env_modules([name])
    p = ctx.Process(target=_spawned_make, args=(env_id, queue))
    p.start()
    assert queue.get(timeout=120) == ("ok", "Turn 0. Say anything.")
    p.join(60)


def test_a_module_that_cannot_be_imported_fails_at_once_or_is_named_where_it_fails(user_module, tmp_path):
    _folder, _name, env_id = user_module
    with pytest.raises(InvalidArgument, match="env module 'no_such_env_module_xyz' cannot be imported"):
        gem_core.use_env_modules(["no_such_env_module_xyz"])
    with pytest.raises(InvalidArgument, match="no such file"):
        gem_core.use_env_modules([str(tmp_path / "missing.py")])
    with pytest.raises(InvalidArgument, match="one module or path per entry"):
        gem_core.use_env_modules(["a,b"])
    assert env_modules.ENV_MODULES_VAR not in os.environ  # nothing half-set
    # A worker whose GEM_ENV_MODULES names a module it cannot import: a warning there, and
    # the lookup's error names the failure.
    env = {**_base_env(), env_modules.ENV_MODULES_VAR: "no_such_env_module_xyz"}
    proc = _child(env_id, tmp_path, env)
    assert proc.returncode != 0
    assert "GEM_ENV_MODULES=no_such_env_module_xyz" in proc.stderr
    assert "importing 'no_such_env_module_xyz' failed here: ModuleNotFoundError" in proc.stderr


def test_play_row_lets_an_unknown_id_stop_the_step_instead_of_flagging_the_row():
    from gem_core.rl import play_row

    # Adapters flag a row whose episode fails (PlayRowError); an unknown id is not one.
    with pytest.raises(NameNotFound, match="probe:NotHere-v0.*Looked up in pid"):
        asyncio.run(play_row({"env_id": "probe:NotHere-v0", "seed": 0}, None, None))


def test_ray_runtime_env_carries_the_variables_and_keeps_the_callers(user_module):
    folder, name, _env_id = user_module
    sys.path.insert(0, str(folder))
    gem_core.use_env_modules([name])
    merged = env_modules.ray_runtime_env({"env_vars": {"PYTHONPATH": "/mine"}, "pip": ["x"]})
    assert merged["pip"] == ["x"] and merged["env_vars"]["PYTHONPATH"] == "/mine"
    assert merged["env_vars"][env_modules.ENV_MODULES_VAR] == name


def test_concurrent_first_lookups_wait_for_the_modules(user_module, tmp_path):
    """Rollouts make their envs from many threads at once; the first lookups must all wait
    until the env modules (here a slow import) have registered their ids."""
    folder, name, env_id = user_module
    slow = folder / f"slow_{name}.py"
    slow.write_text(f"import time\ntime.sleep(0.5)\nimport {name}\n")
    script = (
        "import concurrent.futures, gem_core\n"
        "def make(_):\n"
        "    try:\n"
        f"        return gem_core.make({env_id!r}).reset(seed=0)[0]\n"
        "    except Exception as exc:\n"
        "        return type(exc).__name__\n"
        "with concurrent.futures.ThreadPoolExecutor(8) as pool:\n"
        "    print(sorted(set(pool.map(make, range(8)))))\n"
    )
    env = {**_base_env(), env_modules.ENV_MODULES_VAR: slow.stem}
    env["PYTHONPATH"] += os.pathsep + str(folder)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['Turn 0. Say anything.']"


def test_an_installed_entry_point_package_reaches_a_child_with_no_option(tmp_path):
    """The recommended way: the user's env as an installed distribution (a ``gem_core.envs``
    entry point in its ``.dist-info``). A fresh interpreter whose path holds it (as a venv's
    site-packages holds what ``pip install`` put there) finds the env with no env-module
    option; without it on the path, the same lookup gives the clear error."""
    from gem_core.testing.user_env import USER_ENV_REWARDS, write_user_env_package

    pkg = write_user_env_package(tmp_path / "site")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _base_env()
    assert "GEM_ENV_MODULES" not in env
    proc = _child(pkg.env_id, elsewhere, env)
    assert proc.returncode != 0 and f"no env registered with id {pkg.env_id!r}" in proc.stderr
    env["PYTHONPATH"] += os.pathsep + str(pkg.folder)
    proc = _child(pkg.env_id, elsewhere, env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == list(USER_ENV_REWARDS)
