"""Registration through verl's ``verl.plugins`` entry point, checked in fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("verl", reason="gem-verl's tests need verl installed (make test-verl builds its venv)")

PROBE = """
import json, verl
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, get_adv_estimator_fn
fn = ADV_ESTIMATOR_REGISTRY.get("rebn")
print(json.dumps({
    "loop": _agent_loop_registry.get("gem_agent"),
    "rebn": None if fn is None else f"{fn.__module__}.{fn.__qualname__}",
    "dispatch": None if fn is None else get_adv_estimator_fn("rebn") is fn,
}))
"""


def _probe(**env: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=180,
        cwd="/",  # nothing from the source tree on sys.path: the installed entry point only
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_bare_import_verl_registers_loop_and_estimator():
    got = _probe()
    assert got == {
        "loop": {"_target_": "gem_verl.agent_loop.GemAgentLoop"},
        "rebn": "gem_verl.advantage.compute_rebn_advantage",
        "dispatch": True,
    }


def test_registration_comes_from_the_entry_point():
    # With verl's plugin discovery off, nothing registers: the entry point is the mechanism.
    got = _probe(VERL_USE_EXTERNAL_PLUGINS="none")
    assert got["loop"] is None and got["rebn"] is None


def test_register_all_is_idempotent():
    import verl  # noqa: F401  (loads the plugin)
    from gem_verl.advantage import compute_rebn_advantage
    from gem_verl.plugin import register_all
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    register_all()
    register_all()
    assert ADV_ESTIMATOR_REGISTRY["rebn"] is compute_rebn_advantage


def test_register_all_refuses_a_foreign_rebn(monkeypatch):
    import verl  # noqa: F401
    from gem_verl.plugin import register_all
    from verl.trainer.ppo import core_algos

    def rebn(**kwargs):  # someone else's estimator under the same name
        return None

    monkeypatch.setitem(core_algos.ADV_ESTIMATOR_REGISTRY, "rebn", rebn)
    with pytest.raises(RuntimeError, match="already has an advantage estimator named 'rebn'"):
        register_all()


def test_version_check_message():
    from gem_verl import check_verl_version

    assert check_verl_version("0.9.1") == "0.9.1"
    with pytest.raises(ImportError, match=r'needs verl>=0.9.1,<0.10 .* found verl 0.8.0; .*pip install "verl>=0.9.1,<0.10"'):
        check_verl_version("0.8.0")
    with pytest.raises(ImportError, match="found verl 0.10.0"):
        check_verl_version("0.10.0")


def test_import_gem_verl_is_light():
    code = "import sys, gem_verl; print([m for m in ('verl', 'torch') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"


def test_the_exported_names_are_what_verl_registered():
    # recipes/verl_rebn.py writes these constants into its rows, agent loop YAML and overrides.
    import gem_verl
    import verl  # noqa: F401  (loads the plugin)
    from gem_verl.advantage import compute_rebn_advantage
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    assert _agent_loop_registry[gem_verl.AGENT_NAME] == {"_target_": gem_verl.AGENT_LOOP_TARGET}
    assert ADV_ESTIMATOR_REGISTRY[gem_verl.REBN] is compute_rebn_advantage

