"""Reference-GEM ``gem.envs``: the registry calls (`registration`) on gem_core's registry."""

from __future__ import annotations

from gem_core.compat.envs.registration import make, make_vec, print_envs, register

__all__ = ["make", "make_vec", "print_envs", "register"]
