"""Reference ``gem.envs.webshop.web_agent_site.utils``: not ported (WebShop needs its product database, a Java search index and a browser simulator).

Every public name imports; using one raises `NotPorted`, naming gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register.
"""

from __future__ import annotations

from gem_core.compat._not_ported import missing_values, placeholders

_WHY = 'WebShop needs its product database, a Java search index and a browser simulator'
_INSTEAD = 'gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register'

__all__ = ['generate_mturk_code', 'setup_logger']

(generate_mturk_code, setup_logger) = placeholders(
    __name__, ('generate_mturk_code', 'setup_logger'), instead=_INSTEAD, why=_WHY
)
__getattr__ = missing_values(__name__, ('BASE_DIR', 'DEBUG_PROD_SIZE', 'DEFAULT_ATTR_PATH', 'DEFAULT_FILE_PATH', 'DEFAULT_REVIEW_PATH', 'FEAT_CONV', 'FEAT_IDS', 'HUMAN_ATTR_PATH'), instead=_INSTEAD, why=_WHY)
