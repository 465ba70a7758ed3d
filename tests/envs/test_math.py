"""Math task envs: registered ids, rewards and flags, problem order, tools, and the data errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("math_verify", reason="math envs need math-verify (gem-core[math])")

from gem_core import make  # noqa: E402
from gem_core.data import DatasetUnavailable  # noqa: E402
from gem_core.envs.math import DEFAULT_INSTRUCTION, MathEnv  # noqa: E402
from gem_core.errors import InvalidArgument  # noqa: E402
from gem_core.registration import registry  # noqa: E402

MATH_IDS = sorted(i for i, s in registry.items() if s.entry_point == "gem_core.envs.math:MathEnv")
REFERENCE_IDS = {  # id -> (dataset, split), as in the reference GEM's gem/envs/__init__.py
    "math:ASDiv2K": ("axon-rl/ASDIV-2k", "train"),
    "math:GSM8K": ("axon-rl/GSM-8k", "train"),
    "math:Math12K": ("axon-rl/MATH-12k", "train"),
    "math:Math8K-3to5": ("axon-rl/MATH-lvl3to5-8k", "train"),
    "math:Orz57K": ("axon-rl/ORZ-57k", "train"),
    "math:DeepScaleR40K": ("axon-rl/DeepScaleR-40K", "train"),
    "eval:MATH500": ("axon-rl/math-eval", "math"),
    "eval:AMC": ("axon-rl/math-eval", "amc"),
    "eval:OlympiadBench": ("axon-rl/math-eval", "olympiad_bench"),
    "eval:Minerva": ("axon-rl/math-eval", "minerva"),
    "eval:AIME24": ("axon-rl/math-eval", "aime24"),
}


def _rows_file(tmp_path, rows, name="d.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_reference_ids_are_registered_with_its_datasets() -> None:
    assert MATH_IDS == sorted(REFERENCE_IDS)
    for env_id, (dataset, split) in REFERENCE_IDS.items():
        spec = registry[env_id]
        assert (spec.kwargs["dataset_name"], spec.kwargs["split"]) == (dataset, split)
        assert (spec.kwargs["question_key"], spec.kwargs["answer_key"]) == ("problem", "answer")
        assert spec.offline is False and spec.max_turns == 1


# check_env on every math id (on the shipped sample) is tests/test_checker.py::
# test_check_env_all_registered, which runs it on every registered id.


@pytest.mark.parametrize("env_id", sorted(REFERENCE_IDS))
def test_each_sample_problem_is_solved_by_its_own_answer(env_id) -> None:
    env = make(env_id, data_path="sample")
    assert len(env.unwrapped.rows) >= 30
    for i in range(0, len(env.unwrapped.rows), 7):
        env.reset(options={"index": i})
        answer = env.unwrapped.rows[i]["answer"]
        _, reward, terminated, _, info = env.step(f"Working... so the answer is $\\boxed{{{answer}}}$.")
        assert (reward, terminated, info["success"]) == (1.0, True, True), (i, answer)


def test_rewards_and_info_of_right_wrong_and_unboxed_answers() -> None:
    env = make("math:Math12K", data_path="sample")
    obs, info = env.reset(seed=0)
    assert obs.endswith("\n\n" + DEFAULT_INSTRUCTION) and info == {"turn": 0, "success": False, "index": info["index"]}
    answer = env.unwrapped.answer
    obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{answer}}}")
    assert (obs, reward, terminated, truncated) == ("Correct.", 1.0, True, False)
    assert info["success"] is True and info["parsed_action"] == answer and info["format_error"] is False

    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("\\boxed{\\frac{123}{457}}")
    assert (obs, reward, terminated, truncated) == ("Incorrect.", 0.0, True, False)
    assert info["success"] is False and info["correct"] is False and info["grader_timeout"] is False

    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(f"The answer is {answer}.")
    assert reward == 0.0 and terminated and info["format_error"] and info["parsed_action"] is None
    assert obs.startswith("Format error: no \\boxed{...} answer found")


@pytest.mark.parametrize("bad", [None, 7, "", "x" * 1_000_000, {"role": "assistant"}, "\\boxed{" * 10_000])
def test_bad_actions_are_format_errors_with_the_penalty(bad) -> None:
    env = make("math:GSM8K", data_path="sample", format_penalty=-0.5)
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(bad)
    assert reward == -0.5 and terminated and not truncated
    assert info["format_error"] is True and info["success"] is False
    assert isinstance(obs, str) and obs.startswith("Format error")


def test_reference_switch_use_format_error_reward() -> None:
    env = make("math:GSM8K", data_path="sample", use_format_error_reward=True)
    env.reset(seed=1)
    assert env.step("no box")[1] == -0.1


def test_last_box_is_graded_and_lists_of_answers_are_accepted(tmp_path) -> None:
    path = _rows_file(tmp_path, [{"problem": "Name a root of x^2=4.", "answer": ["2", "-2"]}])
    env = MathEnv("org/roots", data_path=path)
    env.reset()
    assert env.step("maybe \\boxed{2}? no: \\boxed{-2}")[1] == 1.0
    env.reset()
    assert env.step("maybe \\boxed{2}? no: \\boxed{3}")[1] == 0.0
    env.reset()
    assert env.step("\\boxed{2}")[1] == 1.0


def test_numeric_answers_in_the_data(tmp_path) -> None:
    path = _rows_file(tmp_path, [{"q": "Half of one?", "a": 0.5}])
    env = MathEnv("org/num", question_key="q", answer_key="a", data_path=path, instruction=None)
    obs, _ = env.reset()
    assert obs == "Half of one?"
    assert env.step("\\boxed{\\frac12}")[1] == 1.0


def test_multiple_attempts() -> None:
    env = make("math:GSM8K", data_path="sample", max_turns=3)
    env.reset(seed=4)
    obs, reward, terminated, truncated, info = env.step("\\boxed{-1}")
    assert (reward, terminated, truncated) == (0.0, False, False) and "2 attempts left" in obs
    obs, reward, terminated, _, info = env.step("no box")
    assert not terminated and info["format_error"] and "1 attempt left" in obs
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{env.unwrapped.answer}}}")
    assert (reward, terminated, info["success"], info["turn"]) == (1.0, True, True, 3)
    env.reset(seed=4)
    for _ in range(2):
        env.step("\\boxed{-1}")
    _, reward, terminated, truncated, info = env.step("\\boxed{-1}")
    assert (reward, terminated, truncated, info["success"]) == (0.0, True, False, False)


def test_problem_order_seeded_indexed_and_epochs() -> None:
    # The order itself is DatasetTaskEnv's (tests/envs/test_families.py); here: MathEnv uses it.
    env = make("math:GSM8K", data_path="sample")
    n = len(env.unwrapped.rows)
    first = [env.reset(seed=s)[0] for s in range(5)]
    assert first == [env.reset(seed=s)[0] for s in range(5)]
    assert len(set(first)) > 1
    assert env.reset(options={"index": 3})[1]["index"] == 3
    seen = [env.reset(seed=9)[1]["index"]] + [env.reset()[1]["index"] for _ in range(n - 1)]
    assert sorted(seen) == list(range(n))  # the seeded reset opens an epoch: every problem once
    assert env.unwrapped.epoch == 0
    env.reset()
    assert env.unwrapped.epoch == 1
    unshuffled = make("math:GSM8K", data_path="sample", shuffle=False)
    unshuffled.reset(options={"index": 0})
    assert [unshuffled.reset()[1]["index"] for _ in range(3)] == [0, 1, 2]
    start = unshuffled.reset(seed=5)[1]["index"]
    assert [unshuffled.reset()[1]["index"] for _ in range(2)] == [(start + 1) % n, (start + 2) % n]


def test_bad_index_option_names_the_range() -> None:
    env = make("math:GSM8K", data_path="sample")
    with pytest.raises(InvalidArgument, match=r"math:GSM8K: .*expects an int in \[0, 50\) \(the dataset has 50 rows\), got 50"):
        env.reset(options={"index": 50})


def test_grader_timeout_is_flagged_in_info() -> None:
    from gem_core.grading.math import MathGrader

    with MathGrader(num_workers=1) as grader:
        env = make("math:Math12K", data_path="sample", grader=grader, grade_timeout=1e-4)
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step("\\boxed{\\frac{\\sqrt{123}}{457}}")
        assert reward == 0.0 and terminated
        assert info["grader_timeout"] is True and info["grader_error"] is True


def test_multi_turn_with_the_python_tool() -> None:
    from gem_core.tools import PythonCodeTool, ToolEnvWrapper

    env = ToolEnvWrapper(make("math:GSM8K", data_path="sample"), [PythonCodeTool(timeout_s=20)], max_tool_uses=2)
    try:
        obs, _ = env.reset(options={"index": 0})
        assert "<python>" in obs  # the tool's instructions follow the problem
        answer = env.unwrapped.answer
        obs, reward, terminated, truncated, info = env.step(f"<python>print({answer} * 1)</python>")
        assert info["use_tool"] is True and not (terminated or truncated) and reward == 0.0
        assert obs.startswith(f"Code execution result: {answer}"), obs
        assert env.unwrapped.turn == 0  # a tool turn uses no answer attempt
        obs, reward, terminated, truncated, info = env.step(f"So the answer is \\boxed{{{answer}}}.")
        assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    finally:
        env.close()


def test_missing_data_offline_names_the_id_and_the_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("GEM_DATA_DIR", raising=False)
    monkeypatch.delenv("GEM_DATA", raising=False)
    with pytest.raises(DatasetUnavailable) as e:
        make("eval:AIME24")
    cause = e.value
    assert "eval:AIME24: dataset 'axon-rl/math-eval' (split 'aime24') has no local copy" in str(cause)
    assert "data_path='sample'" in str(cause)


def test_rows_without_the_keys_are_rejected(tmp_path) -> None:
    path = _rows_file(tmp_path, [{"question": "1+1", "answer": "2"}])
    with pytest.raises(ValueError, match=r"lack the column\(s\) \['problem'\]"):
        MathEnv("org/x", data_path=path)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_turns": 0}, "max_turns must be an int >= 1 (answer attempts per episode), got 0"),
        ({"grade_timeout": -1}, "grade_timeout must be a positive number of seconds or None, got -1"),
        ({"grader": "pool"}, "grader must be a gem_core.grading.math.MathGrader or None, got str"),
    ],
)
def test_bad_arguments(kwargs, message) -> None:
    with pytest.raises(InvalidArgument) as e:
        MathEnv("axon-rl/GSM-8k", data_path="sample", **kwargs)
    assert message in str(e.value)


def test_the_env_process_never_imports_sympy() -> None:
    code = textwrap.dedent(
        """
        import sys
        import gem_core
        env = gem_core.make("math:Math12K", data_path="sample")
        env.reset(seed=0)
        assert env.step("\\\\boxed{\\\\frac{1}{2}}")[4]["grader_error"] is False
        print(sorted(m for m in ("sympy", "math_verify", "torch", "datasets") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
