"""Code envs: the registered ids, every sample solution passes, rewards and format errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gem_core
from gem_core.envs.code import CodeEnv
from gem_core.errors import InvalidArgument, ResetNeeded
from gem_core.registration import registry

CODE_IDS = sorted(i for i, s in registry.items() if s.entry_point == "gem_core.envs.code:CodeEnv")


def _block(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


def _index(env: CodeEnv, name: str) -> int:
    return next(i for i, row in enumerate(env.rows) if row["name"] == name)


def test_every_reference_code_id_is_registered():
    assert set(CODE_IDS) == {"code:CodeContest", "code:Taco8k", "code:PrimeIntellect15k", "eval:CodeContest"}
    assert registry["eval:CodeContest"].kwargs["split"] == "test"
    assert registry["code:Taco8k"].kwargs["dataset_name"] == "axon-rl/TACO-8k"
    assert all(not registry[i].offline for i in CODE_IDS)


# check_env on every code id (on the shipped sample) is tests/test_checker.py::
# test_check_env_all_registered, which runs it on every registered id.


@pytest.mark.parametrize("env_id", ["code:CodeContest", "code:Taco8k"])
def test_every_sample_reference_solution_passes(env_id):
    env = gem_core.make(env_id, data_path="sample")
    rows = env.unwrapped.rows
    failed = []
    for i, row in enumerate(rows):
        env.reset(options={"index": i})
        obs, reward, terminated, truncated, info = env.step(_block(row["solution"]))
        if not (reward == 1.0 and info["success"] and terminated and not truncated):
            failed.append((row["name"], obs))
        assert info["tests_passed"] == info["tests_total"] or failed
    assert not failed
    assert len(rows) >= 50 and sum("fn_name" in json.dumps(r["tests"]) for r in rows) >= 5


def test_wrong_program_gets_zero_and_a_report():
    env = CodeEnv(data_path="sample")
    env.reset(options={"index": _index(env, "sum_numbers")})
    obs, reward, terminated, _, info = env.step(_block("input()\nprint(max(map(int, input().split())))"))
    assert reward == 0.0 and terminated and info["success"] is False
    assert info["first_failure"] == "wrong_answer" and info["format_error"] is False
    assert obs.startswith(f"Passed {info['tests_passed']} of 5 tests. Test {info['first_failure_index'] + 1} failed: wrong_answer (expected ")
    with pytest.raises(ResetNeeded, match="after the episode ended"):
        env.step(_block("print(1)"))


def test_fraction_reward_runs_every_test():
    env = CodeEnv(data_path="sample", reward="fraction")
    i = _index(env, "palindrome")
    expected = [o.strip() == "YES" for o in env.rows[i]["tests"]["outputs"]]
    assert 0 < sum(expected) < 5  # the sample mixes YES and NO cases
    env.reset(options={"index": i})
    _, reward, _, _, info = env.step(_block("print('YES')"))  # right on the YES cases only
    assert info["tests_run"] == 5 and "skipped" not in info["test_outcomes"]
    assert reward == pytest.approx(sum(expected) / 5) and info["tests_passed"] == sum(expected)
    assert info["success"] is False


def test_failure_kinds_reach_info():
    env = CodeEnv(data_path="sample", timeout_s=1.0)
    i = _index(env, "gcd")
    cases = {
        "raise RuntimeError('no')": "runtime_error",
        "while True:\n    pass": "timeout",
        "while True:\n    print(12345678)": "output_limit",
    }
    for code, kind in cases.items():
        env.reset(options={"index": i})
        _, reward, _, _, info = env.step(_block(code))
        assert (reward, info["first_failure"]) == (0.0, kind)


def test_function_call_problem():
    env = CodeEnv(data_path="sample")
    obs, _ = env.reset(options={"index": _index(env, "climb_stairs")})
    assert "defines the function `climb_stairs`" in obs
    _, reward, *_ = env.step(_block("class Solution:\n    def climb_stairs(self, n):\n"
                                    "        a, b = 1, 1\n        for _ in range(n):\n"
                                    "            a, b = b, a + b\n        return a"))
    assert reward == 1.0
    env.reset(options={"index": _index(env, "climb_stairs")})
    _, reward, _, _, info = env.step(_block("def climb_stairs(n):\n    return n"))
    assert reward == 0.0 and info["first_failure"] == "wrong_answer"


@pytest.mark.parametrize(
    "action, what",
    [
        ("print(1)", "no ```python code block"),
        ("```bash\necho 1\n```", "no ```python code block"),
        ("```python\n\n```", "an empty code block"),
        (None, "a non-text reply"),
        (["```python\nprint(1)\n```"], "a non-text reply"),
        ("```python\n" + "x = 1\n" * 20_000 + "```", "a program of 119999 characters (at most 100000)"),
    ],
)
def test_format_errors(action, what):
    env = CodeEnv(data_path="sample")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs == f"Format error: {what}. Put the whole program in one ```python code block."
    assert (reward, terminated, truncated) == (-0.1, True, False)
    assert info["format_error"] is True and info["success"] is False and info["tests_run"] == 0


def test_max_tests_and_arguments(tmp_path: Path):
    env = CodeEnv(data_path="sample", max_tests=2)
    env.reset(options={"index": _index(env, "sum_numbers")})
    assert len(env.tests) == 2
    _, _, _, _, info = env.step(_block("n = int(input())\nprint(sum(map(int, input().split())))"))
    assert info["tests_total"] == 2 and info["success"]
    with pytest.raises(InvalidArgument, match=r"expects one of \('all', 'fraction'\).*got 'most'"):
        CodeEnv(data_path="sample", reward="most")
    with pytest.raises(InvalidArgument, match="max_tests=...\\) expects a positive int or None, got 0"):
        CodeEnv(data_path="sample", max_tests=0)
    with pytest.raises(InvalidArgument, match="timeout_s=...\\) expects a positive number of seconds, got -1"):
        CodeEnv(data_path="sample", timeout_s=-1)
    bad = tmp_path / "rows.jsonl"
    bad.write_text(json.dumps({"problem": "p", "tests": {"cases": []}}) + "\n"
                   + json.dumps({"problem": "q", "tests": {"inputs": [], "outputs": []}}) + "\n")
    env = CodeEnv("my/code", data_path=str(bad))
    with pytest.raises(ValueError, match=r"row 0 of 'my/code': unrecognised tests field"):
        env.reset(options={"index": 0})
    with pytest.raises(ValueError, match=r"row 1 of 'my/code' has no test cases"):
        env.reset(options={"index": 1})


def test_own_sandbox_is_used_and_left_open():
    from gem_core.sandbox import Sandbox

    with Sandbox(size=1) as sandbox:
        env = CodeEnv(data_path="sample", sandbox=sandbox, add_instructions=False)
        obs, _ = env.reset(options={"index": _index(env, "sum_to_hundred")})
        assert obs.startswith("This problem has no input.") and "```python" not in obs
        _, reward, *_ = env.step(_block("print(5050)"))
        assert reward == 1.0
        env.close()
        env.close()
        assert not sandbox.closed
