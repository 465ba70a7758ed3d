"""Reference ``gem.envs.math_visual_env``: not ported (the image-question env is native only).

Every public name imports; using one raises `NotPorted`, naming gem_core.envs.math_visual.MathVisualEnv (gem_core.make('math:Geometry3K'...)).
"""

from __future__ import annotations

from gem_core.compat._not_ported import placeholders

_WHY = 'the image-question env is native only'
_INSTEAD = "gem_core.envs.math_visual.MathVisualEnv (gem_core.make('math:Geometry3K'...))"

__all__ = ['MathVisualEnv']

(MathVisualEnv,) = placeholders(
    __name__, ('MathVisualEnv',), instead=_INSTEAD, why=_WHY
)
