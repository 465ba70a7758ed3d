"""Tests of the ReasoningGym envs (rg:*): the static name list, every dataset's reference answers, parsing, robustness."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import time

import pytest

import gem_core
from gem_core.envs import reasoning_gym as rgmod
from gem_core.envs.reasoning_gym import (
    DATASET_NAMES,
    EXCLUDED,
    HASH_SEED_DEPENDENT,
    NO_REFERENCE_ANSWER,
    REGISTERED_NAMES,
    ReasoningGymEnv,
    extract_answer,
    reference_action,
)
from gem_core.errors import (
    DependencyNotInstalled,
    InvalidArgument,
    NameNotFound,
    ResetNeeded,
    install_command,
)

rg = pytest.importorskip(
    "reasoning_gym", reason="reasoning-gym is not installed (pip install 'gem-core[reasoning]')"
)

SEEDS = (0, 1)  # items 0 and 1 of each registered dataset (size 500, seed 42)


def _tagged(answer: str) -> str:
    return f"I worked it out.\n<answer>{answer}</answer>"


def _fingerprint(env: gem_core.Env, seed: int) -> str:
    obs, _ = env.reset(seed=seed)
    answer = env.unwrapped.entry["answer"]
    return hashlib.sha256(f"{obs}|{answer}".encode()).hexdigest()[:16]


# --- the static list -----------------------------------------------------------------
def test_static_name_list_matches_installed_package():
    from reasoning_gym.factory import DATASETS

    installed, static = set(DATASETS), set(DATASET_NAMES)
    missing, stale = sorted(installed - static), sorted(static - installed)
    assert not missing and not stale, (
        f"gem_core.envs.reasoning_gym.DATASET_NAMES drifted from reasoning_gym "
        f"{getattr(rg, '__version__', '?')} (list taken from {rgmod.SUPPORTED_VERSION}): "
        f"in the package but not the list: {missing}; in the list but not the package: {stale}. "
        "Update DATASET_NAMES and re-run this file to find scorer bugs of new datasets."
    )
    assert list(DATASET_NAMES) == sorted(DATASET_NAMES)


def test_tables_name_known_datasets_and_registration_follows_them():
    for table in (EXCLUDED, NO_REFERENCE_ANSWER, HASH_SEED_DEPENDENT):
        assert set(table) <= set(DATASET_NAMES), set(table) - set(DATASET_NAMES)
    assert all(isinstance(reason, str) and reason for reason in EXCLUDED.values())
    registered = {i[3:] for i in gem_core.registry if i.startswith("rg:")}
    assert registered == set(REGISTERED_NAMES) == set(DATASET_NAMES) - set(EXCLUDED)
    spec = gem_core.spec("rg:leg_counting")
    assert spec.kwargs == {"name": "leg_counting", "size": 500, "seed": 42}
    assert spec.max_turns == 1 and spec.offline
    with pytest.raises(NameNotFound):
        gem_core.spec("rg:composite")


def test_import_gem_core_does_not_import_reasoning_gym():
    code = (
        "import sys, gem_core\n"
        "n = sum(1 for i in gem_core.registry if i.startswith('rg:'))\n"
        "print(n, 'reasoning_gym' in sys.modules, 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(len(REGISTERED_NAMES)), "False", "False"]


# --- every dataset against its own reference answers ------------------------------------
@pytest.mark.parametrize("name", REGISTERED_NAMES)
def test_reference_answer_gets_full_score(name):
    env = gem_core.make(f"rg:{name}")
    try:
        for seed in SEEDS:
            env.reset(seed=seed)
            entry = env.unwrapped.entry
            action = reference_action(entry, name)
            if action is None:
                assert name in NO_REFERENCE_ANSWER and NO_REFERENCE_ANSWER[name] is None
                # No solution to feed: the scorer must at least reject a wrong one cleanly.
                _, reward, terminated, truncated, info = env.step(_tagged("no idea"))
                assert (terminated, truncated, info["success"]) == (True, False, False)
                assert reward < 0.5 and "scorer_error" not in info  # rush_hour pays 0.01 for trying
                continue
            assert (entry["answer"] is None) == (name in NO_REFERENCE_ANSWER)
            _, reward, terminated, truncated, info = env.step(action)
            assert "scorer_error" not in info, info["scorer_error"]
            assert reward == pytest.approx(1.0) and info["success"] is True, (
                f"rg:{name} seed {seed}: the reference answer {action!r} scored {reward}"
            )
            assert (terminated, truncated, info["format_error"]) == (True, False, False)
            # The same answer in \boxed{} scores the same (when it survives boxing).
            answer = extract_answer(action)
            boxed = f"The answer is \\boxed{{{answer}}}."
            if extract_answer(boxed) == answer:
                env.reset(seed=seed)
                assert env.step(boxed)[4]["success"] is True
    finally:
        env.close()


def test_unverified_datasets_are_the_ones_without_a_solution():
    assert {n for n, key in NO_REFERENCE_ANSWER.items() if key is None} == {"boxnet", "rush_hour"}


def test_items_do_not_depend_on_the_hash_seed():
    """Same seed ⇒ same task in another process (another PYTHONHASHSEED), except the
    datasets listed in HASH_SEED_DEPENDENT."""
    names = [n for n in REGISTERED_NAMES if n not in HASH_SEED_DEPENDENT]
    code = (
        "import json, sys, hashlib, gem_core\n"
        "out = {}\n"
        "for n in json.loads(sys.argv[1]):\n"
        "    env = gem_core.make('rg:' + n)\n"
        "    out[n] = []\n"
        "    for s in (0, 1):\n"
        "        obs, _ = env.reset(seed=s)\n"
        "        out[n].append(hashlib.sha256(f\"{obs}|{env.unwrapped.entry['answer']}\".encode()).hexdigest()[:16])\n"
        "print(json.dumps(out))\n"
    )
    hash_seed = "4242" if os.environ.get("PYTHONHASHSEED") != "4242" else "4343"
    child = subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(names)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
    )
    here = {}
    for n in names:
        env = gem_core.make(f"rg:{n}")
        here[n] = [_fingerprint(env, s) for s in (0, 1)]
    there = json.loads(child.communicate(timeout=120)[0])
    differ = sorted(n for n in names if here[n] != there[n])
    assert not differ, f"items depend on PYTHONHASHSEED; add to HASH_SEED_DEPENDENT: {differ}"


# --- answer extraction ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer> 42 </answer>", "42"),
        ("\\boxed{42}", "42"),
        ("\\boxed{1} then \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{7} and an unclosed \\boxed{8", "7"),
        ("<answer>1</answer> later \\boxed{2}", "2"),
        ("\\boxed{2} later <answer>1</answer>", "1"),
        ("<answer>\\boxed{x}</answer>", "x"),
        ("<answer>\\boxed{x} or \\boxed{y}</answer>", "\\boxed{x} or \\boxed{y}"),
        ("<answer>a\nb\n</answer>", "a\nb"),
        ("<answer>{ unbalanced</answer>", "{ unbalanced"),
        ("stray } brace \\boxed{ok}", "ok"),
        ("<answer>unclosed", None),
        ("nothing here", None),
        ("", None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_extract_answer_is_linear_on_adversarial_input():
    text = "\\boxed{" * 200_000 + "<answer>" * 100_000
    start = time.perf_counter()
    assert extract_answer(text) is None
    assert time.perf_counter() - start < 2.0


# --- the env itself ---------------------------------------------------------------------
@pytest.fixture
def leg_env():
    env = gem_core.make("rg:leg_counting")
    yield env
    env.close()


def test_seeded_reset_picks_item_seed_mod_size_and_is_deterministic(leg_env):
    obs, info = leg_env.reset(seed=3)
    assert info == {"rg_dataset": "leg_counting", "index": 3}
    assert obs.endswith(rgmod.DEFAULT_INSTRUCTION)
    assert leg_env.reset(seed=503)[0] == obs  # 503 % 500
    assert leg_env.reset(options={"index": 3})[0] == obs
    assert leg_env.reset(seed=4)[0] != obs
    leg_env.reset(seed=9)
    unseeded = [leg_env.reset()[1]["index"] for _ in range(5)]
    leg_env.reset(seed=9)
    assert [leg_env.reset()[1]["index"] for _ in range(5)] == unseeded
    with pytest.raises(InvalidArgument, match=r"expects an int in \[0, 500\), got 500"):
        leg_env.reset(options={"index": 500})


def test_envs_share_one_dataset_per_config():
    a = ReasoningGymEnv("leg_counting")
    b = ReasoningGymEnv("leg_counting")
    c = ReasoningGymEnv("leg_counting", size=10)
    assert a._data is b._data and a._data is not c._data
    small = ReasoningGymEnv("leg_counting", size=10, config={"min_animals": 1, "max_animals": 1})
    obs, _ = small.reset(seed=0)
    animals = obs.split("if you have", 1)[1].split("?", 1)[0]
    assert "," not in animals, animals  # one kind of animal, not a list


@pytest.mark.parametrize(
    "action",
    ["", "   ", "just words, no answer", None, 123, ["<answer>1</answer>"], "x" * 1_000_000],
)
def test_bad_actions_score_zero_with_a_format_error(leg_env, action):
    leg_env.reset(seed=0)
    obs, reward, terminated, truncated, info = leg_env.step(action)
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["format_error"] is True and info["success"] is False
    assert "expected the final answer inside \\boxed{...} or <answer>...</answer>" in obs


def test_overlong_answer_is_a_format_error():
    env = ReasoningGymEnv("leg_counting", max_answer_chars=10, format_penalty=-0.5)
    env.reset(seed=0)
    obs, reward, _, _, info = env.step(_tagged("1" * 11))
    assert reward == -0.5 and info["format_error"] is True
    assert "11 characters, over the limit of 10" in obs


def test_wrong_answer_scores_zero_without_format_error(leg_env):
    leg_env.reset(seed=0)
    _, reward, terminated, _, info = leg_env.step("\\boxed{-1}")
    assert (reward, terminated, info["success"], info["format_error"]) == (0.0, True, False, False)
    assert (
        info["parsed_action"] == "-1"
        and info["reference_answer"] == leg_env.unwrapped.entry["answer"]
    )


@pytest.mark.parametrize(
    ("scorer", "expected"),
    [
        ("return 1 / 0", "ZeroDivisionError: division by zero"),
        ("return float('nan')", "ValueError: score_answer returned nan"),
        ("return 'high'", "ValueError: score_answer returned 'high', not a number"),
        ("import os; os._exit(9)", "the scoring process gave no single result (exit code 9"),
    ],
)
def test_broken_scorer_gives_zero_and_scorer_error(monkeypatch, scorer, expected):
    """The scorer runs in the sandbox: its replacement is source run there (testing hook)."""
    env = ReasoningGymEnv("leg_counting", size=7)
    source = f"def score_answer(answer, entry):\n    {scorer}\n"
    monkeypatch.setattr(env._data, "debug_scorer_source", source)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(_tagged("3"))
    assert (reward, terminated, info["success"]) == (0.0, True, False)
    assert info["scorer_error"].startswith(expected), info["scorer_error"]
    assert "scorer_timeout" not in info


def test_slow_scorer_times_out_with_flags():
    env = ReasoningGymEnv("leg_counting", size=7, score_timeout=1)
    env._data.debug_scorer_source = "def score_answer(answer, entry):\n    while True: pass\n"
    try:
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step(_tagged("3"))
    finally:
        env._data.debug_scorer_source = None
    assert (reward, terminated, info["scorer_timeout"]) == (0.0, True, True)
    assert "scoring took longer than 1 s" in info["scorer_error"]
    with pytest.raises(InvalidArgument, match="score_timeout must be a positive number"):
        ReasoningGymEnv("leg_counting", score_timeout=0)


def test_step_before_reset_and_after_end_raise_reset_needed():
    env = ReasoningGymEnv("leg_counting")
    with pytest.raises(ResetNeeded, match="before reset"):
        env.step("<answer>1</answer>")
    env.reset(seed=0)
    env.step("<answer>1</answer>")
    with pytest.raises(ResetNeeded, match="after the episode ended"):
        env.step("<answer>1</answer>")


def test_global_generators_are_left_alone():
    import numpy as np

    random.seed(7)
    np.random.seed(7)
    py_state, np_state = random.getstate(), np.random.get_state()[1].copy()
    for name in ("codeio", "list_functions", "pool_matrix"):
        env = ReasoningGymEnv(name)
        for seed in (5, 6):
            env.reset(seed=seed)
            env.step(reference_action(env.entry, name))
    assert random.getstate() == py_state
    assert (np.random.get_state()[1] == np_state).all()


def test_bad_names_and_arguments_are_explained():
    with pytest.raises(
        InvalidArgument,
        match=r"unknown reasoning_gym dataset 'leg_count'.*Did you mean 'leg_counting'",
    ):
        ReasoningGymEnv("leg_count")
    with pytest.raises(
        InvalidArgument, match="'composite' is not supported: not a task but a mixer"
    ):
        ReasoningGymEnv("composite")
    with pytest.raises(InvalidArgument, match="size must be a positive int, got 0"):
        ReasoningGymEnv("leg_counting", size=0)
    with pytest.raises(InvalidArgument, match="config must be a dict"):
        ReasoningGymEnv("leg_counting", config=[1])


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # makes `import reasoning_gym` fail
    monkeypatch.setattr(rgmod, "_DATASETS", {})
    with pytest.raises(DependencyNotInstalled, match=re.escape(install_command("reasoning"))):
        gem_core.make("rg:leg_counting")


def test_sample_random_action_mixes_right_and_wrong_answers(leg_env):
    outcomes = set()
    for seed in range(20):
        leg_env.reset(seed=seed)
        outcomes.add(leg_env.step(leg_env.sample_random_action())[4]["success"])
    assert outcomes == {True, False}


# check_env on every rg:* id (all of them, in `make test`) is tests/test_checker.py::
# test_check_env_all_registered; its cost is stated there.
