"""Removing what a run left off the critical path (used by `Sandbox` and `Shell`)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable


class Trash:
    """``discard(path)`` renames ``path`` aside at once and removes it in the background.

    A run may leave a tree that takes seconds to delete (hundreds of thousands of
    directories); deleting it inline would delay the next run by as much. One removal runs
    at a time: a discard while the previous one still runs waits for it, so whoever keeps
    leaving trees faster than they go slows only itself and trash never piles up.

    Args:
        remove: deletes a tree given its path; must not raise ``OSError``.
    """

    def __init__(self, remove: Callable[[str], object]):
        self._remove = remove
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def discard(self, path: str) -> None:
        """Remove ``path`` (file or tree; absent is fine) soon; it is gone from ``path`` now."""
        trash = os.path.join(os.path.dirname(path), f".trash-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            return
        except OSError:  # cannot move it (e.g. a mount point): remove it in place
            self._remove(path)
            return
        with self._lock:
            self.wait()
            self._thread = threading.Thread(target=self._remove, args=(trash,), daemon=True,
                                            name="gem-sandbox-trash")
            self._thread.start()

    def wait(self) -> None:
        """Block until the removal in progress (if any) is done."""
        thread = self._thread
        if thread is not None:
            thread.join()
