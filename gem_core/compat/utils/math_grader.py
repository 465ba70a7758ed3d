"""Reference ``gem.utils.math_grader``: not ported (the reference's hand-written sympy grader; gem_core grades with math-verify in worker processes).

Every public name imports; using one raises `NotPorted`, naming gem_core.grading.math.MathGrader (get_grader().grade(answer, reference)) and gem_core.grading.extract.extract_boxed.
"""

from __future__ import annotations

import logging

from gem_core.compat._not_ported import missing_values, placeholders

_WHY = "the reference's hand-written sympy grader; gem_core grades with math-verify in worker processes"
_INSTEAD = 'gem_core.grading.math.MathGrader (get_grader().grade(answer, reference)) and gem_core.grading.extract.extract_boxed'

__all__ = ['TimeoutException', 'answer_tag_reward_fn', 'answer_tag_reward_fn_for_orz', 'are_equal_under_sympy', 'boxed_reward_fn', 'count_unknown_letters_in_expr', 'extract_answer', 'extract_boxed_answer', 'grade', 'grade_answer_mathd', 'grade_answer_sympy', 'is_latex_equal', 'is_value_equal', 'last_boxed_only_string', 'latex_eval', 'mathd_normalize_answer', 'normalize_final_answer', 'numeric_equal', 'r1_distill_qwen_math_reward_fn', 'remove_boxed', 'repeatness', 'run_with_timeout_signal', 'should_allow_eval', 'split_tuple', 'symbolic_equal', 'timeout', 'logger']

logger = logging.getLogger(__name__)

(TimeoutException, answer_tag_reward_fn, answer_tag_reward_fn_for_orz, are_equal_under_sympy, boxed_reward_fn, count_unknown_letters_in_expr, extract_answer, extract_boxed_answer, grade, grade_answer_mathd, grade_answer_sympy, is_latex_equal, is_value_equal, last_boxed_only_string, latex_eval, mathd_normalize_answer, normalize_final_answer, numeric_equal, r1_distill_qwen_math_reward_fn, remove_boxed, repeatness, run_with_timeout_signal, should_allow_eval, split_tuple, symbolic_equal, timeout) = placeholders(
    __name__, ('TimeoutException', 'answer_tag_reward_fn', 'answer_tag_reward_fn_for_orz', 'are_equal_under_sympy', 'boxed_reward_fn', 'count_unknown_letters_in_expr', 'extract_answer', 'extract_boxed_answer', 'grade', 'grade_answer_mathd', 'grade_answer_sympy', 'is_latex_equal', 'is_value_equal', 'last_boxed_only_string', 'latex_eval', 'mathd_normalize_answer', 'normalize_final_answer', 'numeric_equal', 'r1_distill_qwen_math_reward_fn', 'remove_boxed', 'repeatness', 'run_with_timeout_signal', 'should_allow_eval', 'split_tuple', 'symbolic_equal', 'timeout'), instead=_INSTEAD, why=_WHY
)
__getattr__ = missing_values(__name__, ('BAD_REGEXES', 'BAD_SUBSTRINGS', 'REMOVED_EXPRESSIONS', 'SUBSTITUTIONS', 'TUPLE_CHARS', 'unit_texts'), instead=_INSTEAD, why=_WHY)
