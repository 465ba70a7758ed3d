"""Test-wide settings: no test reaches the Hugging Face hub (CI has no network but PyPI)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


import sys  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A user's env module in a folder on no path (`gem_core.testing.user_env`):
    ``(folder, module name, env id)``. The process's env-module state is restored after."""
    import os

    import gem_core
    from gem_core import env_modules
    from gem_core.testing.user_env import write_user_env_module

    mod = write_user_env_module(tmp_path / "user_code")
    saved_env = {k: os.environ.get(k) for k in (env_modules.ENV_MODULES_VAR, "PYTHONPATH")}
    for var in saved_env:
        os.environ.pop(var, None)
    monkeypatch.setattr(env_modules, "_imported", {})
    saved_path = list(sys.path)
    yield mod.folder, mod.name, mod.env_id
    for var, value in saved_env.items():  # use_env_modules sets them: never leak to later tests
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
    sys.path[:] = saved_path
    sys.modules.pop(mod.name, None)
    dict.pop(gem_core.registry, mod.env_id, None)
