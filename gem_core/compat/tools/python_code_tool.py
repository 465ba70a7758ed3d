"""The reference ``PythonCodeTool(timeout, sandbox_type, keep_error_last_line)`` on gem_core's sandboxed tool."""

from __future__ import annotations

import logging

from gem_core.compat.tools.base_tool import ReferenceMethods
from gem_core.tools.python import PythonCodeTool as _NativePythonCodeTool

__all__ = ["PythonCodeTool"]

logger = logging.getLogger("gem_core.compat")


class PythonCodeTool(ReferenceMethods, _NativePythonCodeTool):
    """gem_core's `gem_core.tools.PythonCodeTool` with the reference constructor and methods.

    Code always runs in gem_core's sandbox (bubblewrap where available), whatever
    ``sandbox_type`` says; the observation format (``"Code execution result: ..."``) is
    the reference's. Adds ``tool_type = "python_code"``, ``instruction_string()`` and
    ``execute_action(action) -> (is_valid, has_error, observation, parsed_action)``.

    Args:
        timeout: seconds per call.
        sandbox_type: accepted and ignored (logged at debug level).
        keep_error_last_line: show only the last line of stderr.
    """

    tool_type = "python_code"

    def __init__(self, timeout: float = 5, sandbox_type: str = "none", keep_error_last_line: bool = False):
        if sandbox_type != "none":
            logger.debug("PythonCodeTool(sandbox_type=%r) ignored: gem_core always sandboxes", sandbox_type)
        super().__init__(timeout_s=timeout, keep_error_last_line=keep_error_last_line)
        self.timeout = timeout
        self.sandbox_type = sandbox_type
