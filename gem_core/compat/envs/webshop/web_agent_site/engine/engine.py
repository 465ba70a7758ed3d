"""Reference ``gem.envs.webshop.web_agent_site.engine.engine``: not ported (WebShop needs its product database, a Java search index and a browser simulator).

Every public name imports; using one raises `NotPorted`, naming gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register.
"""

from __future__ import annotations

from gem_core.compat._not_ported import missing_values, placeholders

_WHY = 'WebShop needs its product database, a Java search index and a browser simulator'
_INSTEAD = 'gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register'

__all__ = ['clean_product_keys', 'convert_web_app_string_to_var', 'generate_product_prices', 'get_goal_by_idx', 'get_product_by_asin', 'get_product_per_page', 'get_top_n_product_from_keywords', 'get_weights', 'init_search_engine', 'load_products', 'map_action_to_html', 'maybe_json', 'parse_action', 'read_html_template']

(clean_product_keys, convert_web_app_string_to_var, generate_product_prices, get_goal_by_idx, get_product_by_asin, get_product_per_page, get_top_n_product_from_keywords, get_weights, init_search_engine, load_products, map_action_to_html, maybe_json, parse_action, read_html_template) = placeholders(
    __name__, ('clean_product_keys', 'convert_web_app_string_to_var', 'generate_product_prices', 'get_goal_by_idx', 'get_product_by_asin', 'get_product_per_page', 'get_top_n_product_from_keywords', 'get_weights', 'init_search_engine', 'load_products', 'map_action_to_html', 'maybe_json', 'parse_action', 'read_html_template'), instead=_INSTEAD, why=_WHY
)
__getattr__ = missing_values(__name__, ('ACTION_TO_TEMPLATE', 'BACK_TO_SEARCH', 'END_BUTTON', 'NEXT_PAGE', 'PREV_PAGE', 'PRODUCT_WINDOW', 'SEARCH_RETURN_N', 'TEMPLATE_DIR', 'TOP_K_ATTR', 'WEBSHOP_DB_PATH'), instead=_INSTEAD, why=_WHY)
