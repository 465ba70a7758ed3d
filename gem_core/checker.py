"""Env conformance: `check_env` and its named checks.

The passive checker `make` applies lives with the wrappers
(`gem_core.wrappers.common.PassiveEnvChecker`, re-exported here), and so do the return-shape
checks both of them apply.
"""

from __future__ import annotations

import difflib
import math
import random
import sys
import warnings
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from gem_core.core import Env, find_layer, iter_layers
from gem_core.errors import (
    DependencyNotInstalled,
    EnvCheckError,
    InvalidArgument,
    ResetNeeded,
    check_positive_int,
)
from gem_core.wrappers.common import (
    OrderEnforcing,
    PassiveEnvChecker,
    TimeLimit,
    check_reset_return,
    check_step_return,
    reset_return_problem,
    step_return_problem,
)
from gem_core.wrappers.common import short_repr as _short

__all__ = [
    "check_env",
    "CHECKS",
    "BAD_ACTIONS",
    "FALLBACK_ACTIONS",
    "DEFAULT_MAX_STEPS",
    "check_reset_types",
    "check_step_types",
    "check_done_flags",
    "check_global_rng_untouched",
    "check_reset_determinism",
    "check_trajectory_determinism",
    "check_seed_variation",
    "check_success_flag",
    "check_step_after_end",
    "check_bad_actions",
    "check_close_twice",
    "PassiveEnvChecker",
    "check_reset_return",
    "check_step_return",
]


# =====================================================================================
# check_env: small named checks. Each takes (env, *, seed, max_steps), raises
# EnvCheckError naming itself and the likely bug, and returns soft notes (str).
# =====================================================================================

DEFAULT_MAX_STEPS = 32
"""Cap on the steps of one episode in the checks that roll episodes out."""

FALLBACK_ACTIONS: tuple[str, ...] = (
    "hello",
    "1",
    "a",
    "yes",
    "42",
    "<answer>1</answer>",
    "\\boxed{1}",
    "go north",
)
"""The fixed action script used when an env does not implement `sample_random_action`."""

_ONE_MB = 1 << 20

BAD_ACTIONS: tuple[tuple[str, Any], ...] = (
    ("an empty string", ""),
    ("whitespace only", " \t\n \r\n"),
    ("1 MB of words", "lorem " * (_ONE_MB // 6)),
    ("1 MB of digits", "9" * _ONE_MB),
    ("1 MB of newlines", "\n" * _ONE_MB),
    ("None", None),
    ("the int 123", 123),
    ("a float nan", float("nan")),
    ("the bool True", True),
    ("an empty list", []),
    ("an empty dict", {}),
    ("a list of strings", ["a", "b"]),
    ("a chat-message dict", {"role": "assistant", "content": "hi"}),
    ("bytes", b"bytes"),
    ("lone surrogates", "\ud800 abc \udfff"),
    ("a right-to-left override", "\u202eevil\u202c 1"),
    ("zero-width characters", "\u200b\u200c\u200d\u2060\ufeff"),
    (
        "emoji with joiners",
        "\U0001f469\u200d\U0001f469\u200d\U0001f467 \U0001f525\U0001f916\U0001f44d\U0001f3fd",
    ),
    ("500 combining marks", "e" + "\u0301" * 500),
    ("NUL and control characters", "\x00\x01\x1b[31mred\x1b[0m\x7f\x00"),
    (
        "mixed scripts",
        "\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd \u4f60\u597d \u041f\u0440\u0438\u0432\u0435\u0442",
    ),
    ("fullwidth digits", "\uff11\uff12\uff13"),
    ("unbalanced tags", '<answer><python>```\\boxed{ <tool_call>{"name": '),
)
"""(label, action) pairs that `check_bad_actions` sends to a live episode."""

_INVALID_STREAK: tuple[str, ...] = ("", "???", "\x00", "<answer>", "not an action at all")
_INVALID_STREAK_LEN = 50


@dataclass
class _Run:
    """One rolled-out episode: the first observation and, per step, the result."""

    obs0: Any
    actions: list[Any] = field(default_factory=list)
    steps: list[tuple[Any, Any, bool, bool, dict[str, Any]]] = field(default_factory=list)
    used_fallback: bool = False

    @property
    def ended(self) -> bool:
        return bool(self.steps) and bool(self.steps[-1][2] or self.steps[-1][3])


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(value: Any) -> str:
    """``int`` for builtins, ``numpy.bool`` for others: what a message should show."""
    cls = type(value)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _fail(check: str, message: str) -> NoReturn:
    raise EnvCheckError(message, check=check)


def _call(
    check: str, env: Env, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    """Call ``fn``; an exception becomes an `EnvCheckError` naming the check and the call.

    `DependencyNotInstalled` passes through unchanged (a test suite skips on it).
    """
    try:
        return fn(*args, **kwargs)
    except (DependencyNotInstalled, EnvCheckError):
        raise
    except Exception as e:
        raise EnvCheckError(
            f"{env}.{what} raised {type(e).__name__}: {_clip(str(e))}", check=check
        ) from e


def _reset(check: str, env: Env, seed: int | None) -> tuple[Any, dict[str, Any]]:
    result = _call(check, env, f"reset(seed={seed!r})", env.reset, seed=seed)
    problem = reset_return_problem(env, result)
    if problem is not None:
        _fail(check, problem)
    return result


def _step(check: str, env: Env, action: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
    result = _call(check, env, f"step({_short(action, 40)})", env.step, action)
    _check_step_shape(check, env, action, result)
    return result


def _check_step_shape(check: str, env: Env, action: Any, result: Any) -> None:
    problem = step_return_problem(env, action, result)
    if problem is not None:
        _fail(check, problem)


def _sample(check: str, env: Env, run: _Run, index: int) -> Any:
    """The script's action ``index``: the env's own sampler, or the fixed fallback list."""
    if not run.used_fallback:
        try:
            return env.sample_random_action()
        except NotImplementedError:
            run.used_fallback = True
        except (DependencyNotInstalled, EnvCheckError):
            raise
        except Exception as e:
            raise EnvCheckError(
                f"{env}.sample_random_action() raised {type(e).__name__}: {_clip(str(e))}. It must return "
                "a well-formed action (or raise NotImplementedError when the env has none).",
                check=check,
            ) from e
    return FALLBACK_ACTIONS[index % len(FALLBACK_ACTIONS)]


def _rollout(
    check: str,
    env: Env,
    seed: int | None,
    max_steps: int,
    actions: Sequence[Any] | None = None,
    on_step: Callable[[int, tuple[Any, Any, Any, Any, dict[str, Any]]], None] | None = None,
) -> _Run:
    """Reset with ``seed`` and step until the episode ends or ``max_steps``.

    Actions come from ``actions`` when given (the rollout stops when they run out),
    else from the env's `sample_random_action` (or `FALLBACK_ACTIONS`).
    """
    obs, _ = _reset(check, env, seed)
    run = _Run(obs0=obs)
    for i in range(max_steps):
        if actions is None:
            action = _sample(check, env, run, i)
        elif i < len(actions):
            action = actions[i]
        else:
            break
        result = _step(check, env, action)
        if on_step is not None:
            on_step(i, result)
        run.actions.append(action)
        run.steps.append(result)
        if result[2] or result[3]:  # a truthy non-bool flag also ends it (check_done_flags fails)
            break
    return run


def _same(a: Any, b: Any) -> bool:
    """Structural equality that copes with NaN, numpy arrays and odd ``__eq__``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if "numpy" in sys.modules:
        import numpy as np

        if isinstance(a, np.ndarray):
            return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    try:
        equal = a == b
        return bool(equal)
    except Exception:
        return _short(a, 10_000) == _short(b, 10_000)


def _fingerprint(run: _Run) -> tuple[Any, ...]:
    return (run.obs0, tuple((o, r, te, tr) for o, r, te, tr, _ in run.steps))


_SEEDING_HINT = (
    "Likely bug: the env draws from an unseeded source (the global random/numpy "
    "module, time, os.urandom, or a generator created in __init__) instead of "
    "self.rng / self.np_random, or reset() does not call super().reset(seed=seed) first."
)


def check_reset_types(env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS) -> list[str]:
    """``reset`` accepts ``seed``/``options`` keywords and returns ``(observation, info: dict)``.

    A ``None`` observation fails; an observation that is not text (nor a dict or a chat
    list) is a soft note.
    """
    name = "check_reset_types"
    obs, _ = _reset(name, env, seed)
    if obs is None:
        _fail(
            name,
            f"{env}.reset() returned observation None; expected text. Likely bug: reset() "
            "returns the result of super().reset(...) instead of building its observation.",
        )
    result = _call(name, env, "reset(seed=..., options={})", env.reset, seed=seed, options={})
    problem = reset_return_problem(env, result)
    if problem is not None:
        _fail(name, f"with options={{}}: {problem}")
    notes = []
    if not isinstance(obs, (str, dict, list)):
        notes.append(
            f"{name}: the observation has type {_type_name(obs)}; gem_core envs return text "
            "(or a dict with text and images)"
        )
    return notes


def check_step_types(env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS) -> list[str]:
    """Every ``step`` of an episode returns the 5-tuple with a finite numeric reward.

    A bool reward fails (``True`` is not a reward), as do NaN/inf rewards and a
    ``None`` observation.
    """
    name = "check_step_types"

    def on_step(i: int, result: tuple[Any, Any, Any, Any, dict[str, Any]]) -> None:
        obs, reward = result[0], result[1]
        if obs is None:
            _fail(name, f"{env}.step() returned observation None at step {i + 1}; expected text.")
        if isinstance(reward, bool) or not _is_real(reward):
            _fail(
                name,
                f"{env}.step() returned reward {_short(reward)} ({_type_name(reward)}) at step "
                f"{i + 1}; expected a float. Likely bug: returning a bool/None/str as the reward.",
            )
        if not math.isfinite(float(reward)):
            _fail(
                name,
                f"{env}.step() returned reward {reward!r} at step {i + 1}; expected a finite float. "
                "Likely bug: a division by zero or log(0) in the reward.",
            )

    _rollout(name, env, seed, max_steps, on_step=on_step)
    return []


def _is_real(value: Any) -> bool:
    if isinstance(value, (int, float)):
        return True
    if "numpy" in sys.modules:
        import numpy as np

        return isinstance(value, (np.integer, np.floating))
    return False


def check_done_flags(env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS) -> list[str]:
    """``terminated`` and ``truncated`` are Python bools on every step."""
    name = "check_done_flags"

    def on_step(i: int, result: tuple[Any, Any, Any, Any, dict[str, Any]]) -> None:
        for flag_name, flag in (("terminated", result[2]), ("truncated", result[3])):
            if type(flag) is not bool:
                _fail(
                    name,
                    f"{env}.step() returned {flag_name}={_short(flag)} ({_type_name(flag)}) at "
                    f"step {i + 1}; expected a Python bool. Likely bug: returning an int, None or "
                    "numpy.bool_ (wrap it in bool(...)), or a merged 'done' flag.",
                )

    _rollout(name, env, seed, max_steps, on_step=on_step)
    return []


def _global_rng_state() -> tuple[Any, Any]:
    np_state = None
    if "numpy" in sys.modules:
        import numpy as np

        np_state = np.random.get_state(legacy=True)
    return random.getstate(), np_state


def _same_global_rng(before: tuple[Any, Any], after: tuple[Any, Any]) -> tuple[bool, bool]:
    """(python state unchanged, numpy state unchanged)."""
    py_same = before[0] == after[0]
    np_same = True
    if before[1] is not None and after[1] is not None:
        import numpy as np

        b, a = before[1], after[1]
        np_same = b[0] == a[0] and bool(np.array_equal(b[1], a[1])) and tuple(b[2:]) == tuple(a[2:])
    return py_same, np_same


def check_global_rng_untouched(
    env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS
) -> list[str]:
    """``reset``, ``step`` and ``sample_random_action`` leave the global RNGs alone.

    Compares the state of the module-level `random` generator (and numpy's legacy
    global generator, when numpy is imported) before and after each call.
    """
    name = "check_global_rng_untouched"

    def watched(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        before = _global_rng_state()
        result = fn(*args, **kwargs)
        py_same, np_same = _same_global_rng(before, _global_rng_state())
        if not py_same:
            _fail(
                name,
                f"{env}.{what} changed the global `random` state. Likely bug: it calls "
                "random.random/choice/randint/shuffle (the module functions) instead of self.rng; "
                "this breaks seeding for every other env in the process.",
            )
        if not np_same:
            _fail(
                name,
                f"{env}.{what} changed the global numpy random state. Likely bug: it calls "
                "np.random.* (the module functions) instead of self.np_random.",
            )
        return result

    class _Watched:
        """Routes the rollout's calls through ``watched``."""

        def __str__(self) -> str:
            return str(env)

        def reset(self, **kw: Any) -> Any:
            return watched(f"reset(seed={kw.get('seed')!r})", env.reset, **kw)

        def step(self, action: Any) -> Any:
            return watched(f"step({_short(action, 40)})", env.step, action)

        def sample_random_action(self) -> Any:
            return watched("sample_random_action()", env.sample_random_action)

    proxy: Any = _Watched()
    _rollout(name, proxy, seed, max_steps)
    _reset(name, proxy, None)
    return []


def check_reset_determinism(
    env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS
) -> list[str]:
    """``reset(seed=s)`` twice gives the same observation, and so does the unseeded reset after it."""
    name = "check_reset_determinism"
    first, _ = _reset(name, env, seed)
    first_next, _ = _reset(name, env, None)
    second, _ = _reset(name, env, seed)
    second_next, _ = _reset(name, env, None)
    if not _same(first, second):
        _fail(
            name,
            f"{env}.reset(seed={seed}) gave two different observations: {_short(first)} then "
            f"{_short(second)}. {_SEEDING_HINT}",
        )
    if not _same(first_next, second_next):
        _fail(
            name,
            f"after reset(seed={seed}), the next reset() without a seed gave {_short(first_next)} "
            f"in one run and {_short(second_next)} in another. Likely bug: the env re-seeds from "
            "OS entropy when seed is None; let super().reset(seed=None) keep self.rng going.",
        )
    return []


def check_trajectory_determinism(
    env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS
) -> list[str]:
    """The same seed and the same action script give the same episode, step by step.

    The script comes from the env's `sample_random_action` (drawn after the seeded
    reset, so it is itself reproducible), or from `FALLBACK_ACTIONS`.
    """
    name = "check_trajectory_determinism"
    first = _rollout(name, env, seed, max_steps)
    _reset(name, env, seed)
    replay = _Run(obs0=None, used_fallback=first.used_fallback)
    for i, (action, expected) in enumerate(zip(first.actions, first.steps, strict=True)):
        again = _sample(name, env, replay, i)
        if not _same(again, action):
            _fail(
                name,
                f"{env}.sample_random_action() gave {_short(action)} and then {_short(again)} as "
                f"action {i + 1} after the same reset(seed={seed}). Likely bug: it draws from the "
                "global random module or another unseeded source instead of self.rng.",
            )
        got = _step(name, env, action)
        for label, a, b in (
            ("observation", expected[0], got[0]),
            ("reward", expected[1], got[1]),
            ("terminated", expected[2], got[2]),
            ("truncated", expected[3], got[3]),
            ("info['success']", expected[4].get("success"), got[4].get("success")),
        ):
            if not _same(a, b):
                _fail(
                    name,
                    f"the same seed ({seed}) and actions gave a different {label} at step {i + 1}: "
                    f"{_short(a)} vs {_short(b)}. {_SEEDING_HINT} Or state from the previous "
                    "episode is not cleared in reset().",
                )
    notes = []
    if first.used_fallback:
        notes.append(
            f"{name}: {type(env.unwrapped).__name__} does not implement sample_random_action(); "
            "the fixed FALLBACK_ACTIONS script was used"
        )
    return notes


def check_seed_variation(
    env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS
) -> list[str]:
    """Different seeds give different episodes, for an env whose episodes are random.

    An episode is compared by its first observation and its steps under one fixed action
    script (recorded once, then replayed), so randomness hidden from the first observation
    (a secret number) counts too. When 5 seeds give identical episodes the env is treated
    as not random and the check is skipped (a soft note) — unless unseeded resets do give
    different episodes, which means the seed is ignored: that fails.
    """
    name = "check_seed_variation"
    steps = min(max_steps, 8)
    script = _rollout(name, env, seed, steps).actions
    base = _fingerprint(_rollout(name, env, seed, steps, actions=script))

    def differs(seeds: Sequence[int]) -> bool:
        return any(
            not _same(_fingerprint(_rollout(name, env, s, steps, actions=script)), base)
            for s in seeds
        )

    if differs(range(seed + 1, seed + 5)):
        return []
    _reset(name, env, seed)
    unseeded = [_fingerprint(_rollout(name, env, None, steps, actions=script)) for _ in range(4)]
    if all(_same(fp, base) for fp in unseeded):
        return [
            f"{name}: 5 seeds and 4 unseeded resets gave identical episodes; the env is treated "
            "as not random and the check was skipped"
        ]
    if differs(range(seed + 5, seed + 25)):  # rare: a small pool of episodes
        return []
    _fail(
        name,
        f"{env}: seeds {seed}..{seed + 24} all gave the same episode (first observation "
        f"{_short(base[0])}), yet unseeded resets vary. Likely bug: the seed is ignored — reset() "
        "does not call super().reset(seed=seed), or draws from its own generator instead of "
        "self.rng / self.np_random.",
    )


def check_success_flag(env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS) -> list[str]:
    """``info["success"]`` is a bool whenever present, and present when an episode terminates.

    Plays 3 episodes of the action script (seeds ``seed``, ``seed + 1``, ``seed + 2``) and
    one of invalid actions (which many envs end with a format error), checking every
    step. When none of them terminates (only truncations, or no end within
    ``max_steps``) the final-step part is a soft note.
    """
    name = "check_success_flag"

    def on_step(i: int, result: tuple[Any, Any, Any, Any, dict[str, Any]]) -> None:
        info = result[4]
        if "success" in info and type(info["success"]) is not bool:
            _fail(
                name,
                f"{env}.step() set info['success']={_short(info['success'])} "
                f"({_type_name(info['success'])}) at step {i + 1}; expected a Python bool.",
            )
        if result[2] is True and "success" not in info:
            _fail(
                name,
                f"{env} terminated an episode at step {i + 1} without info['success']. Likely "
                "bug: step() does not set info['success'] (did the agent solve the task?) on "
                "the final step; it must be set, never inferred from the reward.",
            )

    terminated = False
    for episode in range(3):
        run = _rollout(name, env, seed + episode, max_steps, on_step=on_step)
        terminated = terminated or (bool(run.steps) and run.steps[-1][2] is True)
    _reset(name, env, seed + 3)
    for i in range(max_steps):
        action = _INVALID_STREAK[i % len(_INVALID_STREAK)]
        try:
            result = env.step(action)
        except DependencyNotInstalled:
            raise
        except Exception:
            break  # raising on a bad action is check_bad_actions' finding, not this one's
        _check_step_shape(name, env, action, result)
        on_step(i, result)
        if result[2] or result[3]:
            terminated = terminated or result[2] is True
            break
    if terminated:
        return []
    return [
        f"{name}: no episode terminated in 4 episodes of up to {max_steps} steps (3 scripted, "
        "1 of invalid actions), so the final-step info['success'] was not seen"
    ]


_TURN_LIMIT_CAP = 500


def _turn_limit(env: Env) -> int | None:
    """The smallest ``max_turns`` of a `TimeLimit` layer in the stack, if any."""
    limits = [layer.max_turns for layer in iter_layers(env) if isinstance(layer, TimeLimit)]
    return min(limits) if limits else None


def _enforces_order(env: Env) -> bool:
    if find_layer(env, OrderEnforcing) is not None:
        return True
    spec = env.spec
    return spec is not None and not spec.order_enforce


def check_step_after_end(
    env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS
) -> list[str]:
    """``step`` after the episode ended raises `ResetNeeded`.

    Checked when the stack enforces it: it has an `OrderEnforcing` layer (every env built
    by `gem_core.make`), or its spec sets ``order_enforce=False`` (the env claims to enforce
    it itself). A bare env is skipped with a soft note: wrap it in `OrderEnforcing`, or
    build it with `gem_core.make`. Episodes are played up to ``max_steps`` or, when the
    stack has a `TimeLimit`, up to its ``max_turns`` (at most 500), to reach an end.
    """
    name = "check_step_after_end"
    if not _enforces_order(env):
        return [
            f"{name}: {env} has no OrderEnforcing layer (not built by gem_core.make); "
            "step-after-end enforcement was not checked"
        ]
    # Play long enough to reach the turn limit when there is one (up to 500 turns).
    cap = max(max_steps, min(_turn_limit(env) or 0, _TURN_LIMIT_CAP))
    for episode in range(3):
        run = _rollout(name, env, seed + episode, cap)
        if run.ended:
            break
    else:
        return [
            f"{name}: no episode ended in 3 episodes of up to {cap} scripted steps; "
            "step-after-end enforcement was not checked"
        ]
    action = run.actions[-1]
    try:
        result = env.step(action)
    except ResetNeeded:
        return []
    except DependencyNotInstalled:
        raise
    except Exception as e:
        raise EnvCheckError(
            f"{env}.step() after the episode ended raised {type(e).__name__}: {_clip(str(e))}; expected "
            "gem_core.errors.ResetNeeded.",
            check=name,
        ) from e
    reward = result[1] if isinstance(result, tuple) and len(result) > 1 else result
    _fail(
        name,
        f"{env}.step() after the episode ended returned (reward {_short(reward)}) instead of "
        "raising gem_core.errors.ResetNeeded. Likely bug: the stack has no working "
        "OrderEnforcing layer, so a finished episode keeps paying rewards.",
    )


def check_bad_actions(env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS) -> list[str]:
    """Bad actions never raise from ``step`` on a live episode.

    Sends each of `BAD_ACTIONS` (empty, 1 MB, non-str, unicode junk) and then 50 invalid
    actions in a row; an action may end the episode, after which the env is reset and the
    next bad action goes to the new episode.
    """
    name = "check_bad_actions"
    _reset(name, env, seed)
    streak = [
        (
            f"invalid action {i + 1} of {_INVALID_STREAK_LEN} in a row",
            _INVALID_STREAK[i % len(_INVALID_STREAK)],
        )
        for i in range(_INVALID_STREAK_LEN)
    ]
    for label, action in (*BAD_ACTIONS, *streak):
        try:
            result = env.step(action)
        except DependencyNotInstalled:
            raise
        except Exception as e:
            raise EnvCheckError(
                f"{env}.step() raised {type(e).__name__}: {_clip(str(e))} on {label} "
                f"({_short(action, 40)}) during a live episode. Likely bug: step() assumes a "
                "well-formed str action; a bad action must give a penalty and an observation "
                "(set info['format_error'] / info['invalid_action']), never an exception.",
                check=name,
            ) from e
        _check_step_shape(name, env, action, result)
        if result[2] or result[3]:
            _reset(name, env, None)
    return []


def check_close_twice(env: Env, *, seed: int = 0, max_steps: int = DEFAULT_MAX_STEPS) -> list[str]:
    """``close()`` twice is safe, on the given env and on each layer under it.

    Leaves the env closed. Since `OrderEnforcing` ignores a second close, every inner
    layer (down to the bare env) is also closed once more, directly.
    """
    name = "check_close_twice"
    for attempt in ("first", "second"):
        _call(name, env, f"close() ({attempt} call)", env.close)
    for layer in list(iter_layers(env))[1:]:
        try:
            layer.close()
        except Exception as e:
            raise EnvCheckError(
                f"{layer}.close() raised {type(e).__name__}: {_clip(str(e))} when called again after the "
                "env was closed. Likely bug: close() releases a resource that is already gone; "
                "guard it with a flag so closing twice is safe.",
                check=name,
            ) from e
    return []


CHECKS: tuple[Callable[..., list[str]], ...] = (
    check_reset_types,
    check_step_types,
    check_done_flags,
    check_global_rng_untouched,
    check_reset_determinism,
    check_trajectory_determinism,
    check_seed_variation,
    check_success_flag,
    check_step_after_end,
    check_bad_actions,
    check_close_twice,
)
"""The checks `check_env` runs, in order (`check_close_twice` last: it closes the env)."""


def check_env(
    env: Env,
    *,
    seed: int = 0,
    max_steps: int = DEFAULT_MAX_STEPS,
    skip: Collection[str] = (),
    warn: bool = True,
) -> None:
    """Check that ``env`` follows the gem_core env contract; raise on the first violation.

    Runs the named checks of `CHECKS` in order: reset/step return types, bool
    ``terminated``/``truncated``, the global RNGs left alone, determinism of resets and
    of trajectories under one seed, variation across seeds (for random envs),
    ``info["success"]`` on the final step, `ResetNeeded` after the end (for stacks with
    `OrderEnforcing`), robustness to bad actions, and ``close()`` twice.

    It works on ``env`` itself: it resets and steps it many times and finally **closes**
    it, so build a fresh env for anything else.

    Args:
        env: the env to check, bare or wrapped (e.g. from `gem_core.make`).
        seed: the base seed; checks use ``seed``, ``seed + 1``, ...
        max_steps: cap on the steps of one episode in checks that play episodes.
        skip: names of checks not to run (e.g. ``{"check_bad_actions"}``).
        warn: emit the soft notes (a skipped check, a non-text observation, no
            ``sample_random_action``) as ``UserWarning``; ``False`` keeps quiet.

    Raises:
        EnvCheckError: a check failed; the message starts with the check's name and names
            the likely bug. It is an ``AssertionError``, so pytest reports it as a failure.
        InvalidArgument: ``env`` is not a `gem_core.Env`, or ``skip`` names an unknown check.
        DependencyNotInstalled: the env needs an optional package (passes through).
    """
    if not isinstance(env, Env):
        raise InvalidArgument(
            f"check_env expects a gem_core.Env, got {type(env).__name__}; build one with "
            "gem_core.make(env_id) (a vector env is checked through its sub-env ids)"
        )
    check_positive_int("max_steps", max_steps)
    names = [check.__name__ for check in CHECKS]
    unknown = sorted(set(skip) - set(names))
    if unknown:
        hints = {u: difflib.get_close_matches(u, names, n=1) for u in unknown}
        did_you_mean = "; ".join(f"{u!r}: did you mean {h[0]!r}?" for u, h in hints.items() if h)
        raise InvalidArgument(
            f"check_env(skip=...) got unknown check name(s) {', '.join(map(repr, unknown))}. "
            f"Valid names: {', '.join(names)}." + (f" {did_you_mean}" if did_you_mean else "")
        )
    notes: list[str] = []
    for check in CHECKS:
        if check.__name__ not in skip:
            notes.extend(check(env, seed=seed, max_steps=max_steps))
    if warn:
        for note in notes:
            warnings.warn(f"check_env: {note}", UserWarning, stacklevel=2)
