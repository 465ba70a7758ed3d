r"""gem_core.grading.extract: the one ``\boxed{}`` and ``<answer>`` extractor, against a plain reference."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gem_core.grading.extract import (
    MAX_BOX_CHARS,
    boxed_span,
    extract_boxed,
    extract_tagged_answer,
    tagged_span,
)


# --- \boxed{} ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"The answer is \boxed{42}.", "42"),
        (r"first \boxed{1}, then \boxed{2}", "2"),  # the last box wins
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),  # nested braces
        (r"\boxed{\left(\frac{\sqrt{3}}{2}, \{1\}\right)}", r"\left(\frac{\sqrt{3}}{2}, \{1\}\right)"),
        (r"first \boxed{1} then \boxed{{2}} and \boxed{3", "{2}"),
        (r"\fbox{7}", "7"),
        (r"\boxed {7}", "7"),
        (r"so $\boxed 5$", "5"),  # no braces
        (r"\boxed \pi", r"\pi"),
        (r"\boxed \boxed{1}", "1"),  # a brace-less box never swallows another opener
        (r"\boxed a\boxed{1}", "1"),
        (r"\boxed{1} and an unclosed \boxed{2", "1"),  # unclosed: fall back to the complete one
        (r"\boxed{1} \boxed{a {b} c", "1"),  # unclosed with a nested pair inside
        (r"\boxed{x \boxed{1} y}", "1"),  # nested boxes: the one that starts last
        (r"\boxed{a} \boxed{b {c}} d}", "b {c}"),  # a stray closing brace after the box
        (r"stray } brace \boxed{ok}", "ok"),
        (r"\boxed{}", ""),
        (r"\boxedx{1}", None),  # not a box command
        ("no box here", None),
        ("", None),
        (r"\boxed{never closed", None),
    ],
)
def test_extract_boxed(text, expected) -> None:
    assert extract_boxed(text) == expected


@pytest.mark.parametrize("bad", [None, 42, b"\\boxed{1}", ["\\boxed{1}"]])
def test_non_text_is_none(bad) -> None:
    assert extract_boxed(bad) is None and boxed_span(bad) is None
    assert extract_tagged_answer(bad) is None and tagged_span(bad) is None


def test_max_chars_skips_a_long_box_like_an_unclosed_one() -> None:
    long = "x" * (MAX_BOX_CHARS + 1)
    assert extract_boxed(rf"\boxed{{1}} \boxed{{{long}}}") == "1"
    assert extract_boxed(rf"\boxed{{1}} \boxed{{{long}}}", max_chars=None) == long
    assert extract_boxed(r"\boxed{1} \boxed{12345}", max_chars=4) == "1"
    assert extract_boxed(r"\boxed{1} \boxed{{1}{2}{3}}", max_chars=4) == "1"  # the slow path too
    assert extract_boxed(r"\boxed{1} \boxed 12345", max_chars=4) == "1"


def test_span_points_at_the_content() -> None:
    text = r"so \boxed{\frac{1}{2}} done"
    start, end = boxed_span(text)
    assert text[start:end] == r"\frac{1}{2}" and text[end] == "}"


def _reference_boxed(text: str) -> str | None:
    """Plain quadratic reference: for each box opener from the last, match its braces."""
    import re

    opener = r"\\(?:boxed|fbox)(?:\s*\{|\s+(?!\\(?:boxed|fbox))(\\?[^\s${}\\]+))"
    for m in reversed(list(re.finditer(opener, text))):
        if m.group(1) is not None:
            return m.group(1)
        depth, i = 1, m.end()
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                return text[i:j]
    return None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["\\boxed{", "\\fbox{", "\\boxed ", "\\pi", "\\", "{", "}", "a", "1", " ", "$"]),
                max_size=30))
def test_agrees_with_the_plain_reference(parts) -> None:
    text = "".join(parts)
    assert extract_boxed(text) == _reference_boxed(text)


@pytest.mark.parametrize(
    "text",
    [
        "x" * 1_000_000,
        "\\boxed{" * 150_000,
        "\\boxed{" + "{" * 500_000,
        ("\\boxed{1" + "}" * 3) * 50_000,
        "\\boxed{" + "{}" * 300_000,
        "\\fbox{x}" + "\\boxed{" * 100_000,
    ],
)
def test_linear_on_huge_input(text) -> None:
    start = time.perf_counter()
    extract_boxed(text)
    extract_boxed(text, max_chars=None)
    assert time.perf_counter() - start < 5.0  # quiet: up to 0.48 s; quadratic: minutes


# --- <answer> ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>hmm</think><answer> Paris </answer>", "Paris"),
        ("<answer>one</answer> then <answer>two</answer>", "two"),
        ("<answer>draft <answer>final</answer>", "final"),
        ("<answer>multi\nline</answer>", "multi\nline"),
        ("<answer></answer>", ""),
        ("no tags", None),
        ("<answer>unclosed", None),
        ("closed only</answer>", None),
        ("<answer>a</answer><answer>unclosed", "a"),
    ],
)
def test_extract_tagged_answer(text, expected) -> None:
    assert extract_tagged_answer(text) == expected


def test_other_tags() -> None:
    assert extract_tagged_answer("<think> a </think><answer>b</answer>", tag="think") == "a"


def test_tagged_is_linear_on_pathological_input() -> None:
    # A regex `<answer>(.*?)</answer>` rescans the tail from every opening tag: quadratic.
    text = "<answer>" * 200_000
    start = time.perf_counter()
    assert extract_tagged_answer(text) is None
    assert extract_tagged_answer(text + "x</answer>") == "x"
    assert time.perf_counter() - start < 2.0


# --- one implementation, light ---------------------------------------------------------------------
def test_every_family_uses_the_one_extractor() -> None:
    from gem_core.envs.games import base as games
    from gem_core.grading import math as gm

    assert games.extract_last_boxed is extract_boxed
    assert gm.extract_boxed is extract_boxed


def test_games_stay_light() -> None:
    code = (
        "import sys, gem_core.envs.games.guess_the_number\n"
        "heavy = ('math_verify', 'sympy', 'torch', 'transformers', 'datasets', 'reasoning_gym', 'mcp',"
        " 'gem_core.grading.math', 'gem_core.grading.qa')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(
        st.sampled_from(["\\boxed{", "\\boxed ", "\\fbox{", "{", "}", "\\", "1", "a", " ", "$"]),
        max_size=12,
    ),
    st.sampled_from([None, 0, 1, 3]),
)
def test_the_flat_box_fast_path_agrees_with_boxed_span(parts, max_chars) -> None:
    # extract_boxed takes a shortcut for a flat last \boxed{...}; it must give exactly what
    # the general scan (boxed_span) gives, for any text and any max_chars.
    text = "".join(parts)
    span = boxed_span(text, max_chars)
    assert extract_boxed(text, max_chars) == (None if span is None else text[span[0] : span[1]])
