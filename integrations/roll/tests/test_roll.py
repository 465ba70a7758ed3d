"""Through ROLL's real classes (needs GEM_ROLL_SRC and the full venv; skipped with the reason otherwise).

- the recipe's YAML -> Hydra + dacite -> ``AgenticConfig``;
- ROLL's env managers' ``run_rollout_loop`` (our managers, ROLL's queue, local Ray) give the
  reference's per-step rewards; a finished env is not stepped again;
- `TestRollAdapter`: the adapter suite — our step manager's samples packed back equal the
  reference's tokens, and ROLL's own step_reinforce chain with our normalisation equals the
  reference ReBN (1e-6);
- ROLL's native step_reinforce (no pipeline class) = ReBN × sqrt((n-1)/n).
"""

from __future__ import annotations

import pytest
from conftest import ROLL_SKIP

if ROLL_SKIP:
    pytest.skip(ROLL_SKIP, allow_module_level=True)

import numpy as np  # noqa: E402
from gem_roll.config import EXACT_PIPELINE, NATIVE_PIPELINE, STEP_ENV_MANAGER, TRAJ_ENV_MANAGER  # noqa: E402
from gem_roll.normalize import native_ratio  # noqa: E402

from gem_core.testing.adapter_suite import AdapterSuite, reference_for  # noqa: E402
from gem_core.testing.conformance import SCENARIO, SCENARIOS  # noqa: E402

_STATE: dict = {}


@pytest.fixture(scope="module")
def harness(roll_runtime, tiny_model_path, tmp_path_factory):
    import roll_harness
    from transformers import AutoTokenizer

    _STATE.update(
        h=roll_harness,
        tokenizer=AutoTokenizer.from_pretrained(tiny_model_path, local_files_only=True),
        model=tiny_model_path,
        dir=tmp_path_factory.mktemp("yaml"),
        runtime=roll_runtime,
    )
    return _STATE


def _config(scenario, manager, *, exact=True):
    h = _STATE["h"]
    path = h.scenario_yaml(_STATE["dir"], scenario, _STATE["model"], manager, exact=exact)
    return h.load_config(path), path


def test_agentic_config_from_the_recipe_yaml(harness):
    config, path = _config(SCENARIO, STEP_ENV_MANAGER)
    assert config.adv_estimator == "step_reinforce"
    assert config.step_reward_gamma == pytest.approx(0.9) and config.gamma == 1.0
    assert config.reward_normalization.norm_mean_type == "batch" and config.reward_normalization.norm_std_type == "batch"
    tag = "GuessTheNumber_v0_easy"
    assert config.custom_envs[tag]["env_manager_cls"] == STEP_ENV_MANAGER
    assert config.custom_envs[tag]["env_type"] == "game:GuessTheNumber-v0-easy"
    import yaml

    assert yaml.safe_load(path.read_text())["pipeline_cls"] == EXACT_PIPELINE
    from gem_roll.pipeline import GemAgenticPipeline
    from roll.utils.import_utils import safe_import_class

    assert safe_import_class(EXACT_PIPELINE) is GemAgenticPipeline
    assert issubclass(GemAgenticPipeline, safe_import_class(NATIVE_PIPELINE))


@pytest.mark.parametrize("manager", [STEP_ENV_MANAGER, TRAJ_ENV_MANAGER])
def test_run_rollout_loop_gives_the_reference_step_rewards(harness, manager):
    config, _ = _config(SCENARIO, manager)
    rollouts = _STATE["h"].run_rollouts(config, _STATE["tokenizer"], list(SCENARIO.seeds))
    reference = reference_for(SCENARIO, _STATE["tokenizer"])
    assert len(rollouts) == len(SCENARIO.seeds), f"{len(rollouts)} episodes for {len(SCENARIO.seeds)} seeds"
    for i, (rollout, episode) in enumerate(zip(rollouts, reference.episodes, strict=True)):
        want = [t.reward for t in episode.turns]
        if manager == STEP_ENV_MANAGER:
            order = np.argsort(rollout.non_tensor_batch["step"].astype(int))
            got = [float(rollout.non_tensor_batch["step_scores"][k]) for k in order]
        else:
            got = [float(x) for x in rollout.non_tensor_batch["step_scores"][0]]
        assert got == pytest.approx(want, abs=1e-9), f"seed {SCENARIO.seeds[i]} ({manager}): step rewards {got} != reference {want}"


def test_logs_and_ray_files_stay_in_the_temp_dir(harness):
    runtime = _STATE["runtime"]
    assert any(runtime["logs"].iterdir()), f"ROLL wrote no log into ROLL_LOG_DIR={runtime['logs']}"
    assert any(runtime["ray"].glob("session_*")), f"Ray wrote no session into RAY_TMPDIR={runtime['ray']}"


def test_a_truncating_env_is_not_stepped_again(harness):
    """The turn limit truncates (terminated False): ROLL alone would step the ended env again."""
    from gem_core.testing.conformance import ConformanceScenario

    scenario = ConformanceScenario(name="guess", responses=(r"\boxed{1}",), seeds=(3,))  # never right: truncates
    config, _ = _config(scenario, STEP_ENV_MANAGER)
    for tag in config.custom_envs:
        config.custom_envs[tag]["max_steps"] = 50  # ROLL's own limit far above the env's 4 turns
    config.train_env_manager.env_configs[0][0]["max_steps"] = 50
    (rollout,) = _STATE["h"].run_rollouts(config, _STATE["tokenizer"], [3])
    assert len(rollout) == 4, f"expected the env's 4 turns, got {len(rollout)} steps"


def test_native_step_reinforce_is_rebn_times_the_ratio(harness):
    config, _ = _config(SCENARIO, STEP_ENV_MANAGER, exact=False)
    rng = np.random.default_rng(0)
    mask = (rng.random((6, 30)) < 0.6).astype(np.int64)
    rewards = np.where(mask == 1, rng.normal(size=mask.shape), 0.0)
    exact = _STATE["h"].step_reinforce(config, rewards, mask, 0.9, exact=True)
    native = _STATE["h"].step_reinforce(config, rewards, mask, 0.9, exact=False)
    from gem_core.rl import turn_spans

    n = sum(len(s) for s in turn_spans(mask != 0))
    ratio = native[mask != 0] / exact[mask != 0]
    assert np.allclose(ratio, native_ratio(n), rtol=1e-4), (
        f"native/exact = {ratio.min():.6f}..{ratio.max():.6f}, documented sqrt(({n}-1)/{n}) = {native_ratio(n):.6f}"
    )
    assert not np.allclose(native, exact, atol=1e-3), "native step_reinforce should not be exact ReBN"


class TestRollAdapter(AdapterSuite):
    """The adapter suite through ROLL: ``GemStepEnvManager.run_rollout_loop`` and ROLL's step_reinforce chain."""

    scenarios = tuple(
        s for s in SCENARIOS if s not in ("empty_turn", "truncated")
    )  # empty_turn: ROLL's StepEnvManager.formulate_rollouts needs >= 1 response token per step
    # (response_masks.index(1)); truncated: ROLL has no per-turn truncation penalty (the cut
    # response goes to the env, as with scenario.truncated_response="pass").

    @pytest.fixture(autouse=True)
    def _harness(self, harness):
        return harness

    def tokenizer(self):
        return _STATE["tokenizer"]

    def rollout(self, scenario):
        config, _ = _config(scenario, STEP_ENV_MANAGER)
        h = _STATE["h"]
        return [h.step_samples_to_packed(r) for r in h.run_rollouts(config, _STATE["tokenizer"], list(scenario.seeds))]

    def advantages(self, token_rewards, response_mask, *, gamma):
        if "exact" not in _STATE:
            _STATE["exact"] = _config(SCENARIO, STEP_ENV_MANAGER)[0]
        return _STATE["h"].step_reinforce(_STATE["exact"], token_rewards, response_mask, gamma, exact=True)


def _turn_batch(seed: int, rows: int = 5):
    rng = np.random.default_rng(seed)
    mask = (rng.random((rows, 30)) < 0.5).astype(np.int64)
    rewards = np.where(mask == 1, rng.normal(size=mask.shape), 0.0)
    return rewards, mask


@pytest.mark.parametrize("dp", [1, 2, 4, 8])
def test_rebn_stays_exact_through_adjust_batch_at_any_dp(harness, dp):
    """ROLL's real adjust_batch at dp = 1, 2, 4, 8 on a turn count that is rarely a multiple:
    GemAgenticPipeline pads (no crash, no real sample dropped), the padding samples carry no
    loss weight and no advantage, and every real sample's advantage is ReBN over the real
    samples only — the same as without any adjustment."""
    from gem_core.rl import turn_spans

    config, _ = _config(SCENARIO, STEP_ENV_MANAGER)
    assert config.batch_adjust_mode == "copy"
    rewards, mask = _turn_batch(dp)
    n = sum(len(s) for s in turn_spans(mask != 0))
    reference = _STATE["h"].step_reinforce(config, rewards, mask, 0.9, exact=True)
    pads: list = []
    got = _STATE["h"].step_reinforce(config, rewards, mask, 0.9, exact=True, dp=dp, pads=pads)
    assert len(pads) == (-n) % dp, f"{n} turn-samples at dp={dp}: expected {(-n) % dp} padding samples"
    np.testing.assert_allclose(got, reference, atol=1e-6)
    for adv, resp in pads:
        assert not resp.any() and not np.abs(adv).max() > 0
    # Any mode in the config: the same padding (ROLL's own delete mode crashes, see below).
    config.batch_adjust_mode = "delete"
    try:
        again = _STATE["h"].step_reinforce(config, rewards, mask, 0.9, exact=True, dp=dp)
    finally:
        config.batch_adjust_mode = "copy"
    np.testing.assert_allclose(again, reference, atol=1e-6)


def test_roll_own_adjust_batch_is_what_the_pipeline_class_replaces(harness):
    """Why the override exists: ROLL's own copy mode (native pipeline) puts duplicates into
    the normalisation, and its delete mode fails on ROLL HEAD's batch."""
    from gem_core.rl import turn_spans

    config, _ = _config(SCENARIO, STEP_ENV_MANAGER)
    seed = next(k for k in range(100) if sum(len(s) for s in turn_spans(_turn_batch(k)[1] != 0)) % 8)
    rewards, mask = _turn_batch(seed)  # a turn count that is not a multiple of 8
    exact = _STATE["h"].step_reinforce(config, rewards, mask, 0.9, exact=True)
    copied = _STATE["h"].step_reinforce(config, rewards, mask, 0.9, exact=True, dp=8)  # GemAgenticPipeline
    np.testing.assert_allclose(copied, exact, atol=1e-6)
    native = _STATE["h"].step_reinforce(config, rewards, mask, 0.9, exact=False, dp=8)
    assert not np.allclose(native, _STATE["h"].step_reinforce(config, rewards, mask, 0.9, exact=False), atol=1e-4)
    config.batch_adjust_mode = "delete"
    try:
        with pytest.raises(Exception, match="NestedKey|key"):
            _STATE["h"].step_reinforce(config, rewards, mask, 0.9, exact=False, dp=8)
    finally:
        config.batch_adjust_mode = "copy"


def test_a_users_env_module_reaches_an_env_worker_process(harness, tmp_path):
    """What ROLL's env worker does (a fresh process: register_envs, then gem-llm's
    ``gem.make(env_id=env_type)``) finds a user's env named by GEM_ENV_MODULES only (what
    ``recipes/roll_rebn.py --env-module`` passes on); without it the worker's error names the fix."""
    import os
    import subprocess
    import sys

    from gem_core.testing.user_env import USER_ENV_REWARDS, write_user_env_module

    mod = write_user_env_module(tmp_path / "user_code")
    worker = (
        "import gem\n"
        "from gem_roll.envs import register_envs\n"
        "from gem_roll.env_manager import _check_env_type\n"
        "register_envs()\n"
        "try:\n"
        f"    _check_env_type({{'env_type': {mod.env_id!r}}})  # what our env managers do first\n"
        f"    env = gem.make(env_id={mod.env_id!r})\n"
        "except Exception as exc:\n"
        "    print('ERROR', type(exc).__name__, exc); raise SystemExit(0)\n"
        "env.reset(seed=0)\n"
        "print([float(env.step('x')[1]) for _ in range(3)])\n"
    )
    base = {k: v for k, v in os.environ.items() if k != "GEM_ENV_MODULES"}
    out = subprocess.run([sys.executable, "-c", worker], capture_output=True, text=True, timeout=300, env=base,
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    err = out.stdout.split("ERROR ", 1)[-1]
    assert err.startswith("NameNotFound") and mod.env_id in err and "--env-module" in err
    out = subprocess.run([sys.executable, "-c", worker], capture_output=True, text=True, timeout=300,
                         env={**base, "GEM_ENV_MODULES": str(mod.path)}, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == str(list(USER_ENV_REWARDS))


def test_the_hooks_are_checked_with_a_named_message(harness, monkeypatch):
    """gem-roll checks the ROLL functions it hooks at import; a changed one is named."""
    from gem_roll import pipeline
    from roll.pipeline.agentic import utils as roll_utils

    pipeline.check_roll_hooks()  # ROLL at the tested commit
    monkeypatch.setattr(roll_utils, "agentic_reward_norm", lambda data, config: data)
    with pytest.raises(ImportError, match=r"ROLL changed roll.pipeline.agentic.utils.agentic_reward_norm: .*tested with 8eb27cc"):
        pipeline.check_roll_hooks()
