"""Reference ``gem.envs.game_env.wikigame``: not ported (plays live Wikipedia pages through the MediaWiki API or a Kiwix server).

Every public name imports; using one raises `NotPorted` (gem_core has no equivalent).
"""

from __future__ import annotations
