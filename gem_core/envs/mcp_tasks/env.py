"""`MCPTaskEnv`: shop tasks solved through a real MCP server over a per-episode SQLite copy."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import sys
import tempfile
import urllib.parse
import weakref
from pathlib import Path
from typing import Any

from gem_core.core import Env
from gem_core.envs.mcp_tasks.tasks import (
    TASK_NAMES,
    TASKS,
    Task,
    TaskInstance,
    answers_match,
    final_answer,
    table_dump,
    tool_call,
)
from gem_core.errors import (
    ClosedEnvError,
    InvalidArgument,
    ResetNeeded,
    check_positive_int,
)
from gem_core.grading.extract import extract_boxed, extract_tagged_answer

__all__ = ["MCPTaskEnv", "SERVER_SCRIPT", "SEED_SQL", "extract_answer", "MAX_ANSWER_CHARS"]

SERVER_SCRIPT = Path(__file__).with_name("server.py")
"""The shop MCP server, run as ``python server.py --db PATH`` (one process per env)."""
SEED_SQL = Path(__file__).parent / "data" / "seed.sql"
"""Schema and rows every episode starts from (see ``data/README.md``)."""
MAX_ANSWER_CHARS = 1_000
"""A longer final answer is graded as wrong (no answer in this catalog is that long)."""
FORMAT_ERROR_MODES = ("retry", "terminate")

_TABLES = ("customers", "products", "orders", "order_items", "settings")


def extract_answer(text: str) -> str | None:
    r"""The last complete ``<answer>...</answer>``, else the last ``\boxed{...}``, else None.

    >>> extract_answer("I think <answer>12</answer> no, <answer> 13 </answer>")
    '13'
    """
    answer = extract_tagged_answer(text)
    if answer is None:
        answer = extract_boxed(text)
    return answer.strip() if answer is not None else None


def _tool_failure(exc: Exception) -> str:
    """The observation of a tool call whose parse or execute raised (message clipped)."""
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not escape either
        message = "(no message)"
    if len(message) > 1_000:
        message = message[:1_000] + f"... [{len(message) - 1_000} characters truncated]"
    return f"MCP error: the tool call failed: {type(exc).__name__}: {message}"


def _readonly_uri(path: str) -> str:
    return "file:" + urllib.parse.quote(path) + "?mode=ro"


def _release(tool: Any, seed_conn: sqlite3.Connection, errlog: Any, workdir: str) -> None:
    """Stop the server, close files and remove the env's temp dir (runs at most once)."""
    try:
        tool.close()
    finally:
        with contextlib.suppress(Exception):
            seed_conn.close()
        with contextlib.suppress(Exception):
            errlog.close()
        shutil.rmtree(workdir, ignore_errors=True)


class MCPTaskEnv(Env[str, str]):
    r"""A task on a small shop database, solved by calling the tools of a real MCP server.

    The env owns one `gem_core.tools.MCPTool` connected (stdio) to the shop server in
    ``server.py``, started lazily at the first reset and kept for the env's lifetime: the
    episode's database is a file in the env's temp dir, and each reset replaces it with a
    fresh copy of the seed (an atomic rename; the server opens the file per call), so a
    reset costs a file copy, not a server start. The env — not a `ToolEnvWrapper` —
    owns the tool because the server's database *is* the episode state: reset, grading
    and shutdown must act on both together, and ``gem_core.make("mcp:...")`` then yields a
    complete env. `close` stops the server process and removes the temp dir.

    Observation: at reset, the request, the answer format, the turn budget and the MCP
    tools (names, descriptions, JSON schemas, call format); after a tool call, the
    tool's output (CSV for ``query``, JSON for the typed tools, an ``MCP error: ...``
    line for a refused or malformed call); after a format error, a reminder of the
    expected format; after the final answer, the verdict.
    Action: a string. A ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block
    (or the ``<tool_name>``/``<arguments>`` form) calls a tool; the first block counts,
    and an action with a tool call is a tool turn even if it also holds an answer.
    Otherwise the final answer is the last ``<answer>...</answer>`` (or ``\boxed{...}``).
    For read tasks it is the answer to the question (numbers in plain digits, e.g. cents
    as an integer); for write tasks its content is ignored (e.g. ``<answer>done</answer>``).
    Rewards: 1.0 for a correct final answer (read task) or a final database equal to
    the intended one (write task: the intended change and nothing else); 0.0 otherwise.
    Tool turns pay 0.0. A turn with neither a tool call nor an answer (including a
    non-string action) is a format error: ``format_penalty`` (default 0.0).
    Episode end: terminated after the final answer (``info["success"]`` says whether it
    was right); a format error terminates only with ``format_error="terminate"``
    (default ``"retry"``: the agent is told the format and the turn counts); truncated
    when ``max_turns`` turns (tool calls included) pass without a final answer.
    ``info`` on every step: ``task``, ``turn``, ``success``, ``format_error``,
    ``invalid_action``, ``use_tool``, ``tool_error`` (and ``tool_name`` on tool turns,
    ``parsed_action`` when an answer was read).

    Malformed and hostile actions never raise from `step` and cost one turn each: an
    action of any length is parsed in linear time; a tool call that cannot be read (bad
    JSON, JSON nested deeper than 64 levels or longer than 1 MB, no tool name) is an
    ``MCP error: could not read the tool call: ...`` observation and never reaches the
    server; a raising tool (a bug, or a subclass) gives ``MCP error: the tool call
    failed: TYPE: MESSAGE``; both with ``use_tool=True, tool_error=True``. The server
    refuses writes through ``query``, SQL functions outside its allow-list (e.g.
    ``fts3_tokenizer``, ``randomblob``, ``instr``), values over 2 KB and statements over
    their step budget, each with a message saying what to do; a call that still takes
    longer than ``tool_timeout`` is an error observation, the server is restarted on the
    same episode database, and the episode goes on.

    Arguments:
        task: a task name from `TASK_NAMES` (e.g. ``"Restock"``), or ``None`` to draw a
            task per reset (``mcp:Mixed-v0``). ``reset(options={"task": name})`` picks one
            for that episode.
        max_turns: turn budget, tool calls included.
        format_error: ``"retry"`` or ``"terminate"`` (see Episode end).
        format_penalty: reward of a format error.
        tool_timeout: seconds one tool call may take (then an error observation).
        connect_timeout: seconds to start the server and open the MCP session.
        max_output_chars: longer tool outputs keep their head and tail.
        python: interpreter for the server (default: this one, ``sys.executable``).

    Version history: v0 — 15 tasks (4 look-ups, 5 aggregates, 2 inserts, 4 updates).
    """

    metadata = {"category": "mcp"}

    def __init__(
        self,
        task: str | None = None,
        *,
        max_turns: int = 24,
        format_error: str = "retry",
        format_penalty: float = 0.0,
        tool_timeout: float = 15.0,
        connect_timeout: float = 60.0,
        max_output_chars: int = 8_000,
        python: str | None = None,
    ):
        if task is not None and task not in TASKS:
            raise InvalidArgument(
                f"unknown MCP task {task!r}; expected one of {', '.join(TASK_NAMES)} or None "
                "(draw a task per episode)"
            )
        check_positive_int("max_turns", max_turns)
        if format_error not in FORMAT_ERROR_MODES:
            raise InvalidArgument(
                f"format_error must be one of {FORMAT_ERROR_MODES}, got {format_error!r}"
            )
        from gem_core.tools.mcp import MCPTool  # needs the MCP SDK (gem-core[mcp])

        self.task_name = task
        self.max_turns = max_turns
        self.format_error = format_error
        self.format_penalty = float(format_penalty)
        self.workdir = tempfile.mkdtemp(prefix="gem-mcp-shop-")
        try:
            self.seed_path = os.path.join(self.workdir, "seed.db")
            self.db_path = os.path.join(self.workdir, "shop.db")
            build = sqlite3.connect(self.seed_path)
            try:
                build.executescript(SEED_SQL.read_text(encoding="utf-8"))
            finally:
                build.close()
            self._seed_conn = sqlite3.connect(
                _readonly_uri(self.seed_path), uri=True, check_same_thread=False
            )
            self._skus = [
                r[0] for r in self._seed_conn.execute("SELECT sku FROM products ORDER BY id")
            ]
            self._errlog = open(os.path.join(self.workdir, "server.log"), "w")  # noqa: SIM115
            self.tool = MCPTool(
                command=python or sys.executable,
                args=[str(SERVER_SCRIPT), "--db", self.db_path],
                name="shop",
                timeout=tool_timeout,
                connect_timeout=connect_timeout,
                max_retries=1,
                max_output_chars=max_output_chars,
                errlog=self._errlog,
            )
        except BaseException:
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        self._finalizer = weakref.finalize(
            self, _release, self.tool, self._seed_conn, self._errlog, self.workdir
        )
        self.task: Task | None = None
        self.instance: TaskInstance | None = None
        self.turn = 0
        self._live = False
        self._tools_text: str | None = None  # the tool list, rendered once per env

    # --- the Env API ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if not self._finalizer.alive:
            raise ClosedEnvError(
                f"{self} is closed (its MCP server was stopped); build a new env with "
                "gem_core.make(...) instead of resetting this one"
            )
        super().reset(seed=seed)
        name = (options or {}).get("task", self.task_name)
        if name is None:
            name = self.rng.choice(TASK_NAMES)
        if name not in TASKS:
            raise InvalidArgument(
                f"reset(options={{'task': {name!r}}}) names no MCP task; expected one of "
                f"{', '.join(TASK_NAMES)}"
            )
        self.task = TASKS[name]
        self.instance = self.task.sample(self.rng, self._seed_conn)
        self._restore_database()
        self.turn = 0
        self._live = False
        obs = self._instructions()  # the first reset starts the server here
        self._live = True
        return obs, {"task": name, "turn": 0, "success": False}

    def step(self, action: str):
        if not self._live or self.task is None or self.instance is None:
            raise ResetNeeded(
                f"{self}.step() called {'before reset' if self.instance is None else 'after the episode ended'}; "
                "call env.reset() first"
            )
        self.turn += 1
        info: dict[str, Any] = {
            "task": self.task.name,
            "turn": self.turn,
            "success": False,
            "format_error": False,
            "invalid_action": False,
            "use_tool": False,
            "tool_error": False,
        }
        try:
            call = self.tool.parse(action) if isinstance(action, str) else None
            if call is not None:
                result = self.tool.execute(call)
                payload = call.payload if isinstance(call.payload, dict) else {}
                info.update(
                    use_tool=True, tool_error=bool(result.error), tool_name=payload.get("name")
                )
                return self._end_turn(result.observation, 0.0, False, info)
        except Exception as exc:  # noqa: BLE001 - the Tool contract says never; do not crash
            info.update(use_tool=True, tool_error=True, tool_name=None)
            return self._end_turn(_tool_failure(exc), 0.0, False, info)
        answer = extract_answer(action) if isinstance(action, str) else None
        if answer is None:
            info.update(format_error=True, invalid_action=True)
            terminated = self.format_error == "terminate"
            obs = (
                "Format error: no tool call and no final answer found. Call a tool with "
                '<tool_call>{"name": ..., "arguments": {...}}</tool_call>, or give your final '
                "answer as <answer>...</answer>."
            )
            return self._end_turn(obs, self.format_penalty, terminated, info)
        info["parsed_action"] = answer[:MAX_ANSWER_CHARS]
        success = self._grade(answer)
        info["success"] = success
        if self.task.writes:
            verdict = (
                "The database is in the requested state."
                if success
                else "The database is not in the requested state."
            )
        else:
            verdict = "Your answer is correct." if success else "Your answer is incorrect."
        return self._end_turn(
            f"{verdict} The episode is over.", 1.0 if success else 0.0, True, info
        )

    def close(self) -> None:
        """Stop the MCP server and remove the temp dir. Safe to call twice."""
        self._live = False
        self._finalizer()

    def sample_random_action(self) -> str:
        """A random tool call (reads and the odd stock update), answer or malformed turn."""
        rng = self.rng
        kind = rng.randrange(10)
        if kind == 0:
            return tool_call("list_tables")
        if kind == 1:
            return tool_call("describe_table", table=rng.choice((*_TABLES, "suppliers")))
        if kind == 2:
            return tool_call("get_product", sku=rng.choice(self._skus))
        if kind == 3:
            return tool_call("get_customer", customer_id=rng.randint(1, 20))
        if kind == 4:
            return tool_call("get_order", order_id=rng.randint(1, 40))
        if kind == 5:
            return tool_call("query", sql=f"SELECT COUNT(*) AS n FROM {rng.choice(_TABLES)}")
        if kind == 6:
            return tool_call(
                "update_stock", sku=rng.choice(self._skus), quantity=rng.randint(0, 50)
            )
        if kind == 7:
            return final_answer(rng.randint(0, 5000))
        if kind == 8:
            return final_answer(rng.choice(("Lisbon", "pending", "BK-101", "done")))
        return "Let me think about which table to look at first."

    def state_summary(self) -> str | None:
        if self.instance is None:
            return None
        return f"Task: {self.instance.prompt} Turn {self.turn}/{self.max_turns}."

    # --- internals -----------------------------------------------------------------------
    def _restore_database(self) -> None:
        # A journal left by an interrupted write would be replayed into the new file.
        for suffix in ("-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.db_path + suffix)
        fresh = self.db_path + ".next"
        shutil.copyfile(self.seed_path, fresh)
        os.replace(fresh, self.db_path)

    def _instructions(self) -> str:
        assert self.task is not None and self.instance is not None
        if self._tools_text is None:  # starts the server at the first reset
            self._tools_text = self.tool.instruction()
        if self.task.writes:
            finish = (
                "Make the change with the tools. When you are done, reply with "
                "<answer>done</answer>; the final database is then checked (the requested "
                "change and nothing else)."
            )
        else:
            finish = (
                "Find the answer with the tools, then reply with your final answer alone "
                "inside <answer></answer> (numbers as plain digits, e.g. <answer>1234</answer>)."
            )
        return (
            "You operate a small online shop through its MCP tools: a SQLite database of "
            "customers, products, orders and order items (prices are integer cents).\n\n"
            f"Task: {self.instance.prompt}\n\n{finish} You have {self.max_turns} turns in "
            "all, tool calls included; one tool call per turn.\n\n" + self._tools_text
        )

    def _grade(self, answer: str) -> bool:
        assert self.task is not None and self.instance is not None
        if not self.task.writes:
            if len(answer) > MAX_ANSWER_CHARS or self.instance.answer is None:
                return False
            return answers_match(answer, self.instance.answer)
        expected = sqlite3.connect(":memory:")
        final = sqlite3.connect(_readonly_uri(self.db_path), uri=True)
        try:
            self._seed_conn.backup(expected)
            self.task.apply(expected, self.instance)
            expected.commit()
            return table_dump(final) == table_dump(expected)
        finally:
            expected.close()
            final.close()

    def _end_turn(self, obs: str, reward: float, terminated: bool, info: dict[str, Any]):
        truncated = not terminated and self.turn >= self.max_turns
        if truncated:
            obs = f"{obs}\n\nThe turn limit ({self.max_turns}) is reached; the episode is over."
        if terminated or truncated:
            self._live = False
        return obs, reward, terminated, truncated, info
