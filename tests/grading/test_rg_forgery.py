"""Regression (hostile output, part 2): rg scores cannot be forged nor fall outside [0, 1].

On the datasets whose scorers evaluated the answer as Python (`CODE_EVALUATING_DATASETS`),
an answer ran inside its scoring child, found the result channel and printed its own score
line: wrong answers scored 1.0 on 9 of 9. The child now runs no answer code (literals only
for ``eval``, plain math only for ``parse_expr``), and the host refuses scores outside the
documented range.
"""

from __future__ import annotations

import pytest

import gem_core
from gem_core.grading.rg import (
    CODE_EVALUATING_DATASETS,
    EVAL_DATASETS,
    EXPRESSION_DATASETS,
    RGScorer,
)

pytest.importorskip("reasoning_gym", reason="reasoning-gym is not installed (pip install 'gem-core[reasoning]')")

# Run as code (by eval, or by sympy's parse_expr: no builtin names needed), it finds the
# scoring child's reply function, writes a perfect result line with the child's own nonce
# and exits before the real score is written. On the tree before the fix it scored 1.0 on
# all 9 datasets.
FORGED = (
    "[[Q['_reply']({'score': 'x'.__len__()}), S['_exit'](().__len__())] "
    "for N in ().__class__.__base__.__subclasses__() if N.__name__ == '_wrap_close' "
    "for S in [N.__init__.__globals__] "
    "for Q in S['__builtins__']['__import__']('gc').get_objects() "
    "if Q.__class__ is {}.__class__ and '_reply' in Q and '_nonce' in Q]"
)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(CODE_EVALUATING_DATASETS))
def test_an_answer_cannot_write_its_own_score(name):
    env = gem_core.make(f"rg:{name}")
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(f"<answer>{FORGED}</answer>")
    assert terminated and reward <= 0.1, f"rg:{name} paid {reward} for a forged score line: {info}"
    assert "scorer_error" not in info, info


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(CODE_EVALUATING_DATASETS))
def test_the_reference_answers_still_score_full_marks(name):
    env = gem_core.make(f"rg:{name}")
    for seed in range(3):
        env.reset(seed=seed)
        answer = env.unwrapped.entry["answer"]
        _, reward, _, _, info = env.step(f"<answer>{answer}</answer>")
        assert reward == pytest.approx(1.0), (name, seed, answer, info)


def test_the_two_groups_cover_the_code_evaluating_datasets():
    assert CODE_EVALUATING_DATASETS == set(EVAL_DATASETS) | set(EXPRESSION_DATASETS)
    assert not set(EVAL_DATASETS) & set(EXPRESSION_DATASETS)


@pytest.fixture(scope="module")
def scorer():
    s = RGScorer(workers=1, timeout=5)
    yield s
    s.close()


@pytest.mark.parametrize("value", ["7", "1e300", "-1e300", "-0.5", "1.5"])
def test_a_score_outside_the_range_is_a_scorer_error(scorer, value):
    import reasoning_gym

    entry = reasoning_gym.create_dataset("leg_counting", size=5, seed=1)[0]
    result = scorer.score(
        name="leg_counting", answer="1", entry=entry, size=5, seed=1, config={}, score_seed=0, build_seed=0,
        _debug_source=f"def score_answer(answer, entry):\n    return {value}",
    )  # fmt: skip
    assert result.score == 0.0 and "outside [0, 1]" in (result.error or ""), result


@pytest.mark.parametrize("value", ["1.0", "0", "0.25", "1.0000000000001"])
def test_scores_in_the_range_pass(scorer, value):
    import reasoning_gym

    entry = reasoning_gym.create_dataset("leg_counting", size=5, seed=1)[0]
    result = scorer.score(
        name="leg_counting", answer="1", entry=entry, size=5, seed=1, config={}, score_seed=0, build_seed=0,
        _debug_source=f"def score_answer(answer, entry):\n    return {value}",
    )  # fmt: skip
    assert result.error is None and 0.0 <= result.score <= 1.0 and result.score == pytest.approx(float(value))
