"""The reference ``SearchTool(num_workers, search_url, topk, timeout)`` on gem_core's search tool."""

from __future__ import annotations

import logging
import os

from gem_core.compat.tools.base_tool import ReferenceMethods
from gem_core.tools.search import SearchTool as _NativeSearchTool

__all__ = ["SearchTool", "TIMEOUT"]

TIMEOUT = 5
"""The reference's default request timeout (seconds)."""

logger = logging.getLogger("gem_core.compat")


class SearchTool(ReferenceMethods, _NativeSearchTool):
    """gem_core's `gem_core.tools.SearchTool` with the reference constructor and methods.

    The endpoint is ``search_url``, else ``$SEARCH_URL`` (read when the tool is built);
    requests are msgpack, as the reference's retrieval server expects (needs the
    ``msgpack`` or ``msgspec`` package). With neither, the tool searches gem_core's
    shipped demo corpus (a warning is logged) instead of failing at the first search as
    the reference did. Adds ``tool_type = "search"``, ``instruction_string()`` and
    ``execute_action(action) -> (is_valid, has_error, observation, parsed_action)``.

    Args:
        num_workers: accepted and ignored (the tool is thread-safe).
        search_url: the retrieval server endpoint.
        topk: passages per query.
        timeout: seconds per HTTP attempt.
        encoding: request body, ``"msgpack"`` (the reference server's) or ``"json"``
            (Search-R1 style servers; not in the reference).

    Raises:
        DependencyNotInstalled: msgpack requests without ``msgpack``/``msgspec`` installed.
    """

    tool_type = "search"
    unparsed_is_action = False

    def __init__(
        self,
        num_workers: int = 1,
        search_url: str | None = None,
        topk: int = 3,
        timeout: float = 5,
        *,
        encoding: str = "msgpack",
    ):
        url = search_url or os.environ.get("SEARCH_URL") or None
        if url:
            super().__init__(search_url=url, topk=topk, timeout=timeout, encoding=encoding)
        else:
            logger.warning(
                "SearchTool: no search_url and $SEARCH_URL is unset; searching gem_core's demo corpus"
            )
            super().__init__(topk=topk, timeout=timeout)
        self.num_workers = num_workers
        self.search_url = url
        self.timeout = timeout
