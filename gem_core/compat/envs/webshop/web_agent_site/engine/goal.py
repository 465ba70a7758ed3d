"""Reference ``gem.envs.webshop.web_agent_site.engine.goal``: not ported (WebShop needs its product database, a Java search index and a browser simulator).

Every public name imports; using one raises `NotPorted`, naming gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register.
"""

from __future__ import annotations

from gem_core.compat._not_ported import missing_values, placeholders

_WHY = 'WebShop needs its product database, a Java search index and a browser simulator'
_INSTEAD = 'gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register'

__all__ = ['get_attribute_reward', 'get_goals', 'get_human_goals', 'get_option_reward', 'get_reward', 'get_synthetic_goals', 'get_type_reward']

(get_attribute_reward, get_goals, get_human_goals, get_option_reward, get_reward, get_synthetic_goals, get_type_reward) = placeholders(
    __name__, ('get_attribute_reward', 'get_goals', 'get_human_goals', 'get_option_reward', 'get_reward', 'get_synthetic_goals', 'get_type_reward'), instead=_INSTEAD, why=_WHY
)
__getattr__ = missing_values(__name__, ('PRICE_RANGE', 'nlp'), instead=_INSTEAD, why=_WHY)
