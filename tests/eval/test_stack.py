"""The tool and wrapper stack of `gem eval`: tool calls are counted, wrappers shape observations."""

from __future__ import annotations

import re

import pytest

from gem_core.eval import evaluate
from gem_core.rl.testing import TextPolicy

GTN = "game:GuessTheNumber-v0-easy"


@pytest.fixture(scope="module")
def tok(tiny):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny[1])


def test_python_tool_calls_are_run_counted_and_summarized(tiny, tok, tmp_path):
    """Turn 1 computes with the tool; turn 2 guesses the tool's output (always 5)."""

    def respond(prompt: str) -> str:
        if prompt.count("<|im_start|>assistant") == 1:  # first turn
            return "<python>print(2 + 3)</python>"
        return "\\boxed{" + re.findall(r"Code execution result: (\d+)", prompt)[-1] + "}"

    res = evaluate(GTN, base_url="http://unused.invalid/v1", model="scripted", tokenizer=tiny[1],
                   episodes=3, tools=["python"], max_turns=2, policy=TextPolicy(tok, respond),
                   progress=False, out_dir=tmp_path / "tool")
    for r in res.records:
        assert r["error"] is None and r["tool_calls"] == {"python": 1}
        assert r["actions"] == ["<python>print(2 + 3)</python>", "\\boxed{5}"]
        assert "Code execution result: 5" in r["observations"][1]
        assert r["rewards"][0] == 0.0  # tool turns pay nothing
    row = res.summary[GTN]
    assert row["tool_calls"] == 3 and row["tool_calls_by_name"] == {"python": 3}
    assert row["tool_episodes"] == 3
    assert row["successes"] == sum(r["success"] for r in res.records)
    assert res.manifest["stack"]["tools"] == ["python"]


def test_history_wrapper_reaches_the_policy(tiny, tok):
    res = evaluate(GTN, base_url="http://unused.invalid/v1", model="scripted", tokenizer=tiny[1],
                   episodes=1, wrappers=["history:concat_with_action"], max_turns=2,
                   policy=TextPolicy(tok, lambda p: "\\boxed{1}"), progress=False)
    obs = res.records[0]["observations"]
    assert obs[0].startswith("[Environment]\nYou are playing") and "[Agent]" not in obs[0]
    assert obs[1].startswith(obs[0]) and "[Agent]\n\\boxed{1}" in obs[1]
    assert res.manifest["config"]["wrappers"] == ["history:concat_with_action"]


TERMINAL = "terminal:count-lines-v0"


def test_terminal_task_success_is_graded_and_recorded(tiny, tok):
    from gem_core.registration import registry

    if TERMINAL not in registry:
        pytest.skip(f"{TERMINAL} is not registered in this checkout")

    def solver(prompt: str) -> str:
        if prompt.count("<|im_start|>assistant") == 1:
            return "<bash>find data -name '*.txt' -print0 | xargs -0 cat | wc -l > count.txt</bash>"
        return "<finish></finish>"

    common = dict(base_url="http://unused.invalid/v1", model="scripted", tokenizer=tiny[1],
                  episodes=2, concurrency=2, progress=False)
    solved = evaluate(TERMINAL, policy=TextPolicy(tok, solver), **common)
    quit_ = evaluate(TERMINAL, policy=TextPolicy(tok, lambda p: "<finish></finish>"), **common)
    for r in solved.records:
        assert r["error"] is None and r["success"] is True and r["num_turns"] == 2
        assert "[exit code: 0]" in r["observations"][1]
    assert all(r["success"] is False and r["num_turns"] == 1 for r in quit_.records)
    assert solved.summary[TERMINAL]["success_rate"] == 1.0
    assert quit_.summary[TERMINAL]["success_rate"] == 0.0
    assert solved.manifest["envs"][TERMINAL]["family"] == "terminal"


MATH = "math:GSM8K"


def test_math_env_with_the_python_tool(tiny, tok):
    """The agent computes the answer with the tool, then boxes the tool's output."""
    import json
    from pathlib import Path

    from gem_core.registration import registry

    if MATH not in registry:
        pytest.skip(f"{MATH} is not registered in this checkout")
    sample = Path(__import__("gem_core").__file__).parent / "data/samples/axon-rl__GSM-8k/train.jsonl"
    answers = {row["problem"]: row["answer"] for row in map(json.loads, sample.read_text().splitlines())}

    def respond(prompt: str) -> str:
        if prompt.count("<|im_start|>assistant") == 1:
            answer = next(a for q, a in answers.items() if q in prompt)
            return f"<python>print({answer!r})</python>"
        return "\\boxed{" + re.findall(r"Code execution result: (\S+)", prompt)[-1] + "}"

    res = evaluate(MATH, base_url="http://unused.invalid/v1", model="scripted", tokenizer=tiny[1],
                   episodes=3, concurrency=3, tools=["python"], env_kwargs={"data_path": "sample"},
                   max_turns=3, policy=TextPolicy(tok, respond), progress=False)
    for r in res.records:
        assert r["error"] is None and r["tool_calls"] == {"python": 1}, r
        assert r["success"] is True and r["num_turns"] == 2 and r["rewards"][-1] == 1.0
    row = res.summary[MATH]
    assert row["success_rate"] == 1.0 and row["tool_calls"] == 3
    assert res.manifest["config"]["env_kwargs"] == {"data_path": "sample"}
