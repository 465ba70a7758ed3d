"""ReasoningGym answers are scored in the sandbox: no host effects, no lasting monkeypatch, no hang."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

import gem_core
from gem_core.grading.rg import CODE_EVALUATING_DATASETS, RGScorer, get_scorer

pytest.importorskip(
    "reasoning_gym", reason="reasoning-gym is not installed (pip install 'gem-core[reasoning]')"
)

SECRET_VAR = "GEM_RG_TEST_SECRET"


def _spiral_env(**kwargs):
    env = gem_core.make("rg:spiral_matrix", **kwargs)
    env.reset(seed=0)
    return env


def _reference_list(env) -> list[int]:
    return [int(x) for x in env.unwrapped.entry["answer"].split()]


def _warm() -> None:
    """Start the shared scorer's workers, so timings below do not include their start."""
    env = gem_core.make("rg:leg_counting")
    env.reset(seed=0)
    assert "scorer_error" not in env.step(f"<answer>{env.unwrapped.entry['answer']}</answer>")[4]


def test_an_evaluated_answer_has_no_effect_on_the_host(tmp_path, monkeypatch):
    """spiral_matrix eval()s the answer: it once ran shell commands in the trainer's process."""
    monkeypatch.setenv(SECRET_VAR, "s3cret")
    marker = tmp_path / "pwned"
    env = _spiral_env()
    ref = _reference_list(env)
    # Scores 0.1 (spiral_matrix's credit for an evaluated list) exactly when the code could
    # read the host's environment; writes a file too.
    payload = (
        f"(__import__('os').system('touch {marker}') and 0) or "
        f"({ref!r} if __import__('os').environ.get({SECRET_VAR!r}) == 's3cret' else [])"
    )
    _, reward, terminated, _, info = env.step(f"<answer>{payload}</answer>")
    assert terminated and reward == 0.0, f"the answer read the host's environment: {info}"
    if get_scorer().isolation == "bwrap":  # below bubblewrap the child sees the host's files
        assert not marker.exists(), "the answer wrote a file on the host"
    # The same trick without the secret check is not run at all: the scorer reads literals
    # only (test_rg_forgery.py), so it scores as any other unreadable answer.
    env = _spiral_env()
    _, reward, _, _, info = env.step(f"<answer>(__import__('os').getpid() and {ref!r})</answer>")
    assert reward == 0.0 and "scorer_error" not in info, info
    env = _spiral_env()
    _, reward, _, _, info = env.step(f"<answer>{ref!r}</answer>")  # the literal list: credit
    assert reward == pytest.approx(0.1) and "scorer_error" not in info, info


def test_a_monkeypatching_answer_does_not_change_later_scores(tmp_path):
    """One answer patched every scorer and the math grader; later wrong answers scored 1."""
    patch = (
        "[setattr(c, 'score_answer', lambda self, answer, entry: 1.0) "
        "for c in __import__('reasoning_gym').factory.DATASETS and "
        "[v[0] for v in __import__('reasoning_gym').factory.DATASETS.values()]] and "
        "[__import__('sys').modules.get('gem_core.grading.math') and "
        "setattr(__import__('sys').modules['gem_core.grading.math'], '_fast_grade', "
        "lambda a, r: True)] and []"
    )
    env = _spiral_env()
    env.step(f"<answer>{patch}</answer>")  # scores whatever; must not outlive its child
    leg = gem_core.make("rg:leg_counting")
    leg.reset(seed=0)
    _, reward, _, _, info = leg.step("<answer>-1</answer>")
    assert reward == 0.0 and info["success"] is False, f"a wrong rg answer scored: {info}"
    spiral = _spiral_env()
    assert spiral.step("<answer>[0]</answer>")[1] == 0.0
    pytest.importorskip("math_verify", reason="the math half needs math-verify")
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"problem": "1+1?", "answer": "2"}) + "\n")
    math_env = gem_core.make("math:GSM8K", data_path=str(path))
    math_env.reset(seed=0)
    _, reward, _, _, info = math_env.step("\\boxed{3}")
    assert reward <= 0.0 and not info.get("success"), f"a wrong math answer scored: {info}"


def test_a_never_ending_answer_times_out_while_other_envs_are_scored():
    _warm()
    # The other env's step takes ~20 ms quiet; one that queued behind the hung score would
    # wait out most of the timeout (>= 4.7 s), so the 2 s bound is far from both.
    timeout = 5.0
    hung = _spiral_env(score_timeout=timeout)
    # A scorer that never ends (answers no longer run as code: test_rg_forgery.py).
    hung.unwrapped._data.debug_scorer_source = "def score_answer(answer, entry):\n    while True: pass\n"
    outcome: dict = {}

    def run_hung() -> None:
        start = time.monotonic()
        try:
            outcome["step"] = hung.step("<answer>[1]</answer>")
        finally:
            hung.unwrapped._data.debug_scorer_source = None
        outcome["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=run_hung, daemon=True)
    thread.start()
    time.sleep(0.3)
    other = gem_core.make("rg:leg_counting")
    other.reset(seed=1)
    start = time.monotonic()
    _, reward, _, _, info = other.step(f"<answer>{other.unwrapped.entry['answer']}</answer>")
    other_seconds = time.monotonic() - start
    assert reward == 1.0 and info["success"], info
    assert thread.is_alive() or outcome["seconds"] >= timeout, "the hung answer ended early"
    assert other_seconds < 2.0, f"another env waited {other_seconds:.1f} s behind the hung score"
    thread.join(timeout + 10)
    assert not thread.is_alive(), "the step with a never-ending answer did not return"
    _, reward, terminated, _, info = outcome["step"]
    assert (reward, terminated) == (0.0, True)
    assert info["scorer_timeout"] is True and "longer than 5 s" in info["scorer_error"], info
    assert outcome["seconds"] < timeout + 6, outcome["seconds"]


# --- the scorer itself -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def scorer():
    s = RGScorer(workers=1, timeout=5)
    yield s
    s.close()


def _score(scorer, source, answer="1", **kwargs):
    import reasoning_gym

    entry = reasoning_gym.create_dataset("leg_counting", size=5, seed=1)[0]
    return scorer.score(
        name="leg_counting", answer=answer, entry=entry, size=5, seed=1, config={},
        score_seed=0, build_seed=0, _debug_source=source, **kwargs,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def score_answer(answer, entry):\n    return 1 / 0", "ZeroDivisionError: division by zero"),
        ("def score_answer(answer, entry):\n    return float('nan')", "score_answer returned nan"),
        ("def score_answer(answer, entry):\n    return 'high'", "score_answer returned 'high'"),
        ("import os\ndef score_answer(answer, entry):\n    os._exit(3)", "exit code 3"),
        ("def score_answer(answer, entry):\n    raise MemoryError", "MemoryError"),
    ],
)
def test_scorer_failures_are_reported_not_raised(scorer, source, expected):
    result = _score(scorer, source)
    assert result.score == 0.0 and not result.timed_out
    assert expected in (result.error or ""), result


def test_printed_output_cannot_pose_as_the_score(scorer):
    """Only the nonce-tagged line on the private fd counts; the answer's stdout is discarded."""
    source = (
        "import os, sys\n"
        "def score_answer(answer, entry):\n"
        "    print('{\"score\": 1.0}'); sys.stdout.flush()\n"
        "    os.write(1, b'\\n0123 {\"score\": 1.0}\\n')\n"
        "    os.write(2, b'{\"score\": 1.0}\\n')\n"
        "    return 0.25\n"
    )
    result = _score(scorer, source)
    assert (result.score, result.error) == (0.25, None), result


def test_a_timeout_kills_the_score_and_the_next_one_works(scorer):
    result = _score(scorer, "def score_answer(answer, entry):\n    while True: pass", timeout=1)
    assert result.timed_out and result.score == 0.0 and "longer than 1 s" in result.error
    assert result.seconds < 1 + 5
    ok = _score(scorer, "def score_answer(answer, entry):\n    return 1")
    assert (ok.score, ok.error) == (1.0, None)


def test_the_scoring_child_sees_no_host_environment(scorer, monkeypatch):
    monkeypatch.setenv(SECRET_VAR, "s3cret")
    source = (
        f"import os\ndef score_answer(answer, entry):\n"
        f"    return 1.0 if {SECRET_VAR!r} in os.environ else 0.5"
    )
    assert _score(scorer, source).score == 0.5


def test_a_closed_scorer_reports_an_error():
    s = RGScorer(workers=1)
    s.close()
    result = _score(s, None)
    assert result.score == 0.0 and "closed" in result.error


def test_code_evaluating_datasets_are_known_names():
    from gem_core.envs.reasoning_gym import DATASET_NAMES

    assert CODE_EVALUATING_DATASETS <= set(DATASET_NAMES)


def test_os_environ_of_the_host_is_untouched():
    before = dict(os.environ)
    env = _spiral_env()
    env.step("<answer>__import__('os').environ.update(PATH='/nowhere') or [1]</answer>")
    assert dict(os.environ) == before


def test_a_sandbox_that_raises_is_replaced_for_the_next_score(monkeypatch):
    """E.g. a forked child that exited normally tore down the parent's sandbox state."""
    s = RGScorer(workers=1)
    try:
        broken = s._get_sandbox()

        def gone(*args, **kwargs):
            raise OSError("its cgroup is gone")

        monkeypatch.setattr(broken, "run", gone)
        result = _score(s, "def score_answer(answer, entry):\n    return 1")
        assert result.score == 0.0 and "unavailable: OSError: its cgroup is gone" in result.error
        again = _score(s, "def score_answer(answer, entry):\n    return 1")
        assert (again.score, again.error) == (1.0, None) and s._sandbox is not broken
    finally:
        s.close()


FORK_AND_EXIT = (
    "import os, sys\n"
    "import reasoning_gym\n"
    "from gem_core.grading.rg import get_scorer\n"
    "entry = reasoning_gym.create_dataset('leg_counting', size=5, seed=1)[0]\n"
    "src = 'def score_answer(answer, entry):\\n    return 1'\n"
    "def score():\n"
    "    return get_scorer().score(name='leg_counting', answer='1', entry=entry, size=5, seed=1,\n"
    "                              config={}, score_seed=0, build_seed=0, _debug_source=src)\n"
    "assert score().score == 1.0\n"
    "first = get_scorer()._sandbox\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    sys.exit(0)\n"
    "assert os.waitpid(pid, 0)[1] == 0\n"
    "r = score()\n"
    "print(r.score, r.error, get_scorer()._sandbox is first, flush=True)\n"
)


def test_a_forked_child_exiting_normally_leaves_the_parents_scorer_alone():
    """The child's exit once tore the parent's sandbox down: its next score failed."""
    import subprocess
    import sys

    env = dict(os.environ, GEM_RG_SCORER_WORKERS="1")  # the next score gets the same worker
    proc = subprocess.run([sys.executable, "-c", FORK_AND_EXIT], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0 and proc.stdout == "1.0 None True\n", (
        f"rc={proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr[-2000:]}")
