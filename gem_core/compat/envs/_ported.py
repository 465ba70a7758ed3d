"""The reference's env classes (``gem.envs.game_env.*``, ``gem.envs.reasoning_gym``) on gem_core's.

`env_class` makes a class named as the reference's that takes the reference's constructor
arguments (positional in the reference's order, or by keyword) and builds the gem_core env
inside a `CompatEnv` (the reference conventions: positional ``reset(seed)``, episode end,
``info["suffix"]``, attributes of the env read through). ``seed=`` seeds the first reset
when the gem_core class does not take a seed itself; the other `REFERENCE_ONLY_KWARGS`
are dropped; any other unknown keyword raises `InvalidKwarg` (the reference swallows it).

Subclassing these and overriding the reference's private methods (``_get_instructions``
...) has no effect: the rules are gem_core's.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from gem_core.compat.core import CompatEnv
from gem_core.errors import InvalidKwarg

__all__ = ["env_class"]


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def env_class(
    name: str,
    module: str,
    core: str,
    params: tuple[str, ...],
    *,
    renames: dict[str, str] | None = None,
    fixed: dict[str, tuple[Any, ...]] | None = None,
) -> type[CompatEnv]:
    """A reference-named env class over the gem_core class ``core`` (``"module:Class"``).

    Args:
        name: the reference class name.
        module: the compat module that exports it (its ``__module__``).
        core: the gem_core class.
        params: the reference constructor's parameters, in order (for positional calls).
        renames: reference keyword -> gem_core keyword.
        fixed: reference keywords gem_core does not have, with the values it behaves as
            (passing another value raises `InvalidKwarg`).
    """
    renames = dict(renames or {})
    fixed = dict(fixed or {})

    def __init__(self: CompatEnv, *args: Any, terminate_on_truncation: bool = True, **kwargs: Any) -> None:
        from gem_core.compat.envs.registration import split_reference_kwargs

        if len(args) > len(params):
            raise TypeError(f"{name}() takes at most {len(params)} positional arguments ({len(args)} given)")
        for key, value in zip(params, args, strict=False):
            if key in kwargs:
                raise TypeError(f"{name}() got multiple values for argument {key!r}")
            kwargs[key] = value
        make_kwargs = dict(kwargs)
        cls = _load(core)
        accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
        for key in sorted(set(kwargs) & set(fixed)):
            value = kwargs.pop(key)
            if value not in fixed[key]:
                raise InvalidKwarg(
                    f"{name}({key}={value!r}): gem_core's {cls.__name__} behaves as {key} in {fixed[key]!r} only"
                )
        for key in sorted(set(kwargs) & set(renames)):
            kwargs[renames[key]] = kwargs.pop(key)
        seed, _ = split_reference_kwargs(name, kwargs, accepted)
        unknown = sorted(set(kwargs) - accepted)
        if unknown:
            raise InvalidKwarg(
                f"{name}: unknown argument(s) {unknown}; gem_core's {cls.__name__} takes {sorted(accepted)}"
            )
        CompatEnv.__init__(
            self,
            cls(**kwargs),
            env_id=name,
            seed=seed,
            terminate_on_truncation=terminate_on_truncation,
            make_kwargs=make_kwargs,
        )

    def _fresh(self: CompatEnv, **kwargs: Any) -> CompatEnv:
        return type(self)(terminate_on_truncation=self.terminate_on_truncation, **kwargs)

    doc = (
        f"The reference's ``{name}({', '.join(params)})`` on gem_core's ``{core.replace(':', '.')}`` "
        "(see `gem_core.compat.envs._ported`)."
    )
    return type(name, (CompatEnv,), {"__init__": __init__, "_fresh": _fresh, "__module__": module, "__doc__": doc})
