"""Reference ``gem.envs.webshop.web_agent_site``: not ported (WebShop needs its product database, a Java search index and a browser simulator).

Every public name imports; using one raises `NotPorted`, naming gem_core.envs.mcp_tasks (tool-using tasks graded on a database), or register the WebShop env yourself with gem_core.compat.register.
"""

from __future__ import annotations
