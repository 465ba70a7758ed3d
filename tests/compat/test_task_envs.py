"""The reference-shaped classes of `gem_core.compat.envs` (what ROLL subclasses) and their helpers."""

from __future__ import annotations

import pytest

from gem_core.compat.envs._rows import Rows, references
from gem_core.compat.envs.code_env import CodeEnv
from gem_core.compat.envs.game_env.guess_the_number import GuessTheNumberEnv
from gem_core.compat.envs.math_env import FORMAT_ERROR_REWARD, MathEnv
from gem_core.compat.envs.qa_env import QaEnv
from gem_core.compat.utils.constants import TERMINAL_STATE
from gem_core.errors import InvalidArgument, InvalidKwarg

ROWS = [{"problem": f"{i}+{i}", "answer": str(2 * i)} for i in range(5)]


def test_math_env_grades_and_serves_rows_like_the_reference():
    env = MathEnv(dataset=ROWS, use_format_error_reward=True, seed=3)
    assert sorted(env.dataset["problem"]) == sorted(r["problem"] for r in ROWS)  # shuffled by seed
    obs, info = env.reset(idx=2)
    row = env.dataset[2]
    assert (obs, info, env.answer) == (row["problem"], {}, row["answer"]) and env.idx == 3
    assert env.step(f"so \\boxed{{{row['answer']}}}") == (TERMINAL_STATE, 1.0, True, True, {"correct": True})
    assert env.step("\\boxed{77}")[1:3] == (0, True)
    assert env.step("four")[1] == FORMAT_ERROR_REWARD
    fresh = MathEnv(dataset=ROWS, seed=3)
    seen = {fresh.reset()[0] for _ in range(5)}  # an epoch serves every row once, then reshuffles
    assert len(seen) == 5 and fresh.epoch == 0
    fresh.reset()
    assert fresh.epoch == 1 and len(fresh.dataset) == 5
    assert MathEnv.check_correct("\\boxed{0.5}", ["1/2"]) and not MathEnv.check_correct("x", 3)
    with pytest.raises(ValueError, match="Unexpected answer type"):
        MathEnv.check_correct("1", {"a": 1})
    with pytest.raises(InvalidArgument, match="0 <= idx < 5"):
        env.reset(idx=9)


def test_qa_env_applies_the_prompt_and_extracts_the_tagged_or_boxed_answer():
    rows = [{"question": "capital of France?", "answer": ["Paris", "paris"]}]
    env = QaEnv(dataset=rows)
    obs, _ = env.reset()
    assert obs.endswith("Question: capital of France?\n") and "<answer>" in obs
    assert env.step("<answer>Paris</answer>")[1] == 1.0 and env.step("\\boxed{Paris}")[1] == 0.0
    boxed = QaEnv(dataset=rows, extract_boxed=True)
    boxed.reset()
    assert boxed.step("\\boxed{Paris}")[1] == 1.0 and boxed.step("<answer>Paris</answer>")[1] == 0.0
    with pytest.raises(InvalidArgument, match="lack the column"):
        QaEnv(dataset=[{"q": 1}])


def test_code_env_runs_the_tests_in_the_sandbox():
    env = CodeEnv(dataset=[{"problem": "echo", "tests": '{"inputs": ["3\\n"], "outputs": ["3\\n"]}'}])
    env.reset()
    assert env.tests == {"inputs": ["3\n"], "outputs": ["3\n"]}  # JSON text decoded
    assert env.step("```python\nprint(input())\n```")[1] == 1.0
    assert env.step("```python\nprint(4)\n```")[1] == 0.0
    assert env.step("no code")[1] == -0.1


def test_a_roll_style_subclass_overrides_step_and_reuses_the_parts():
    class RollQa(QaEnv):
        def step(self, action):
            answer = self.extractor(action)
            ok = answer is not None and self.check_correct(answer, self.answer)
            return TERMINAL_STATE, float(ok), True, True, {"metrics": {"success": ok}}

    env = RollQa(dataset=[{"question": "2+2?", "answer": "4"}])
    env.reset(seed=0)
    assert env.step("<answer>4</answer>")[1] == 1.0 and env.dataset.shuffle(seed=1)[0]["answer"] == "4"


def test_rows_has_the_dataset_methods_the_reference_envs_use():
    rows = Rows(ROWS)
    assert rows["answer"] == ["0", "2", "4", "6", "8"] and rows.column_names == ["problem", "answer"]
    assert sorted(rows.shuffle(seed=1)["answer"]) == rows["answer"] and rows.shuffle(seed=1) == rows.shuffle(seed=1)
    assert rows.select([4, 0])["answer"] == ["8", "0"] and isinstance(rows[1:3], Rows)
    assert rows.map(lambda r: {**r, "answer": r["answer"] + "!"})[0]["answer"] == "0!" and rows[0]["answer"] == "0"
    assert references(3) == ["3"] and references(["a", 1]) == ["a", "1"]


def test_game_classes_take_the_reference_arguments():
    env = GuessTheNumberEnv(1, 10, 5, seed=7)  # (min_number, max_number, max_turns), seed: the first reset's
    first, _ = env.reset()
    again = GuessTheNumberEnv(min_number=1, max_number=10, max_turns=5, seed=7)
    assert again.reset()[0] == first
    with pytest.raises(InvalidKwarg, match="unknown argument"):
        GuessTheNumberEnv(colour="red")
    with pytest.raises(TypeError, match="multiple values"):
        GuessTheNumberEnv(1, min_number=2)
    assert type(env.spawn()) is GuessTheNumberEnv
