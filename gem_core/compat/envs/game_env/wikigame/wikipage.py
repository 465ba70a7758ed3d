"""Reference ``gem.envs.game_env.wikigame.wikipage``: not ported (plays live Wikipedia pages through the MediaWiki API or a Kiwix server).

Every public name imports; using one raises `NotPorted` (gem_core has no equivalent).
"""

from __future__ import annotations

from gem_core.compat._not_ported import placeholders

_WHY = 'plays live Wikipedia pages through the MediaWiki API or a Kiwix server'
_INSTEAD = None

__all__ = ['WikipediaPage']

(WikipediaPage,) = placeholders(
    __name__, ('WikipediaPage',), instead=_INSTEAD, why=_WHY
)
