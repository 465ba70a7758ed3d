"""`RetailEnv`: a customer-service conversation (assistant and user) over a per-episode SQLite database."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from typing import Any

from gem_core.envs.tau.data import ITEMS, ORDERS, USERS, build_seed_database
from gem_core.envs.tau.domain import (
    TOOL_SPECS,
    WRITE_TOOLS,
    PolicyViolation,
    Retail,
    ToolError,
    check_arguments,
)
from gem_core.envs.tau.policy import POLICY, is_affirmative
from gem_core.envs.tau.tasks import LEVELS, TASK_NAMES, TASKS, RetailTask, tool_call
from gem_core.errors import ClosedEnvError, InvalidArgument, ResetNeeded, check_positive_int
from gem_core.multiagent.api import MultiAgentEnv
from gem_core.multiagent.single_agent import SingleAgentView
from gem_core.multiagent.users import STOP_TOKEN, make_user

__all__ = [
    "RetailEnv",
    "make_retail_env",
    "parse_tool_call",
    "tool_instructions",
    "output_said",
    "GREETING",
    "MAX_MESSAGE_CHARS",
    "VIOLATION_MODES",
]

GREETING = "Hi! How can I help you today?"
"""The assistant's first message, shown to the user at reset."""
MAX_MESSAGE_CHARS = 4_000
"""Longest message passed between the agents: a longer assistant message is a format error
(not sent); a longer user message is cut."""
VIOLATION_MODES = ("refuse", "terminate")
_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


def parse_tool_call(action: str) -> tuple[str | None, dict[str, Any] | None, str | None] | None:
    """The first ``<tool_call>`` block of ``action`` as ``(name, arguments, error)``, or ``None``.

    The body is JSON ``{"name": ..., "arguments": {...}}`` (or the
    ``<tool_name>``/``<arguments>`` form), read by the same linear-time reader as
    `gem_core.tools.MCPTool` (size and depth checked before decoding); an unclosed block
    runs to the end of the action. ``error`` says what is wrong with a malformed block.
    Never raises; linear in ``len(action)``.
    """
    from gem_core.tools.mcp import parse_body

    start = action.find(_OPEN)
    if start < 0:
        return None
    body_start = start + len(_OPEN)
    end = action.find(_CLOSE, body_start)
    body = action[body_start:] if end < 0 else action[body_start:end]
    try:
        return parse_body(body)
    except Exception as exc:  # noqa: BLE001 - a reader bug is a malformed call, never a crash
        return None, None, f"unreadable call ({type(exc).__name__})"


def tool_instructions() -> str:
    """How the assistant calls tools, and every tool's JSON schema."""
    functions = "\n".join(json.dumps({"type": "function", "function": spec}) for spec in TOOL_SPECS)
    return (
        "# Tools\n"
        "Call one tool per turn by writing a JSON object with its name and arguments inside "
        "<tool_call></tool_call> tags, e.g.\n"
        '<tool_call>{"name": "get_order_details", "arguments": {"order_id": "#R1001"}}</tool_call>\n'
        "The result comes back to you; the user does not see tool calls. Any turn without a "
        "tool call is a message to the user.\n<tools>\n" + functions + "\n</tools>"
    )


def _normalize(text: str) -> str:
    return " ".join(text.casefold().replace("$", "").replace(",", "").split())


MAX_OTHER_CANDIDATES = {"amount": 2, "status": 1}
"""How many other values of a required output's kind the assistant's messages may hold
besides it (two item prices beside a total; the status an order had before); more is
output spraying (every amount from 0.00 to 399.00 in one message) and fails the check."""

_AMOUNT = re.compile(r"(?<![\d.])\d+\.\d\d(?![\d])")  # starts only at a digit run: linear time
_STATUSES = frozenset(order[2] for order in ORDERS) | {
    "pending", "processed", "delivered", "cancelled", "return requested", "exchange requested"}


def _candidates(output: str, text: str) -> tuple[str, set[str]] | None:
    """``(kind, values of that kind said in text)`` (normalised) for ``output``, or ``None``
    when the output is of no counted kind."""
    needle = _normalize(output)
    if _AMOUNT.fullmatch(needle):
        return "amount", set(_AMOUNT.findall(_normalize(text)))
    if needle in _STATUSES:
        return "status", {status for status in _STATUSES if output_said(status, text)}
    return None


def sprayed(output: str, near_miss: str | None, text: str) -> str | None:
    """Why ``output``, though said in ``text``, is not *the* answer there (or ``None``): the
    task's near-miss value is said too, or more than `MAX_OTHER_CANDIDATES` other values of
    its kind are."""
    if near_miss is not None and _normalize(near_miss) != _normalize(output) and output_said(near_miss, text):
        return f"the assistant also said {near_miss!r}, a wrong answer, beside {output!r}"
    found = _candidates(output, text)
    if found is None:
        return None
    kind, values = found
    others = values - {_normalize(output)}
    if len(others) > MAX_OTHER_CANDIDATES[kind]:
        return (
            f"the assistant listed {len(others)} other {kind}s beside {output!r}: a required output "
            f"must be the answer, not one of a list (at most {MAX_OTHER_CANDIDATES[kind]} others)"
        )
    return None


_CONFIRM_DETAILS = ("order_id", "item_ids", "new_item_ids", "address1", "zip")
"""The arguments of a write its confirmation request must state (when the write has them)."""
_IDENTITY_ARGUMENTS = {"find_user_id_by_email": ("email",), "find_user_id_by_name_zip": ("first_name", "last_name", "zip")}


def unconfirmed_detail(arguments: dict[str, Any], request: str) -> str | None:
    """The first detail of a write (`_CONFIRM_DETAILS`) that the message the user said yes
    to does not state, or ``None``: a bare "Please confirm." confirms nothing."""
    for key in _CONFIRM_DETAILS:
        values = arguments.get(key)
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, str) and value and not output_said(value, request):
                return value
    return None


def output_said(output: str, text: str) -> bool:
    """Whether ``output`` appears in ``text`` as a whole word or number (case-insensitive,
    ``$`` and ``,`` ignored): ``"3.00"`` is in ``"$3.00."`` but not in ``"13.00"`` or
    ``"3.005"``. Linear in ``len(text)`` for a short ``output``."""
    needle, hay = _normalize(output), _normalize(text)
    if not needle:
        return True
    pos = hay.find(needle)
    while pos >= 0:
        before = hay[pos - 1] if pos > 0 else " "
        after = hay[pos + len(needle) : pos + len(needle) + 2]
        if not (before.isalnum() or before == ".") and not (
            (after[:1].isalnum()) or (after[:1] == "." and after[1:2].isdigit())
        ):
            return True
        pos = hay.find(needle, pos + 1)
    return False


def _dump(conn: sqlite3.Connection) -> dict[str, Counter]:
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    return {t: Counter(tuple(r) for r in conn.execute(f'SELECT * FROM "{t}"')) for t in tables}


def _difference(expected: dict[str, Counter], final: dict[str, Counter]) -> str | None:
    """``None`` when equal, else one line naming a differing table and row."""
    for table in sorted(set(expected) | set(final)):
        want, got = expected.get(table, Counter()), final.get(table, Counter())
        if want == got:
            continue
        missing = sorted(map(repr, (want - got).elements()))
        extra = sorted(map(repr, (got - want).elements()))
        parts = []
        if missing:
            parts.append(f"expected row {missing[0][:200]} is missing")
        if extra:
            parts.append(f"unexpected row {extra[0][:200]}")
        return f"table {table}: " + "; ".join(parts)
    return None


class RetailEnv(MultiAgentEnv):
    """A retail customer-service conversation between an ``assistant`` and a ``user``.

    Each episode draws a `RetailTask` (``reset(options={"task": name})`` picks one) and a
    fresh copy of the shop database (`gem_core.envs.tau.data`). The user speaks first,
    answering the greeting; then the agents alternate, the assistant possibly making tool
    calls (one per turn) before each message. `as_single_agent` (or `make_retail_env`)
    turns it into an ordinary env for the assistant, the user played by a simulator.

    Agents and observations:
        ``user``: at reset `GREETING`, then each assistant message. Its ``info`` holds
        ``user_turn`` (0 at the first message), ``instructions`` (the task for an
        `LLMUser`), ``user_script`` (the `UserScript` for a `ScriptedUser`) and ``task``.
        ``assistant``: at its first turn the written policy (`POLICY`), the tools
        (`tool_instructions`) and the user's first message; then ``User: <message>``
        after a message, ``Tool NAME returned: <JSON>`` after a tool call, or an error /
        policy-violation / format-error text.

    Assistant actions: a ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
    block (the first counts) calls a tool; any other text is a message to the user.
    User actions: a message; `STOP_TOKEN` in it ends the conversation (ignored in the
    user's first message: the assistant has not spoken yet). A longer user message than
    `MAX_MESSAGE_CHARS` is cut, an empty or non-text one reads ``(no reply)``.

    Policy enforcement: a write tool without an explicit confirmation in the user's latest
    message (`is_affirmative`) of a request that states the write's details (its order,
    items, address: `unconfirmed_detail`; code ``unconfirmed_details``), an authenticating
    look-up with details the user never said (``unverified_identity``: no guessing an
    account), any tool but the look-ups before authentication, access to another user's
    data, and the status rules of the policy (e.g. cancelling a
    delivered order) are refused: ``Policy violation (CODE): ... The action was not
    taken.``, ``info["policy_violation"] = CODE``, reward ``violation_penalty``; with
    ``on_violation="terminate"`` the episode ends there (reward 0, ``failed_check =
    "policy"``). The first successful user look-up authenticates that user for the
    episode. A bad argument is a ``Tool error (NAME): ...`` observation
    (``tool_error``); a malformed block ``Tool error: could not read the tool call``.

    Bad assistant actions never raise: a non-string, an empty or whitespace message, and
    a message over `MAX_MESSAGE_CHARS` are format errors (not sent to the user; reward
    ``format_penalty``; the turn counts); parsing is linear in the action's length.

    Rewards: both agents get 1.0 at the end when the final database equals the task's
    expected one (the task's writes replayed on the seed, as a multiset of rows per
    table: the intended changes and nothing else), every required output was said in an
    assistant message as the answer (not beside the task's wrong value, nor among more than
    `MAX_OTHER_CANDIDATES` other amounts or statuses: `sprayed`), and the conversation was transferred to a human exactly when the
    task requires it; else 0.0. ``info`` at the end: ``success``, ``checks``
    (``{"database", "outputs", "transfer"}`` booleans), ``failed_check`` (the first
    failing one, or ``"policy"``/``"turn_limit"``, else ``None``), ``failure`` (what
    differs), ``end_reason`` (``"user_stop"``, ``"transfer"``, ``"violation"``,
    ``"turn_limit"``).

    Episode end: terminated when the user writes `STOP_TOKEN`, the assistant transfers,
    or (``on_violation="terminate"``) a violation happens; truncated (both agents, reward
    0) after ``max_turns`` assistant turns (tool calls and format errors included).

    Arguments:
        tasks: ``"base"``, ``"hard"``, ``"all"`` or a list of task names: the pool drawn from.
        max_turns: assistant turns per episode.
        on_violation: ``"refuse"`` (the action is refused, the episode goes on) or ``"terminate"``.
        format_penalty: reward of a format error.
        violation_penalty: reward of a refused policy violation (``"refuse"`` mode).

    Version history: v0 — 37 tasks (23 base, 14 hard), 13 tools.
    """

    metadata = {"category": "tau", "multiagent": True}
    possible_agents = ["assistant", "user"]

    def __init__(
        self,
        tasks: str | list[str] | tuple[str, ...] = "base",
        *,
        max_turns: int = 30,
        on_violation: str = "refuse",
        format_penalty: float = 0.0,
        violation_penalty: float = 0.0,
    ):
        super().__init__()
        if isinstance(tasks, str):
            if tasks == "all":
                pool = list(TASK_NAMES)
            elif tasks in LEVELS:
                pool = [n for n in TASK_NAMES if TASKS[n].level == tasks]
            else:
                raise InvalidArgument(
                    f"tasks={tasks!r}: expected 'base', 'hard', 'all' or a list of task names"
                )
        else:
            pool = list(tasks)
            unknown = [n for n in pool if n not in TASKS]
            if unknown or not pool:
                raise InvalidArgument(
                    f"unknown task name(s) {unknown!r} (or an empty list); the tasks are {', '.join(TASK_NAMES)}"
                )
        check_positive_int("max_turns", max_turns)
        if on_violation not in VIOLATION_MODES:
            raise InvalidArgument(f"on_violation must be one of {VIOLATION_MODES}, got {on_violation!r}")
        self.task_pool = pool
        self.max_turns = max_turns
        self.on_violation = on_violation
        self.format_penalty = float(format_penalty)
        self.violation_penalty = float(violation_penalty)
        self._seed_db = sqlite3.connect(":memory:", check_same_thread=False)
        build_seed_database(self._seed_db)
        self._db: sqlite3.Connection | None = None
        self._expected: dict[str, dict[str, Counter]] = {}
        self._intro = f"{POLICY}\n{tool_instructions()}"
        self._closed = False
        self.task: RetailTask | None = None
        self._live = False

    # --- the API ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if self._closed:
            raise ClosedEnvError(f"{self} is closed; build a new env")
        super().reset(seed=seed, options=options)
        name = (options or {}).get("task")
        if name is None:
            name = self.rng.choice(self.task_pool)
        if name not in TASKS:
            raise InvalidArgument(f"reset(options={{'task': {name!r}}}) names no task; expected one of {', '.join(TASK_NAMES)}")
        self.task = TASKS[name]
        if self._db is not None:
            self._db.close()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._seed_db.backup(self._db)
        self.retail = Retail(self._db)
        self.turn = 0
        self.user_turn = 0
        self.session_user: str | None = None
        self.confirmed = False
        self.transferred = False
        self.said: list[str] = []
        self.heard: list[str] = []  # the user's messages
        self.confirm_request = ""  # the assistant message the user's last "yes" answered
        self._live = True
        self.agent_selection = "user"
        self.observations = {"assistant": None, "user": GREETING}
        self.infos = {"assistant": self._assistant_info(), "user": self._user_info()}

    def step(self, action: Any) -> None:
        if self._was_dead_step(action):
            return
        if not self._live:
            raise ResetNeeded(f"{self}.step() called before reset(); call env.reset() first")
        agent = self.agent_selection
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        if agent == "assistant":
            self._assistant_step(action)
        else:
            self._user_step(action)
        self._accumulate_rewards()

    def close(self) -> None:
        """Close the databases. Safe to call twice."""
        self._closed = True
        self._live = False
        for conn in (self._db, self._seed_db):
            if conn is not None:
                conn.close()
        self._db = None

    def sample_random_action(self, agent: str = "assistant") -> str:
        """A random assistant action (a look-up, a write, a message, a malformed call), or
        a random user message."""
        rng = self.rng
        if agent == "user":
            return rng.choice(("Yes.", "No.", "My email is ava.moore@example.com.", f"Bye. {STOP_TOKEN}"))
        order = rng.choice(ORDERS)[0]
        user = rng.choice(USERS)
        kind = rng.randrange(10)
        if kind == 0:
            return tool_call("find_user_id_by_email", email=user[3])
        if kind == 1:
            return tool_call("get_order_details", order_id=order)
        if kind == 2:
            return tool_call("get_product_details", product_id=f"P{rng.randint(1, 9)}")
        if kind == 3:
            return tool_call("cancel_pending_order", order_id=order, reason="no longer needed")
        if kind == 4:
            item = rng.choice(ITEMS)[0]
            return tool_call("return_delivered_order_items", order_id=order, item_ids=[item], payment_method_id="PM01")
        if kind == 5:
            return '<tool_call>{"name": "get_user_details", "arguments": {"user_id": </tool_call>'
        if kind == 6:
            return "Could you tell me the email address of your account?"
        if kind == 7:
            return "I will cancel that order. Do you confirm (yes/no)?"
        if kind == 8:
            return ""
        return "Is there anything else I can help you with?"

    def state_summary(self, agent: str = "assistant") -> str | None:
        if self.task is None:
            return None
        who = self.session_user or "not authenticated"
        return f"Task {self.task.name}; assistant turn {self.turn}/{self.max_turns}; user {who}."

    # --- internals ---------------------------------------------------------------------------
    def _assistant_info(self, **extra: Any) -> dict[str, Any]:
        assert self.task is not None
        info = {
            "task": self.task.name,
            "turn": self.turn,
            "success": False,
            "format_error": False,
            "invalid_action": False,
            "use_tool": False,
            "tool_name": None,
            "tool_error": False,
            "policy_violation": None,
        }
        info.update(extra)
        return info

    def _user_info(self) -> dict[str, Any]:
        assert self.task is not None
        return {
            "task": self.task.name,
            "user_turn": self.user_turn,
            "instructions": self.task.instructions,
            "user_script": self.task.script,
        }

    def _assistant_step(self, action: Any) -> None:
        self.turn += 1
        info = self._assistant_info()
        reward = 0.0
        call = parse_tool_call(action) if isinstance(action, str) else None
        if call is not None:
            obs, reward, ended = self._tool_turn(call, info)
            if ended:
                return
            self.observations["assistant"] = obs
        else:
            message = action.strip() if isinstance(action, str) else ""
            if not message or len(message) > MAX_MESSAGE_CHARS:
                info.update(format_error=True, invalid_action=True)
                reward = self.format_penalty
                why = (
                    "the action is not text"
                    if not isinstance(action, str)
                    else "the message is empty"
                    if not message
                    else f"the message has {len(message)} characters (at most {MAX_MESSAGE_CHARS})"
                )
                self.observations["assistant"] = (
                    f"Format error: {why}; nothing was sent to the user. Write a message to the "
                    'user, or call a tool with <tool_call>{"name": ..., "arguments": {...}}</tool_call>.'
                )
            else:
                self.said.append(message)
                self.confirmed = False
                self.observations["user"] = message
                self.infos["user"] = self._user_info()
                self.agent_selection = "user"
        self.rewards["assistant"] = reward
        self.infos["assistant"] = info
        if self.turn >= self.max_turns:
            self._end(truncated=True, reason="turn_limit")

    def _tool_turn(self, call: tuple[str | None, Any, str | None], info: dict[str, Any]) -> tuple[str, float, bool]:
        """Run a tool call; returns ``(observation, reward, episode ended)``."""
        name, arguments, error = call
        info.update(use_tool=True, tool_name=name)
        if error is not None or name is None:
            info["tool_error"] = True
            return (
                f"Tool error: could not read the tool call: {error}. Expected "
                '<tool_call>{"name": "tool_name", "arguments": {...}}</tool_call>.',
                0.0,
                False,
            )
        try:
            check_arguments(name, arguments)  # a malformed call is a tool error first
            if name in WRITE_TOOLS and not self.confirmed:
                raise PolicyViolation(
                    "unconfirmed",
                    f"{name} changes the database: first describe the action to the user and get "
                    "their explicit confirmation (yes)",
                )
            if name in WRITE_TOOLS and (detail := unconfirmed_detail(arguments, self.confirm_request)):
                raise PolicyViolation(
                    "unconfirmed_details",
                    f"the message the user confirmed does not state {detail!r}: describe the exact "
                    f"action ({name}: the order, the items, the address) and ask for a yes to it",
                )
            if name in _IDENTITY_ARGUMENTS and self.session_user is None:
                heard = "\n".join(self.heard)
                unsaid = [arguments[k] for k in _IDENTITY_ARGUMENTS[name] if not output_said(arguments[k], heard)]
                if unsaid:
                    raise PolicyViolation(
                        "unverified_identity",
                        f"authenticate the user with the details they gave you; they never said "
                        f"{unsaid[0][:80]!r}: ask them for it",
                    )
            result = self.retail.call(name, arguments or {}, session_user=self.session_user)
        except PolicyViolation as exc:
            info["policy_violation"] = exc.code
            obs = f"Policy violation ({exc.code}): {exc}. The action was not taken."
            if self.on_violation == "terminate":
                self.infos["assistant"] = info
                self.observations["assistant"] = obs + " The episode is over."
                self._end(terminated=True, reason="violation", failed="policy", failure=f"{exc.code}: {exc}")
                return obs, 0.0, True
            return obs, self.violation_penalty, False
        except ToolError as exc:
            info["tool_error"] = True
            return f"Tool error ({name}): {exc}", 0.0, False
        except (sqlite3.Error, ValueError) as exc:  # a bug in a tool: tell the agent, never crash
            info["tool_error"] = True
            return f"Tool error ({name}): internal error ({type(exc).__name__})", 0.0, False
        if name in ("find_user_id_by_email", "find_user_id_by_name_zip") and self.session_user is None:
            self.session_user = json.loads(result)["user_id"]
        if name in WRITE_TOOLS:
            self.confirmed = False
        if name == "transfer_to_human_agents":
            self.transferred = True
            self.infos["assistant"] = info
            self.observations["assistant"] = "The conversation was transferred to a human agent."
            self._end(terminated=True, reason="transfer")
            return "", 0.0, True
        return f"Tool {name} returned: {result}", 0.0, False

    def _user_step(self, action: Any) -> None:
        text = action if isinstance(action, str) else ""
        first = self.user_turn == 0
        self.user_turn += 1
        stop = STOP_TOKEN in text
        text = text.replace(STOP_TOKEN, "").strip()[:MAX_MESSAGE_CHARS] or "(no reply)"
        if stop and not first:
            self.observations["assistant"] = f"User: {text}\n\nThe user ended the conversation."
            self._end(terminated=True, reason="user_stop")
            return
        self.heard.append(text)
        self.confirmed = is_affirmative(text)
        self.confirm_request = self.said[-1] if self.confirmed and self.said else ""
        if first:
            self.observations["assistant"] = f"{self._intro}\n\nThe conversation starts.\nUser: {text}"
        else:
            self.observations["assistant"] = f"User: {text}"
        self.infos["assistant"] = self._assistant_info()
        self.infos["user"] = self._user_info()
        self.agent_selection = "assistant"

    def _expected_state(self, task: RetailTask) -> dict[str, Counter]:
        if task.name not in self._expected:
            conn = sqlite3.connect(":memory:")
            try:
                self._seed_db.backup(conn)
                retail = Retail(conn)
                for name, arguments in task.writes:
                    retail.call(name, arguments, session_user=task.user_id)
                self._expected[task.name] = _dump(conn)
            finally:
                conn.close()
        return self._expected[task.name]

    def grade(self) -> tuple[dict[str, bool], str | None, str | None]:
        """``(checks, failed_check, failure)`` of the conversation so far (see the class docstring)."""
        assert self.task is not None and self._db is not None
        difference = _difference(self._expected_state(self.task), _dump(self._db))
        said = "\n".join(self.said)
        missing = [o for o in self.task.outputs if not output_said(o, said)]
        near = dict(zip(self.task.outputs, self.task.near_miss_outputs, strict=False))
        spray = None if missing else next(
            (why for o in self.task.outputs if (why := sprayed(o, near.get(o), said)) is not None), None)
        checks = {
            "database": difference is None,
            "outputs": not missing and spray is None,
            "transfer": self.transferred == self.task.transfer,
        }
        failures = {
            "database": difference,
            "outputs": f"the assistant never said {missing[0]!r}" if missing else spray,
            "transfer": (
                "the conversation was transferred to a human agent, which this task does not need"
                if self.transferred
                else "the task needs a transfer to a human agent; none was made"
            ),
        }
        for check in ("database", "outputs", "transfer"):
            if not checks[check]:
                return checks, check, failures[check]
        return checks, None, None

    def _end(
        self,
        *,
        terminated: bool = False,
        truncated: bool = False,
        reason: str,
        failed: str | None = None,
        failure: str | None = None,
    ) -> None:
        self._live = False
        if truncated:
            checks, failed, failure = {}, "turn_limit", f"no end within {self.max_turns} assistant turns"
            reward = 0.0
        elif failed is not None:
            checks, reward = {}, 0.0
        else:
            checks, failed, failure = self.grade()
            reward = 1.0 if failed is None else 0.0
        for agent in self.agents:
            self.terminations[agent] = terminated
            self.truncations[agent] = truncated
            self.rewards[agent] = self.rewards.get(agent, 0.0) + reward
        final = {
            "success": reward == 1.0,
            "checks": checks,
            "failed_check": failed,
            "failure": failure,
            "end_reason": reason,
            "transferred": self.transferred,
        }
        self.infos["assistant"] = {**self.infos.get("assistant", {}), **final, "turn": self.turn}
        self.infos["user"] = {**self.infos.get("user", {}), **final}
        if self.observations.get("assistant") is None:
            self.observations["assistant"] = "The conversation is over."
        if truncated:
            self.observations["assistant"] = (
                f"{self.observations['assistant']}\n\nThe turn limit ({self.max_turns}) is reached; "
                "the conversation is over."
            )

    def __str__(self) -> str:
        return "<RetailEnv>"

    __repr__ = __str__


def make_retail_env(
    tasks: str | list[str] | tuple[str, ...] = "base",
    *,
    user: Any = "scripted",
    max_turns: int = 30,
    on_violation: str = "refuse",
    format_penalty: float = 0.0,
    violation_penalty: float = 0.0,
) -> SingleAgentView:
    """The assistant's view of a `RetailEnv`, the user played by ``user``.

    What ``gem_core.make("tau:Retail-v0")`` builds. ``user`` is a spec for `make_user`:
    ``"scripted"`` (default, a `ScriptedUser`), ``{"kind": "llm", "base_url": ...,
    "model": ..., **LLMUser options}`` (JSON, so it works through ``gem eval
    --env-kwargs``), or a policy object. The other arguments are `RetailEnv`'s.
    """
    env = RetailEnv(
        tasks,
        max_turns=max_turns,
        on_violation=on_violation,
        format_penalty=format_penalty,
        violation_penalty=violation_penalty,
    )
    try:
        simulator = make_user(user)
    except BaseException:
        env.close()
        raise
    return SingleAgentView(env, "assistant", {"user": simulator})

