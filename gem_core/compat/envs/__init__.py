"""Reference-GEM ``gem.envs``: the registry calls (`registration`) on gem_core's registry."""

from __future__ import annotations

from gem_core.compat.envs.registration import make, make_vec, print_envs, register

__all__ = ["make", "make_vec", "print_envs", "register", "data_names"]

data_names = [
    ("2wiki", "2Wiki"),
    ("popqa", "PopQA"),
    ("tq", "TriviaQA"),
    ("hotpotqa", "HotpotQA"),
    ("bamboogle", "Bamboogle"),
    ("nq", "NaturalQuestions"),
    ("musique", "Musique"),
]
"""(split of ``axon-rl/search-eval``, id name) of the ``eval:<name>`` QA ids."""
