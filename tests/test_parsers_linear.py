r"""Every parser of model text in the games and the shared extractors runs in linear time.

Model output is hostile: a policy under RL training finds any input that stalls a step.
These tests feed the game parsers (through ``env.step`` and ``parse_move``), the
``\boxed{}`` / ``<answer>`` extractors and the QA grader 10^5 characters of separators,
openers, digits, spaces and braces, and the exact box shapes that hung a step before
(issue 12, item 7: Sudoku 307 s on 803 characters, WordSearch 35 s on 603, Crosswords and
TowerofHanoi 5–9 s at the box limit).

Timing: each call must take < 0.25 s of CPU time. A super-linear parser takes seconds to hours
on these inputs, so the bound separates the two by an order of magnitude or more. The slowest
linear case is the ``\boxed{}`` extractor's brace-matching pass over 10^5 braces: 34 ms quiet,
about 45 ms (best of five) on the 2-core development box at load 5 (the bound is 5x that),
where its *wall* time reached 0.104 s in one of three tries. So the tests measure the calling
thread's CPU time (`time.thread_time`: time spent descheduled on a loaded box does not
count), and a call over the bound is timed again (the best of three counts). Every call also
runs under a SIGALRM wall-clock deadline, so a regression fails in seconds instead of hanging
the suite (`re` and Python code both check for signals).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem_core
from gem_core.envs.games.base import MAX_BOX_CHARS, LanguageGame
from gem_core.grading import extract, qa

GAME_IDS = sorted(i for i in gem_core.registry if i.startswith("game:"))
BOUND_S = 0.25  # CPU seconds per call; see the module docstring for the measurement
HANG_S = 3.0  # a call still running after this is reported as a hang
N = 100_000

# Pieces of the move grammars: separators, openers, digits, spaces, braces.
PIECES = [
    " ", "  ", "\t", "\n", "\u00a0", "1", "12", "-1", "+", "-", ",", ", ", ":", "=", ".",
    "[", "]", "(", ")", "{", "}", "\\boxed{", "\\fbox{", "\\boxed ", "R", "r", "C", "c",
    "A", "b", "to", "->", "→", "x", "reveal", "up", "<answer>", "</answer>", "the",
]


@contextmanager
def _deadline(seconds: float, what: str) -> Iterator[None]:
    """Fail (not hang) when the block runs longer than ``seconds`` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expired(signum, frame):
        raise TimeoutError(f"{what}: still running after {seconds} s (super-linear parser?)")

    old = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _timed(fn: Callable[..., Any], *args: Any, what: str) -> tuple[float, Any]:
    """(best CPU seconds of up to three calls, the last result); retried only when over the bound."""
    best, result = float("inf"), None
    for _ in range(3):
        with _deadline(HANG_S, what):
            start = time.thread_time()
            try:
                result = fn(*args)
            except (ValueError, TypeError, OverflowError) as e:  # parse_move may reject by raising
                result = e
            best = min(best, time.thread_time() - start)
        if best < BOUND_S:
            break
    return best, result


def _repeat(pattern: str, n: int = N) -> str:
    return (pattern * (n // len(pattern) + 1))[:n]


def _worst_cases(n: int) -> dict[str, str]:
    """Deterministic adversarial texts of about ``n`` characters."""
    k = n // 4
    cases = {f"{p!r}*": _repeat(p, n) for p in PIECES}
    cases.update(
        {
            "int-spaces-x": "1" + " " * k + "1" + " " * k + "1" + " " * k + "x",
            "int-spaces-int": "1" + " " * k + "1" + " " * k + "1",
            "ints-commas": _repeat("1 , ", n) + "x",
            "bracket-spaces": "[" + " " * k + "1" + " " * k + "1" + " " * k + "1" + " " * k + "]x",
            "letters-spaces": "A" + " " * k + "B" + " " * k + "!",
            "letter-to-spaces": "A" + " " * k + "to" + " " * k + "B" + " " * k + ".!",
            "r-c-spaces": " " * k + "R" + " " * k + "1" + " " * k + "C" + " " * k + "1 1 x",
            "digits": "9" * n,
            "signed-digits": "-" + "9" * n,
            "words": _repeat("reveal 1 ", n),
            "opener-spaces-x": "\\boxed" + " " * n + "x",
            "opener-spaces-opener": "\\boxed" + " " * n + "\\boxed",
            "open-box-opener-spaces": "\\boxed{\\boxed" + " " * n,
            "unclosed-tags": _repeat("<answer", n) + "</answer>",
        }
    )
    return cases


def _games() -> list[LanguageGame]:
    """One reset env per registered game id."""
    out = []
    for env_id in GAME_IDS:
        env = gem_core.make(env_id)
        env.reset(seed=0)
        out.append(env)
    return out


# --- regression: the payloads of issue 12, item 7 --------------------------------------------------
_CHILD = textwrap.dedent(
    """
    import sys, time, gem_core
    env = gem_core.make(sys.argv[1])
    env.reset(seed=0)
    action = "\\\\boxed{" + sys.argv[2] + "}"
    start = time.thread_time()
    out = env.step(action)
    print(time.thread_time() - start, out[4]["format_error"])
    """
)

ISSUE_PAYLOADS = {
    # 803 characters: 307 s before (quartic backtracking over the runs of spaces).
    "game:Sudoku-v0-easy": "1" + " " * 400 + "1" + " " * 400 + "x",
    # 603 characters: 35-40 s before (adjacent \s* around each separator).
    "game:WordSearch-v0-easy": "1" + " " * 200 + "1" + " " * 200 + "1" + " " * 199 + "x",
    # At the box limit (2,000 characters): 9 s before (cubic).
    "game:Crosswords-v0-easy": "1" + " " * 999 + "1" + " " * 998 + "1",
    # At the box limit: 4.5 s before (cubic).
    "game:TowerofHanoi-v0-easy": "A" + " " * 998 + "B" + " " * 998 + "!",
}


@pytest.mark.parametrize("env_id", sorted(ISSUE_PAYLOADS))
def test_issue_payloads_step_fast_in_a_fresh_interpreter(env_id):
    box = ISSUE_PAYLOADS[env_id]
    assert len(box) <= MAX_BOX_CHARS  # the content reaches parse_move
    try:
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, env_id, box],
            capture_output=True, text=True, timeout=20,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{env_id}: env.step on a {len(box)}-character box hung for > 20 s")
    assert out.returncode == 0, out.stderr[-2000:]
    seconds, format_error = out.stdout.split()
    assert float(seconds) < 0.5, (
        f"{env_id}: env.step took {float(seconds):.2f} CPU s on a {len(box)}-character box "
        "(bound 0.5 s: one cold call in a fresh interpreter)"
    )
    assert format_error == "True", f"{env_id}: the malformed box must stay a format error"


# --- every game through env.step -------------------------------------------------------------------
@pytest.mark.parametrize("env_id", GAME_IDS)
def test_every_game_steps_adversarial_text_in_linear_time(env_id):
    env = gem_core.make(env_id, format_error="retry")
    env.reset(seed=0)
    inner = _worst_cases(MAX_BOX_CHARS - 2)  # reaches parse_move (at the box limit)
    huge = _worst_cases(N)  # caught by the extractor / the box limit
    actions = {f"box[{k}]": f"\\boxed{{{v}}}" for k, v in inner.items()}
    actions.update({f"bare[{k}]": v for k, v in huge.items()})
    actions.update({f"bigbox[{k}]": f"\\boxed{{{v}}}" for k, v in huge.items() if "boxed" not in k})
    for name, action in actions.items():
        seconds, out = _timed(env.step, action, what=f"{env_id} {name}")
        assert not isinstance(out, Exception), f"{env_id} {name}: env.step raised {out!r}"
        obs, reward, terminated, truncated, info = out
        assert isinstance(obs, str) and isinstance(reward, float) and "format_error" in info
        assert seconds < BOUND_S, f"{env_id} {name}: env.step took {seconds:.3f} CPU s"
        if terminated or truncated:
            env.reset(seed=1)


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_every_parse_move_is_linear_beyond_the_box_limit(env_id):
    # parse_move itself, not only the 2,000-character box that env.step lets through.
    env = gem_core.make(env_id)
    env.reset(seed=0)
    game = env.unwrapped
    for name, content in _worst_cases(N).items():
        seconds, _ = _timed(game.parse_move, content, what=f"{env_id} parse_move {name}")
        assert seconds < BOUND_S, f"{env_id} parse_move({name}) took {seconds:.3f} CPU s"


_TEXTS = st.builds(
    lambda parts, n, boxed: (f"\\boxed{{{_repeat(''.join(parts), n)}}}" if boxed else _repeat("".join(parts), n)),
    st.lists(st.sampled_from(PIECES), min_size=1, max_size=6),
    st.sampled_from([MAX_BOX_CHARS - 1, 20_000, N]),
    st.booleans(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXTS, which=st.sampled_from(GAME_IDS))
def test_property_games_step_and_parse_in_linear_time(text, which):
    env = gem_core.make(which, format_error="retry")
    env.reset(seed=0)
    seconds, out = _timed(env.step, text, what=f"{which} step")
    assert not isinstance(out, Exception), f"{which}: env.step raised {out!r}"
    assert seconds < BOUND_S, f"{which}: env.step took {seconds:.3f} CPU s on {len(text)} characters"
    content = text[7:-1] if text.startswith("\\boxed{") else text
    seconds, _ = _timed(env.unwrapped.parse_move, content, what=f"{which} parse_move")
    assert seconds < BOUND_S, f"{which}: parse_move took {seconds:.3f} CPU s on {len(content)} characters"


# --- the shared extractors and the QA grader -------------------------------------------------------
_EXTRACTORS: dict[str, Callable[[str], Any]] = {
    "extract_boxed": extract.extract_boxed,
    "extract_boxed(max_chars=None)": lambda t: extract.extract_boxed(t, max_chars=None),
    "boxed_span": extract.boxed_span,
    "extract_tagged_answer": extract.extract_tagged_answer,
    "tagged_span(think)": lambda t: extract.tagged_span(t, "think"),
    "qa.normalize_answer": qa.normalize_answer,
    "qa.exact_match": lambda t: qa.exact_match(t, ["the answer", t[:50]]),
    "qa.f1_score": lambda t: qa.f1_score(t, ["the answer", t[:50]]),
}


@pytest.mark.parametrize("name", sorted(_EXTRACTORS))
def test_extractors_are_linear_on_worst_cases(name):
    fn = _EXTRACTORS[name]
    for case, text in _worst_cases(N).items():
        for shaped in (text, f"\\boxed{{{text}}}", f"<answer>{text}</answer>", text + "\\boxed{1}"):
            seconds, out = _timed(fn, shaped, what=f"{name} {case}")
            assert not isinstance(out, Exception), f"{name}({case}) raised {out!r}"
            assert seconds < BOUND_S, f"{name}({case}) took {seconds:.3f} CPU s"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXTS, name=st.sampled_from(sorted(_EXTRACTORS)))
def test_property_extractors_in_linear_time(text, name):
    seconds, out = _timed(_EXTRACTORS[name], text, what=name)
    assert not isinstance(out, Exception), f"{name} raised {out!r}"
    assert seconds < BOUND_S, f"{name} took {seconds:.3f} CPU s on {len(text)} characters"
