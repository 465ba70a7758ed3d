"""Reference ``gem.envs.webshop``: WebShop (not ported)."""

from __future__ import annotations
