"""ROLL through the compat route: no gem-llm, ``import gem`` served by `gem_core.compat`.

In a fresh process where gem-llm is hidden and `gem_core.compat.install_as_gem` serves
``import gem``: ROLL's env package registers its own envs (plain ids such as ``"sokoban"``),
ROLL's env managers and its GEM-derived envs and tools import, and every GEM-id config of
ROLL's example YAMLs is built the way ROLL's ``TrajEnvManager`` builds it
(``gem.make(env_id=env_type, **env_config)``) and played for two seeded episodes the way it
plays them (``reset(seed=...)``, step until ``terminated``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROLL_SKIP

pytestmark = pytest.mark.skipif(ROLL_SKIP is not None, reason=ROLL_SKIP or "")

_CONFIG_DIRS = ("examples/config", "examples/qwen3_agentic_gem")
_GEM_CATEGORIES = ("game", "math", "code", "qa", "logic", "rg", "eval")


def _gem_configs(src: Path) -> list[tuple[str, dict]]:
    """(env_type, env_config) of every GEM-id env in ROLL's example YAMLs (``${...}`` values dropped)."""
    import yaml

    found: dict[str, tuple[str, dict]] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            env_type = node.get("env_type")
            if isinstance(env_type, str) and env_type.split(":")[0] in _GEM_CATEGORIES and ":" in env_type:
                raw = node.get("env_config") or node.get("config") or {}
                config = {k: v for k, v in raw.items() if not (isinstance(v, str) and "${" in v)}
                found[json.dumps([env_type, config], sort_keys=True)] = (env_type, config)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for folder in _CONFIG_DIRS:
        for path in sorted((src / folder).glob("*.yaml")):
            walk(yaml.safe_load(path.read_text()))
    return sorted(found.values(), key=lambda c: json.dumps(c, sort_keys=True))


_SCRIPT = r"""
import importlib, importlib.abc, json, sys
class HideGemLlm(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "gem" or name.startswith("gem."):
            raise ModuleNotFoundError(name + " (gem-llm hidden)", name=name)
sys.meta_path.insert(0, HideGemLlm())
import gem_core.compat
gem_core.compat.install_as_gem()
import gem
assert gem.__name__ == "gem_core.compat"

import roll.pipeline.agentic.env  # ROLL's registrations: gem.register("sokoban", ...)
for module in (
    "roll.pipeline.agentic.env_manager.base_env_manager",
    "roll.pipeline.agentic.env_manager.traj_env_manager",
    "roll.pipeline.agentic.env_manager.vl_traj_env_manager",
    "roll.pipeline.agentic.env.gem.math_env",
    "roll.pipeline.agentic.env.gem.qa_env",
    "roll.pipeline.agentic.env.gem.code_env",
    "roll.pipeline.agentic.tools.python_code_tool",
    "roll.pipeline.agentic.tools.tool_env_wrapper",
):
    importlib.import_module(module)
assert "custom:sokoban" in gem.envs.registration.ENV_REGISTRY, "ROLL registered its plain ids"

from roll.pipeline.agentic.env.gem.qa_env import QaEnv as RollQaEnv
qa = RollQaEnv(dataset=[{"question": "capital of France?", "answer": ["Paris"]}])
qa.reset(seed=1)
assert qa.step("<answer>Paris</answer>")[1] == 1.0 and qa.step("<answer>Rome</answer>")[1] == 0.0

results = []
for env_type, config in json.loads(sys.argv[1]):
    env = gem.make(env_id=env_type, **config)
    episodes = []
    for seed in (100, 101):
        obs, info = env.reset(seed=seed)
        assert isinstance(obs, str) and obs, (env_type, obs)
        steps, total = 0, 0.0
        while True:
            action = env.sample_random_action()
            obs, reward, terminated, truncated, info = env.step(action)
            steps += 1
            total += float(reward)
            if terminated:
                break
            assert steps < 200, (env_type, "no end after 200 steps")
        episodes.append([steps, total])
    env.close()
    results.append([env_type, episodes])
print(json.dumps(results))
"""


@pytest.mark.timeout(900)
def test_roll_plays_its_gem_configs_through_compat_without_gem_llm(tmp_path):
    src = Path(os.environ["GEM_ROLL_SRC"])
    configs = _gem_configs(src)
    ids = sorted({c[0] for c in configs})
    assert len(ids) >= 20, ids  # ROLL 8eb27cc: 25 ids in 26 configs
    env = {**os.environ, "GEM_DATA": "sample", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env["ROLL_LOG_DIR"] = str(tmp_path / "logs")  # ROLL logs to ./output/logs otherwise
    env["PYTHONPATH"] = os.pathsep.join(
        [str(src), str(Path(__file__).resolve().parents[3])] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(configs)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=840
    )
    assert out.returncode == 0, out.stderr[-5000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    assert [r[0] for r in results] == [c[0] for c in configs]
    for env_type, episodes in results:
        assert len(episodes) == 2 and all(steps >= 1 for steps, _ in episodes), (env_type, episodes)
    print(f"ROLL through gem_core.compat: {len(configs)} configs ({len(ids)} ids) played, gem-llm hidden")
