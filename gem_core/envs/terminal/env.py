"""`TerminalEnv`: shell tasks solved with bash commands in a sandboxed workspace."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any, Literal

from gem_core.core import Env
from gem_core.envs.terminal.task import TerminalTask, load_task, task_names
from gem_core.errors import (
    InvalidArgument,
    ResetNeeded,
    SandboxError,
    SandboxUnavailable,
    check_positive_int,
)

__all__ = ["TerminalEnv", "parse_action", "FORMAT_HINT", "RANDOM_ACTIONS"]

FORMAT_HINT = (
    "Reply with exactly one action: <bash>a shell command</bash> to run a command, or "
    "<finish></finish> when the task is done."
)

RANDOM_ACTIONS: tuple[str, ...] = (
    "<bash>ls</bash>",
    "<bash>pwd</bash>",
    "<bash>find . | sort | head -n 20</bash>",
    "<bash>echo probe > probe.txt && cat probe.txt</bash>",
    "<bash>exit 3</bash>",
    "<finish></finish>",
)
"""What `TerminalEnv.sample_random_action` draws from: cheap, harmless and deterministic."""

_MAX_COMMAND_CHARS = 16 * 1024  # a longer <bash> block is a format error (write files in steps)


def parse_action(action: Any) -> tuple[str, str] | tuple[None, str]:
    """Read one action: ``("bash", command)``, ``("finish", "")`` or ``(None, why)``.

    The earliest complete ``<bash>...</bash>`` block or ``<finish>`` tag (``<finish/>``,
    ``<finish>summary</finish>`` too) in the text is the action; text around it is
    ignored (the agent may think aloud first). The command is the block's content with
    surrounding blank lines removed.
    """
    if not isinstance(action, str):
        return None, f"the action must be text, got {type(action).__name__}"
    bash = action.find("<bash>")
    finish = -1
    start = 0
    while True:  # "<finish" followed by ">", "/>" or whitespace
        finish = action.find("<finish", start)
        if finish < 0:
            break
        after = action[finish + 7 : finish + 9]
        if after[:1] == ">" or after == "/>" or after[:1].isspace():
            break
        start = finish + 7
    if bash < 0 and finish < 0:
        return None, "no <bash>...</bash> or <finish></finish> found"
    if finish >= 0 and (bash < 0 or finish < bash):
        return "finish", ""
    end = action.find("</bash>", bash + 6)
    if end < 0:
        return None, "the <bash> tag is not closed with </bash>"
    command = action[bash + 6 : end].strip("\n").rstrip()
    if not command.strip():
        return None, "the <bash></bash> block is empty"
    if "\x00" in command:
        return None, "the command contains a NUL character"
    if len(command) > _MAX_COMMAND_CHARS:
        return None, (
            f"the command is {len(command)} characters long; at most {_MAX_COMMAND_CHARS} are "
            "allowed (write long files in several steps)")
    return "bash", command


class TerminalEnv(Env[str, str]):
    """A shell task in a sandboxed workspace, graded by the task's own test script.

    Each episode gets a fresh, empty workspace directory in which the task's
    ``setup.sh`` runs first. The agent then runs commands one at a time; every command
    is a separate ``bash -c`` in the sandbox (`gem_core.sandbox.Shell`), started in the
    workspace: **``cd``, environment variables and background processes do not carry
    over** between commands, only files do (chain commands with ``&&``). Under
    bubblewrap the workspace is ``/workspace`` and the rest of the file system is
    read-only, ``/tmp`` is private (an in-memory tmpfs of at most ``max_workspace_mb``),
    there is no network, and each command has a wall timeout and limits on processes,
    file size and memory. The workspace as a whole is capped at ``max_workspace_mb`` of
    disk (256 MiB) and ``max_workspace_files`` entries (10,000), measured after every
    command and every 0.25 s while one runs.

    Isolation and what to provide: install bubblewrap (``apt-get install bubblewrap``;
    0.8+ caps ``/tmp``) and util-linux's ``setpriv``; Yama is not required. Under
    bubblewrap every command also gets a seccomp filter (no ``ptrace``, no reading other
    processes' memory, no user namespaces) and sees no installed ``gem_core`` (the
    tasks' tests and solutions) nor ``$GEM_DATA_DIR``. On a root host (a container as
    root) the agent's commands run as a uid of this env and the tests as a second,
    grader uid: the test reads the whole workspace, the task's ``test.sh`` is readable by
    the grader alone, and the agent's programs that a test runs (python-bugfix's
    ``stats.py``, fix-shell-script's ``backup.sh``) run as the agent's uid through
    ``as_agent``, so they can neither read the expected values nor trace or signal the
    test. On a non-root host both are one uid, and such a program could read the test:
    grade RL runs on a root host. Without bubblewrap the isolation is reduced (a
    `ReducedIsolationWarning`): commands see the host's files, the shipped tests among
    them; do not train on it.

    Observation:
        At reset: the instruction, the rules of the shell and the action format.
        After ``<bash>``: the command's output (stdout and stderr interleaved, at most
        ``max_output_bytes``; longer output keeps its head and tail and says how many
        bytes were cut) and a status line ``[exit code: N]``, or a note that the command
        timed out and was killed. After a format error: what was wrong and the format.
        At the end: whether the task's tests passed, or that the workspace went over its
        limit and was deleted.
    Action:
        ``<bash>command</bash>`` runs one command; ``<finish></finish>`` (or ``<finish>``,
        ``<finish/>``, ``<finish>summary</finish>``) ends the episode. The earliest
        action tag in the text counts; text around it is ignored.
    Rewards:
        On the final step, 1.0 when the task's ``test.sh`` exits with 0 (success),
        else 0.0. A format error (no action tag, an empty or unclosed ``<bash>``, a
        command over 16 KiB, a NUL, a non-text action) pays ``format_penalty``
        (default -0.1) and the episode goes on. Commands that fail cost nothing. A
        command that leaves the workspace over its limit pays ``format_penalty`` too and
        ends the episode (below).
    Episode end:
        ``terminated`` after ``<finish>``; ``truncated`` when ``max_turns`` turns are
        used up. Either way the tests run then, in the workspace mounted read-only (a
        copy without bubblewrap), with ``test.sh`` taken from the task's directory, not
        from the workspace, as the grader (`gem_core.sandbox.Shell.run` with
        ``grader=True``); the final reward and ``info["success"]`` come from them.
        Also ``terminated`` at once, without tests, when a command takes the workspace
        over ``max_workspace_mb`` or ``max_workspace_files`` (a command still running
        then is killed): the workspace is deleted at that moment (it could fill the
        host's disk), the reward is ``format_penalty``, ``info["success"]`` is False and
        ``info["workspace_over_limit"]`` True; the observation says so.
    Info:
        ``success`` (every step; True only when the tests passed at the end), ``turn``,
        ``task``, ``format_error``, ``invalid_action``, ``parsed_action`` (the command,
        or ``"finish"``), ``exit_code``, ``timed_out``, ``output_truncated``,
        ``workspace_bytes`` (disk use, a lower bound when over the limit) and
        ``workspace_over_limit`` (after a command), and on the final step
        ``tests_passed`` and ``test_output`` (empty when the tests did not run).

    Arguments:
        task: a shipped task name (`task_names`), a task directory path, a list of
            them, or ``None`` for every shipped task. With several tasks each reset
            picks one with ``self.rng`` (so a seed fixes the task) unless
            ``options={"task": name}`` names it.
        max_turns: the turn budget.
        timeout_s: wall-clock seconds per command.
        test_timeout_s: wall-clock seconds for ``setup.sh`` and for ``test.sh``.
        max_output_bytes: output bytes shown per command (head and tail halves).
        format_penalty: reward of a turn with a malformed action.
        isolation: ``"auto"`` or a level `gem_core.sandbox.Shell` must use.
        cache_setup: run a task's ``setup.sh`` once per env and start later episodes
            of that task from a copy of its result (a task's setup must therefore be
            deterministic, as the shipped ones are); ``False`` runs it at every reset.
        memory_mb, max_processes, file_size_mb: per-command limits (see ``Shell``).
        max_workspace_mb: disk (MiB of allocated blocks) the whole workspace may use;
            ``None`` for no cap.
        max_workspace_files: entries (files, directories, links) the workspace may
            hold; ``None`` for no cap.

    Version history: v0 — 13 shipped tasks; ``terminal:Mixed-v0`` samples one per reset;
    the workspace cap (256 MiB, 10,000 entries) was added within v0; so were the grader
    uid (tests run the agent's programs through ``as_agent``), the seccomp filter and the
    hidden package (a program under test could read or ptrace the test before).
    """

    metadata = {"category": "terminal"}

    def __init__(
        self,
        task: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        *,
        max_turns: int = 20,
        timeout_s: float = 10.0,
        test_timeout_s: float = 30.0,
        max_output_bytes: int = 8 * 1024,
        format_penalty: float = -0.1,
        isolation: Literal["auto", "bwrap", "netns", "rlimits"] = "auto",
        cache_setup: bool = True,
        memory_mb: int = 1024,
        max_processes: int = 64,
        file_size_mb: int = 16,
        max_workspace_mb: float | None = 256,
        max_workspace_files: int | None = 10_000,
    ):
        check_positive_int("TerminalEnv(max_turns=...)", max_turns)
        for name, value in (("timeout_s", timeout_s), ("test_timeout_s", test_timeout_s),
                            ("max_output_bytes", max_output_bytes)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise InvalidArgument(f"TerminalEnv({name}=...) must be positive, got {value!r}")
        for name, value in (("max_workspace_mb", max_workspace_mb),
                            ("max_workspace_files", max_workspace_files)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not value > 0):
                raise InvalidArgument(
                    f"TerminalEnv({name}=...) must be positive or None (no cap), got {value!r}")
        if task is None:
            specs: list[str | os.PathLike[str]] = list(task_names())
        elif isinstance(task, (str, os.PathLike)):
            specs = [task]
        else:
            specs = list(task)
            if not specs:
                raise InvalidArgument("TerminalEnv(task=[]) needs at least one task name or directory")
        tasks = [load_task(t) for t in specs]
        usable = [t for t in tasks if not t.missing_tools()]
        if len(usable) < len(tasks):
            missing = {t.name: t.missing_tools() for t in tasks if t.missing_tools()}
            detail = "; ".join(f"{name} needs {', '.join(tools)}" for name, tools in missing.items())
            if not usable or task is not None and len(tasks) == 1:
                raise SandboxUnavailable(
                    f"terminal task(s) cannot run here: {detail} on the sandbox PATH "
                    "(/usr/local/bin:/usr/bin:/bin). Install the program(s) or pick other tasks.")
            warnings.warn(f"TerminalEnv: skipping tasks whose programs are missing: {detail}",
                          RuntimeWarning, stacklevel=2)
        self.tasks: dict[str, TerminalTask] = {t.name: t for t in usable}
        self._names = sorted(self.tasks)
        self.max_turns = max_turns
        self.timeout_s = float(timeout_s)
        self.test_timeout_s = float(test_timeout_s)
        self.format_penalty = float(format_penalty)
        self.cache_setup = bool(cache_setup)
        self._shell_options = {
            "isolation": isolation,
            "timeout_s": float(timeout_s),
            "max_output_bytes": int(max_output_bytes),
            "memory_mb": int(memory_mb),
            "max_processes": int(max_processes),
            "file_size_mb": int(file_size_mb),
            "max_workspace_mb": max_workspace_mb,
            "max_workspace_files": max_workspace_files,
        }
        self._shell: Any = None  # gem_core.sandbox.shell.Shell, built at the first reset
        self.task: TerminalTask | None = None
        self.turn = 0
        self.done = True
        self.last_exit_code: int | None = None

    # -- helpers ----------------------------------------------------------------------

    @property
    def shell(self) -> Any:
        """The `gem_core.sandbox.Shell` of this env (built on first use)."""
        if self._shell is None or self._shell.closed:
            from gem_core.sandbox.shell import Shell

            self._shell = Shell(**self._shell_options)
        return self._shell

    def _rules(self) -> str:
        shell = self._shell
        sandboxed = shell is not None and shell.isolation == "bwrap"
        where = shell.cwd if sandboxed else "the working directory"
        fenced = ("There is no network and the rest of the file system is read-only. "
                  if sandboxed else "")
        return (
            f"You are in a Linux shell; your working directory is {where}, which holds the "
            "task's files. Each command runs as a separate `bash -c` started in that "
            "directory: `cd`, variables and background jobs do not carry over between "
            f"commands, only files do (chain steps with &&). {fenced}A command is killed "
            f"after {self.timeout_s:g} s. You have {self.max_turns} turns. {FORMAT_HINT} "
            "When you finish (or the turns run out), the task's tests check the files."
        )

    def _run_tests(self) -> tuple[bool, str]:
        assert self.task is not None
        result = self.shell.run('bash "$GEM_TASK_DIR/test.sh"', timeout=self.test_timeout_s,
                                read_only=True, files={"test.sh": self.task.test}, grader=True)
        output = result.output
        if result.timed_out:
            output += f"\n[the tests timed out after {self.test_timeout_s:g} s]"
        return result.ok, output

    # -- the Env API --------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        wanted = (options or {}).get("task")
        if wanted is not None:
            if wanted not in self.tasks:
                raise InvalidArgument(
                    f"reset(options={{'task': {wanted!r}}}): this env's tasks are {', '.join(self._names)}")
            name = wanted
        elif len(self._names) == 1:
            name = self._names[0]
        else:
            name = self.rng.choice(self._names)
        self.task = self.tasks[name]
        shell = self.shell
        if self.cache_setup and name in shell.snapshots:
            shell.reset_workspace(snapshot=name)
        else:
            shell.reset_workspace()
            result = shell.run('bash "$GEM_TASK_DIR/setup.sh"', timeout=self.test_timeout_s,
                               files={"setup.sh": self.task.setup})
            if not result.ok or result.workspace_over_limit:
                why = ("left the workspace over its limit (raise max_workspace_mb or "
                       "max_workspace_files)" if result.workspace_over_limit
                       else "timed out" if result.timed_out else f"exited with {result.exit_code}")
                raise SandboxError(
                    f"terminal task {name!r}: setup.sh {why} (isolation={shell.isolation}); its "
                    f"output: {result.output[-1000:]!r}. The task's setup script or the sandbox "
                    "is broken.")
            if self.cache_setup:
                shell.save_snapshot(name)
        self.turn = 0
        self.done = False
        self.last_exit_code = None
        obs = f"{self.task.instruction}\n\n{self._rules()}"
        return obs, {"task": name, "turn": 0, "success": False, "isolation": shell.isolation}

    def step(self, action: str):
        if self.task is None or self.done:
            raise ResetNeeded("TerminalEnv.step() needs a live episode: call reset() first")
        self.turn += 1
        kind, payload = parse_action(action)
        info: dict[str, Any] = {"task": self.task.name, "turn": self.turn, "success": False,
                                "format_error": kind is None, "invalid_action": kind is None}
        reward = 0.0
        terminated = False
        if kind is None:
            reward = self.format_penalty
            obs = f"Format error: {payload}. {FORMAT_HINT}"
        elif kind == "finish":
            info["parsed_action"] = "finish"
            terminated = True
            obs = ""
        else:
            info["parsed_action"] = payload
            result = self.shell.run(payload, timeout=self.timeout_s)
            self.last_exit_code = result.exit_code
            info.update(exit_code=result.exit_code, timed_out=result.timed_out,
                        output_truncated=result.truncated, workspace_bytes=result.workspace_bytes,
                        workspace_over_limit=result.workspace_over_limit)
            obs = self._render(result)
            if result.workspace_over_limit:
                self.shell.remove_workspace()  # at once: it may be filling the host's disk
                self.done = True
                info.update(tests_passed=False, test_output="")
                return (f"{obs}\n\n{self._over_limit_note(result)}", self.format_penalty, True,
                        False, info)
        truncated = not terminated and self.turn >= self.max_turns
        if terminated or truncated:
            self.done = True
            passed, test_output = self._run_tests()
            reward += 1.0 if passed else 0.0
            info.update(success=passed, tests_passed=passed, test_output=test_output)
            verdict = "The task's tests passed." if passed else "The task's tests failed."
            if terminated:
                obs = f"Finished. {verdict}"
            else:
                obs = f"{obs}\n\nYou have used all {self.max_turns} turns. {verdict}"
        return obs, float(reward), terminated, truncated, info

    def _over_limit_note(self, result: Any) -> str:
        files = self._shell_options["max_workspace_files"]
        mb = self._shell_options["max_workspace_mb"]
        if files is not None and (result.workspace_files or 0) > files:
            what = f"grew to more than {files} files and directories"
        elif mb is not None and (result.workspace_bytes or 0) > mb * 1024 * 1024:
            what = f"grew to more than {mb:g} MiB of disk"
        else:
            what = "could not be measured (an unreadable directory)"
        return (f"The workspace {what}, over its limit: it has been deleted and the "
                "episode is over (the task's tests did not run).")

    def _render(self, result: Any) -> str:
        output = result.output if result.output else "(no output)\n"
        if not output.endswith("\n"):
            output += "\n"
        notes = []
        if result.truncated:
            notes.append(f"[output cut: {result.total_bytes} bytes written, the first and last "
                         f"{self._shell_options['max_output_bytes'] // 2} shown]")
        if result.timed_out:
            notes.append(f"[the command timed out after {self.timeout_s:g} s and was killed]")
        elif result.workspace_over_limit and result.exit_code == -9:
            notes.append("[the command was killed: the workspace went over its limit]")
        else:
            notes.append(f"[exit code: {result.exit_code}]")
        return output + "\n".join(notes)

    def sample_random_action(self) -> str:
        """``<finish></finish>`` half of the time, else a cheap, harmless command.

        Drawn from `RANDOM_ACTIONS` with ``self.rng``; the early finishes keep random
        episodes (and `gem_core.check_env`) short, since every command and every grading
        starts a sandbox.
        """
        if self.rng.random() < 0.5:
            return RANDOM_ACTIONS[-1]
        return self.rng.choice(RANDOM_ACTIONS[:-1])

    def state_summary(self) -> str | None:
        if self.task is None:
            return None
        last = "none yet" if self.last_exit_code is None else f"exit code {self.last_exit_code}"
        return f"Task {self.task.name}, turn {self.turn}/{self.max_turns}, last command: {last}."

    def close(self) -> None:
        """Remove the workspace. Safe to call twice."""
        shell, self._shell = self._shell, None
        if shell is not None:
            shell.close()
        self.done = True

    def __str__(self) -> str:
        name = self._names[0] if len(self._names) == 1 else "Mixed"
        return f"<TerminalEnv {name}>"
