"""gem_core.compat.utils: constants and the reference parsers, linear on hostile input."""

from __future__ import annotations

import time

import pytest

from gem_core.compat.utils.constants import TERMINAL_STATE, LanguageGameReward
from gem_core.compat.utils.parsing import (
    extract_code_from_model,
    extract_last_boxed_answer,
    extract_last_tagged_answer,
)


def test_constants():
    assert TERMINAL_STATE == "<｜TERMINAL_STATE｜>"
    assert LanguageGameReward.success_reward == 1.0 and LanguageGameReward.format_error_reward == -0.1


def test_parsers():
    assert extract_last_boxed_answer(r"x \boxed{1} y \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert extract_last_boxed_answer("no box") is None and extract_last_boxed_answer(None) is None
    assert extract_code_from_model("a\n```python\nprint(1)\n```\nb\n```\nprint(2)\n```") == "print(2)"
    assert extract_code_from_model("no code") is None and extract_code_from_model(3) is None
    assert extract_last_tagged_answer("<answer> a </answer> <answer> b </answer>") == "b"
    assert extract_last_tagged_answer("none") is None


@pytest.mark.parametrize(
    "text",
    ["\\boxed{" * 100_000, "{" * 100_000, "```" * 40_000, "```python\n" * 10_000, "<answer>" * 20_000],
)
def test_parsers_are_linear(text):
    start = time.process_time()
    extract_last_boxed_answer(text)
    extract_code_from_model(text)
    extract_last_tagged_answer(text)
    assert time.process_time() - start < 0.5  # quiet: 70 ms CPU (700 kB of \boxed{); quadratic: minutes
