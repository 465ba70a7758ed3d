"""Reference ``gem.envs.webshop.web_agent_site.engine.normalize``: not ported (WebShop needs its product database, a Java search index and a browser simulator).

Every public name imports; using one raises `NotPorted`, naming gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register.
"""

from __future__ import annotations

from gem_core.compat._not_ported import missing_values, placeholders

_WHY = 'WebShop needs its product database, a Java search index and a browser simulator'
_INSTEAD = 'gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register'

__all__ = ['normalize_color', 'normalize_color_size']

(normalize_color, normalize_color_size) = placeholders(
    __name__, ('normalize_color', 'normalize_color_size'), instead=_INSTEAD, why=_WHY
)
__getattr__ = missing_values(__name__, ('COLOR_SET', 'SIZE_PATTERNS', 'SIZE_SET'), instead=_INSTEAD, why=_WHY)
