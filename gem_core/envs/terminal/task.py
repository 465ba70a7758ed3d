"""Terminal tasks: the `TerminalTask` record and loading the shipped task directories."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from gem_core.errors import InvalidArgument

__all__ = ["TerminalTask", "TASKS_DIR", "TASK_FILES", "SANDBOX_PATH", "task_names", "load_task"]

TASKS_DIR = Path(__file__).with_name("tasks")
"""The shipped tasks: one directory per task, named after it (``count-lines``, ...)."""

TASK_FILES = ("instruction.md", "setup.sh", "test.sh", "solution.sh", "task.json")
"""The files of a task directory (``solution.sh`` and ``task.json`` are optional)."""

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
"""``$PATH`` inside the shell sandbox; a task's ``requires`` are looked up on it."""


@dataclass(frozen=True)
class TerminalTask:
    """One shell task: an instruction, a setup script and a test script.

    Attributes:
        name: the task's name (its directory name; the env id is ``terminal:<name>-v0``).
        instruction: what the agent is asked to do (shown at reset).
        setup: bash run in the empty workspace before the episode (builds its files).
        test: bash run after the episode in the read-only workspace; exit code 0 means
            the task is solved. It is read from the task directory, never from the
            workspace, so the agent cannot change it.
        solution: a reference solution (one bash command), or ``""``; tests use it to
            prove that ``test`` can pass.
        description: one line for listings.
        requires: programs the scripts need on the sandbox ``$PATH`` (e.g. ``python3``).
        path: the task directory.
    """

    name: str
    instruction: str
    setup: str
    test: str
    solution: str = ""
    description: str = ""
    requires: tuple[str, ...] = field(default_factory=tuple)
    path: Path | None = None

    def missing_tools(self) -> list[str]:
        """The programs of ``requires`` that are not on `SANDBOX_PATH` here."""
        return [tool for tool in self.requires if shutil.which(tool, path=SANDBOX_PATH) is None]


@lru_cache(maxsize=1)
def task_names() -> tuple[str, ...]:
    """The names of the shipped tasks, sorted."""
    return tuple(sorted(p.name for p in TASKS_DIR.iterdir() if (p / "test.sh").is_file()))


def _read(directory: Path, name: str, required: bool) -> str:
    path = directory / name
    if not path.is_file():
        if required:
            raise InvalidArgument(
                f"terminal task directory {str(directory)!r} has no {name}; a task directory "
                f"holds {', '.join(TASK_FILES[:3])} (and optionally solution.sh, task.json)")
        return ""
    return path.read_text(encoding="utf-8")


@lru_cache(maxsize=64)
def _load_dir(directory: str) -> TerminalTask:
    path = Path(directory)
    meta_text = _read(path, "task.json", required=False)
    try:
        meta = json.loads(meta_text) if meta_text else {}
    except ValueError as e:
        raise InvalidArgument(f"{path / 'task.json'} is not valid JSON: {e}") from e
    if not isinstance(meta, dict):
        raise InvalidArgument(f"{path / 'task.json'} must hold a JSON object, got {type(meta).__name__}")
    requires = meta.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(t, str) for t in requires):
        raise InvalidArgument(f"{path / 'task.json'}: 'requires' must be a list of program names, got {requires!r}")
    return TerminalTask(
        name=path.name,
        instruction=_read(path, "instruction.md", required=True).strip(),
        setup=_read(path, "setup.sh", required=True),
        test=_read(path, "test.sh", required=True),
        solution=_read(path, "solution.sh", required=False),
        description=str(meta.get("description", "")),
        requires=tuple(requires),
        path=path,
    )


def load_task(task: str | os.PathLike[str]) -> TerminalTask:
    """Load a shipped task by name, or a task directory by path.

    Args:
        task: a name from `task_names` (e.g. ``"count-lines"``), or the path of a
            directory laid out like the shipped ones (``instruction.md``, ``setup.sh``,
            ``test.sh``, optional ``solution.sh`` and ``task.json`` with
            ``{"description": ..., "requires": [...]}``).

    Raises:
        InvalidArgument: an unknown name, or a directory without the required files.
    """
    text = os.fspath(task)
    if os.sep in text or (os.altsep and os.altsep in text) or text.startswith("."):
        if not os.path.isdir(text):
            raise InvalidArgument(f"terminal task directory {text!r} does not exist")
        return _load_dir(os.path.abspath(text))
    if text not in task_names():
        import difflib

        close = difflib.get_close_matches(text, task_names(), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise InvalidArgument(
            f"unknown terminal task {text!r}; the shipped tasks are {', '.join(task_names())}. "
            f"Pass a directory path for a task of your own.{hint}")
    return _load_dir(str(TASKS_DIR / text))
