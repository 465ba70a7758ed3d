"""Reference ``gem.envs.webshop.webshop``: not ported (WebShop needs its product database, a Java search index and a browser simulator).

Every public name imports; using one raises `NotPorted`, naming gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register.
"""

from __future__ import annotations

from gem_core.compat._not_ported import missing_values, placeholders

_WHY = 'WebShop needs its product database, a Java search index and a browser simulator'
_INSTEAD = 'gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register'

__all__ = ['WebshopEnv', 'tag_visible']

(WebshopEnv, tag_visible) = placeholders(
    __name__, ('WebshopEnv', 'tag_visible'), instead=_INSTEAD, why=_WHY
)
__getattr__ = missing_values(__name__, ('WEBSHOP_INSTRUCTION_TEMPLATE',), instead=_INSTEAD, why=_WHY)
