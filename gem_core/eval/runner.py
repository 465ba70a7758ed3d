"""`evaluate`: run episodes of registered envs against an OpenAI-compatible endpoint and record them."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import json
import os
import pickle
import platform
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_core.core import Env, ObservationWrapper, observation_text
from gem_core.errors import DependencyNotInstalled, Error, InvalidArgument, check_positive_int
from gem_core.eval import records as rec
from gem_core.eval import user_sim
from gem_core.eval.config import CONFIG_DEFAULTS, MAX_CONSECUTIVE_ERRORS, PINNED, EvalConfig
from gem_core.eval.stats import summarize, summary_markdown, summary_table

__all__ = [
    "EvalConfig",
    "EvalResult",
    "EndpointUnreachable",
    "EndpointIncompatible",
    "evaluate",
    "check_endpoint",
    "build_env",
    "API_MODES",
    "WRAPPER_NAMES",
    "TOOL_NAMES",
    "CONFIG_DEFAULTS",
    "MAX_CONSECUTIVE_ERRORS",
    "TextOnlyObservations",
]

#: Endpoint modes for ``api=`` / ``--api``: token ids to ``/v1/completions`` (the
#: default: token-exact, needs the served model's tokenizer locally) or chat messages to
#: ``/v1/chat/completions`` (text in, text out: no tokenizer, any OpenAI-compatible API;
#: observation images go as ``image_url`` content parts). Envs with images need ``"chat"``.
API_MODES = ("completions", "chat")

#: Named wrappers for ``wrappers=`` / ``--wrappers``: ``NAME[:ARG]``.
WRAPPER_NAMES = ("history",)
#: Named tools for ``tools=`` / ``--tools``: ``python``, ``search[:INDEX]``,
#: ``mcp:CONFIG`` (a JSON file of MCP servers, see `mcp_servers`).
TOOL_NAMES = ("python", "search", "mcp")

# The settings a resume must repeat (see `EvalConfig`).
_PINNED = PINNED
# The environment variables that select the rows of dataset-backed envs (gem_core.data).
_DATA_VARS = ("GEM_DATA", "GEM_DATA_DIR")


class EndpointUnreachable(Error, ConnectionError):
    """The model endpoint could not be reached (no server at the URL, DNS failure, timeout)."""


class EndpointIncompatible(InvalidArgument):
    """The endpoint answered the probe request, but not as the chosen ``api`` mode needs
    (e.g. no token-id completions: use ``api="chat"``; a rejected key or body field)."""


@dataclass
class EvalResult:
    """What `evaluate` returns.

    Attributes:
        records: one dict per finished episode (see `gem_core.eval.episode_record`),
            ordered by env (as given) then episode index; on a resumed run, earlier
            episodes included.
        summary: ``{env_id: row}`` (see `gem_core.eval.summarize`).
        manifest: the run's manifest (settings, versions, seeds, command lines, data);
            ``manifest["status"]`` is ``complete`` (every episode measured),
            ``complete_with_errors`` (every episode recorded, some with an error),
            ``failed`` (stopped after ``max_consecutive_errors`` errored episodes, or
            nothing could be measured; ``manifest["error"]`` says why), ``interrupted``
            or ``partial``.
        out_dir: where the run was written (``None``: nothing written).
        interrupted: the run was stopped (Ctrl-C) before every episode finished.
        ran: episodes run by this call (not counting those resumed from disk).
        missing: ``(env_id, index)`` of the wanted episodes with no record.
        failed: the run could not measure (status ``failed``).
        errors: ``[(error text, episodes)]`` of the errored records, most frequent first.
    """

    records: list[dict[str, Any]]
    summary: dict[str, dict[str, Any]]
    manifest: dict[str, Any]
    out_dir: Path | None = None
    interrupted: bool = False
    ran: int = 0
    missing: list[tuple[str, int]] = field(default_factory=list)
    failed: bool = False
    errors: list[tuple[str, int]] = field(default_factory=list)

    def table(self) -> str:
        """The summary as a plain-text table (with the end-reason breakdown)."""
        return summary_table(self.summary)


def check_endpoint(base_url: str, timeout: float = 5.0, *, flag: str = "--base-url",
                   what: str = "model endpoint") -> None:
    """Check that something answers HTTP at ``base_url`` (``GET {base_url}/models``).

    Any HTTP answer, even an error status, counts as reachable. ``flag`` and ``what``
    name the setting in the message (the user simulator's: ``--user-base-url``).

    Raises:
        EndpointUnreachable: connection refused, unknown host or timeout; the message
            names the URL.
    """
    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            resp.read(1 << 16)
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointUnreachable(
            f"cannot reach the {what} at {base_url} (GET {url} failed: "
            f"{type(reason).__name__}: {reason}). Start an OpenAI-compatible server there "
            f"(e.g. `vllm serve MODEL --port 8000` for http://127.0.0.1:8000/v1) or fix {flag}."
        ) from None


def _parse_named(item: str, names: Sequence[str], what: str) -> tuple[str, str | None]:
    name, _, arg = item.partition(":")
    name = name.strip().lower()
    if name not in names:
        raise InvalidArgument(
            f"unknown {what} {item!r}: expected one of {', '.join(names)}"
            + (" (as NAME[:ARG], e.g. history:concat)" if what == "wrapper" else "")
        )
    return name, (arg or None)


def _wrap(env: Env, item: str) -> Env:
    name, arg = _parse_named(item, WRAPPER_NAMES, "wrapper")
    from gem_core.wrappers import HistoryWrapper

    return HistoryWrapper(env, format=arg or "concat")


def mcp_servers(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The MCP servers of a ``--tools mcp:CONFIG`` file: ``{name: MCPTool keyword arguments}``.

    The file is JSON in the common ``mcpServers`` layout (also accepted without the
    outer key)::

        {"mcpServers": {
            "shop": {"command": "python", "args": ["-m", "my_server"], "env": {"K": "V"}},
            "docs": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "..."}}}}

    Per server: ``command`` (+ ``args``, ``env``, ``cwd``) for stdio or ``url`` (+
    ``headers``) for streamable HTTP, and optionally ``timeout``, ``connect_timeout``,
    ``allowed_tools``. One `ToolEnvWrapper` holds them all and routes each call to the
    server that has the tool.

    Raises:
        InvalidArgument: the file is missing, not JSON, or a server entry is malformed.
    """
    where = f"--tools mcp:{path}"
    try:
        data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidArgument(
            f"{where}: cannot read the MCP config ({type(exc).__name__}: {exc}); expected a "
            'JSON file like {"mcpServers": {"NAME": {"command": "...", "args": [...]}}}'
        ) from None
    except ValueError as exc:
        raise InvalidArgument(f"{where}: the MCP config is not valid JSON ({exc})") from None
    servers = data.get("mcpServers", data) if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise InvalidArgument(
            f"{where}: expected a JSON object of servers, e.g. "
            '{"mcpServers": {"NAME": {"command": "...", "args": [...]}}}, got '
            f"{type(servers).__name__ if servers is not None else type(data).__name__}"
            + (" with no servers" if isinstance(servers, dict) else "")
        )
    allowed = {"command", "args", "env", "cwd", "url", "headers", "timeout", "connect_timeout",
               "allowed_tools"}
    out: dict[str, dict[str, Any]] = {}
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise InvalidArgument(f"{where}: server {name!r} must be a JSON object, got {type(entry).__name__}")
        unknown = sorted(set(entry) - allowed - {"type", "transport"})
        if unknown:
            raise InvalidArgument(
                f"{where}: server {name!r} has unknown field(s) {unknown}; expected some of "
                f"{sorted(allowed)}"
            )
        if ("command" in entry) == ("url" in entry):
            raise InvalidArgument(
                f"{where}: server {name!r} needs exactly one of \"command\" (stdio) or \"url\" "
                "(streamable HTTP)"
            )
        if "args" in entry and not (
            isinstance(entry["args"], list) and all(isinstance(a, str) for a in entry["args"])
        ):
            raise InvalidArgument(f"{where}: server {name!r}: \"args\" must be a list of strings")
        out[str(name)] = {k: v for k, v in entry.items() if k in allowed}
    return out


def _tools(item: str, sandbox: Any = None) -> list[Any]:
    """The tools one ``--tools`` item stands for (``mcp:CONFIG``: one per server)."""
    name, arg = _parse_named(item, TOOL_NAMES, "tool")
    if name == "python":
        from gem_core.tools import PythonCodeTool

        return [PythonCodeTool(sandbox=sandbox)]
    if name == "mcp":
        from gem_core.tools import MCPTool

        made: list[Any] = []
        try:
            for server, kwargs in mcp_servers(arg or "").items():
                made.append(MCPTool(name=f"mcp:{server}", **kwargs))
        except BaseException:
            for tool in made:
                tool.close()
            raise
        return made
    from gem_core.tools import SearchTool

    return [SearchTool(index=arg) if arg else SearchTool()]


def _check_tool(item: str) -> None:
    name, arg = _parse_named(item, TOOL_NAMES, "tool")
    if name == "mcp":
        if not arg:
            raise InvalidArgument(
                "--tools mcp needs a config file: mcp:CONFIG, e.g. --tools mcp:servers.json "
                '({"mcpServers": {"NAME": {"command": "...", "args": [...]}}})'
            )
        for server, kwargs in mcp_servers(arg).items():
            _check_stdio_command(f"--tools mcp:{arg}", server, kwargs)


def _check_stdio_command(where: str, server: str, kwargs: Mapping[str, Any]) -> None:
    """A stdio server's command must resolve (as the server's own PATH would find it) and its
    cwd exist: else every episode would fail on it, one by one, after the run began."""
    import shutil

    if "command" not in kwargs:
        return  # streamable HTTP: reached (and its failures reported) when the tool connects
    command = kwargs["command"]
    if not isinstance(command, str) or not command:
        raise InvalidArgument(f"{where}: server {server!r}: \"command\" must be a non-empty string, got {command!r}")
    cwd = kwargs.get("cwd")
    if cwd is not None and not Path(str(cwd)).expanduser().is_dir():
        raise InvalidArgument(f"{where}: server {server!r}: its cwd {cwd!r} is not a directory")
    env = kwargs.get("env") or {}
    path = env.get("PATH", os.environ.get("PATH")) if isinstance(env, dict) else os.environ.get("PATH")
    if os.sep in command:
        found = os.path.join(str(cwd), command) if cwd and not os.path.isabs(command) else command
        ok = os.path.isfile(found) and os.access(found, os.X_OK)
    else:
        ok = shutil.which(command, path=path) is not None
    if not ok:
        raise InvalidArgument(
            f"{where}: server {server!r}: its command {command!r} "
            + ("is not an executable file" if os.sep in command else "is not found on PATH")
            + "; fix \"command\" in the config (e.g. the full path of the server's executable, "
            "or \"python\" with \"args\": [\"-m\", \"my_server\"])"
        )


def build_env(
    env_id: str,
    *,
    wrappers: Sequence[str] = (),
    tools: Sequence[str] = (),
    max_tool_uses: int = 10,
    env_kwargs: Mapping[str, Any] | None = None,
    sandbox: Any = None,
) -> Env:
    """Build the env an evaluation runs: ``make(env_id)``, then tools, then wrappers.

    Args:
        env_id: a registered id.
        wrappers: named wrappers applied outermost, in order: ``history[:FORMAT]``
            (`gem_core.wrappers.HistoryWrapper`, default format ``concat``).
        tools: ``python`` (`PythonCodeTool`), ``search[:INDEX]`` (`SearchTool`) and/or
            ``mcp:CONFIG`` (one `MCPTool` per server of the file, see `mcp_servers`),
            run by one `ToolEnvWrapper` right around the env.
        max_tool_uses: the wrapper's per-episode tool-call limit.
        env_kwargs: constructor arguments (e.g. ``{"data_path": "sample"}``).
        sandbox: a `gem_core.sandbox.Sandbox` the python tool shares (not closed with
            the env); ``None``: the tool makes its own.
    """
    from gem_core.registration import make

    env = make(env_id, **dict(env_kwargs or {}))
    try:
        if tools:
            from gem_core.tools import ToolEnvWrapper

            made: list[Any] = []
            try:
                for t in tools:
                    made += _tools(t, sandbox)
            except BaseException:
                for tool in made:
                    tool.close()
                raise
            env = ToolEnvWrapper(env, made, max_tool_uses=max_tool_uses)
        for w in wrappers:
            env = _wrap(env, w)
    except BaseException:
        env.close()
        raise
    return env


def _load_tokenizer(name: str) -> Any:
    try:
        import transformers
    except ImportError:
        raise DependencyNotInstalled(
            "transformers", extra="rl", purpose="the tokenizer and chat template of `gem eval`"
        ) from None
    offline = None
    if not Path(name).expanduser().exists() and os.environ.get("HF_HUB_OFFLINE", "0") in ("", "0"):
        # A hub id: find out in seconds whether the hub answers (once per process, shared with
        # the datasets), instead of the hub library's retries (about a minute offline).
        from gem_core.data import go_offline_if_hub_unreachable

        offline = go_offline_if_hub_unreachable()
    try:
        if offline is not None:
            return transformers.AutoTokenizer.from_pretrained(name, local_files_only=True)
        return transformers.AutoTokenizer.from_pretrained(name)
    except Exception as exc:
        if offline is not None:
            raise InvalidArgument(
                f"could not load the tokenizer {name!r}: the hub is unreachable ({offline}; "
                "switched to offline mode) and it is not in the local cache. gem eval --api "
                "completions sends token ids, so it needs the served model's tokenizer: pass "
                "--tokenizer with a local directory, or use --api chat (no tokenizer)"
            ) from None
        raise InvalidArgument(
            f"could not load the tokenizer {name!r} ({type(exc).__name__}: {str(exc)[:300]}). "
            "gem eval --api completions sends token ids, so it needs the served model's "
            "tokenizer: pass --tokenizer with a local directory (or a hub id, when online), "
            "or use --api chat (chat messages to /v1/chat/completions, no tokenizer)"
        ) from None


def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return None


def _env_info(env_id: str) -> dict[str, Any]:
    from gem_core.registration import spec

    s = spec(env_id)
    return {
        "version": s.version,
        "variant": s.variant,
        "family": s.family,
        "entry_point": s.entry_point if isinstance(s.entry_point, str) else repr(s.entry_point),
        "kwargs": s.kwargs,
        "max_turns": s.max_turns,
        "offline": s.offline,
        "description": s.description,
    }


def _check_resume(old: Mapping[str, Any], new: Mapping[str, Any], out_dir: Path) -> None:
    # Runs from before --api were token-id runs; from before --extra-body sent none; from
    # before --no-request-seed sent seeds.
    old = {"api": "completions", "extra_body": {}, "request_seed": True, **old}
    diffs = [k for k in _PINNED if _canon(old.get(k)) != _canon(new.get(k))]
    if diffs:
        shown = "; ".join(f"{k}: run has {old.get(k)!r}, got {new.get(k)!r}" for k in diffs)
        raise InvalidArgument(
            f"cannot resume {out_dir} with different settings ({shown}). Resume with the "
            "run's own settings (`gem eval --resume --out DIR` takes them from its "
            "manifest) or write to a new --out directory"
        )


def _canon(value: Any) -> str:
    """A comparable form of a JSON-able value (as it reads back from the manifest)."""
    return json.dumps(value, sort_keys=True, default=str)


def _check_resume_environment(old: Mapping[str, Any], ids: Sequence[str], out_dir: Path) -> None:
    """Refuse a resume whose data-selecting variables or env registrations now differ."""
    pinned = old.get("data_env") or {}
    diffs = [
        f"{v}: run has {pinned.get(v)!r}, now {os.environ.get(v)!r}"
        for v in _DATA_VARS
        if v in pinned and pinned.get(v) != os.environ.get(v)
    ]
    if diffs:
        how = " ".join(
            f"{v}={pinned[v]}" if pinned.get(v) is not None else f"(unset {v})"
            for v in _DATA_VARS if v in pinned and pinned.get(v) != os.environ.get(v)
        )
        raise InvalidArgument(
            f"cannot resume {out_dir}: the environment selects other data than the run was "
            f"made with ({'; '.join(diffs)}); dataset-backed envs would read other rows. "
            f"Resume with the run's values ({how} gem eval --resume ...) or start a new --out"
        )
    envs = old.get("envs") or {}
    for env_id in ids:
        if env_id not in envs:
            continue
        now = _env_info(env_id)
        keys = ("version", "variant", "entry_point", "kwargs", "max_turns")
        changed = [k for k in keys if k in envs[env_id] and _canon(envs[env_id][k]) != _canon(now[k])]
        if changed:
            shown = "; ".join(f"{k}: run has {envs[env_id][k]!r}, now {now[k]!r}" for k in changed)
            raise InvalidArgument(
                f"cannot resume {out_dir}: the registration of {env_id} changed since the run "
                f"began ({shown}); its episodes would not be comparable. Start a new --out "
                "directory (or install the gem-core / plugin version the run used: "
                f"{old.get('gem_core_version')})"
            )


def _check_data(pinned: Mapping[str, Any], now: Mapping[str, Any], out_dir: Path | None) -> None:
    """Refuse a resume whose envs read other rows than the run pinned (content hashes)."""
    for env_id, loads in now.items():
        before = pinned.get(env_id)
        if before is None:
            continue
        key = [(d.get("dataset"), d.get("split"), d.get("rows"), d.get("sha256")) for d in before]
        if key != [(d["dataset"], d["split"], d["rows"], d["sha256"]) for d in loads]:
            was = ", ".join(f"{d.get('source')} ({d.get('rows')} rows, sha256 {str(d.get('sha256'))[:12]})"
                            for d in before) or "no dataset"
            is_ = ", ".join(f"{d['source']} ({d['rows']} rows, sha256 {d['sha256'][:12]})"
                            for d in loads) or "no dataset"
            raise InvalidArgument(
                f"cannot resume {out_dir}: {env_id} now reads other data than the run was "
                f"made with (run: {was}; now: {is_}). Point it at the run's data again "
                "(data_path / GEM_DATA / GEM_DATA_DIR as in the manifest) or start a new --out"
            )


class _Progress:
    """Episodes done, successes and errors: a tqdm bar when tqdm is installed, else lines."""

    def __init__(self, total: int, done: int, successes: int, errors: int, enabled: bool):
        self.total, self.done, self.successes, self.errors = total, done, successes, errors
        self.enabled = enabled
        self.bar: Any = None
        self.last = 0.0
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                self.bar = None
            else:
                self.bar = tqdm(total=total, initial=done, desc="gem eval", unit="ep", file=sys.stderr,
                                dynamic_ncols=True)
                self._postfix()

    def _text(self) -> str:
        return f"success {self.successes}/{self.done}, errors {self.errors}"

    def _postfix(self) -> None:
        self.bar.set_postfix_str(self._text(), refresh=False)

    def update(self, record: Mapping[str, Any]) -> None:
        self.done += 1
        self.successes += bool(record["success"])
        self.errors += bool(record["error"])
        if not self.enabled:
            return
        if self.bar is not None:
            self._postfix()
            self.bar.update(1)
            return
        now = time.monotonic()
        if now - self.last >= 1.0 or self.done == self.total:
            self.last = now
            print(f"gem eval: {self.done}/{self.total} episodes, {self._text()}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _SharedSandbox:
    """One `gem_core.sandbox.Sandbox` for every python tool of a run, made on first use."""

    def __init__(self, concurrency: int):
        self.size = max(2, min(concurrency, os.cpu_count() or 2))
        self.sandbox: Any = None
        self.lock = threading.Lock()

    def get(self) -> Any:
        with self.lock:
            if self.sandbox is None:
                from gem_core.sandbox import Sandbox

                self.sandbox = Sandbox(size=self.size)
            return self.sandbox

    def close(self) -> None:
        with self.lock:
            if self.sandbox is not None:
                self.sandbox.close()
                self.sandbox = None


def _make_eval_env(
    env_id: str,
    *,
    api: str,
    wrappers: Sequence[str],
    tools: Sequence[str],
    max_tool_uses: int,
    env_kwargs: Mapping[str, Any],
    user_spec: Mapping[str, Any] | None,
    user_key: str | None,
    timeout: float,
    max_retries: int,
    sandbox: Any = None,
) -> Env:
    """One env of a run: `build_env` with this episode's user simulator (a fresh
    `LLMUser`, the key given here only; the env closes it), refusing images in
    ``"completions"`` mode."""
    kwargs = dict(env_kwargs)
    made_user = None
    if user_spec is not None:
        if user_spec["kind"] != "llm":
            made_user = user_spec["kind"]
        else:
            from gem_core.multiagent.users import LLMUser

            options = {"timeout": timeout, "max_retries": max_retries,
                       **{k: v for k, v in user_spec.items() if k != "kind"}}
            made_user = LLMUser(api_key=user_key, **options)
        kwargs["user"] = made_user
    try:
        env = build_env(env_id, wrappers=wrappers, tools=tools, max_tool_uses=max_tool_uses,
                        env_kwargs=kwargs, sandbox=sandbox)
    except BaseException:
        close = getattr(made_user, "close", None)
        if callable(close):
            close()
        raise
    return env if api == "chat" else TextOnlyObservations(env, env_id)


_ACTOR_SANDBOX: dict[str, Any] = {}
_ACTOR_LOCK = threading.Lock()


def _actor_sandbox(size: int) -> Any:
    """This process's `Sandbox`, shared by the python tools of every env it hosts (in a
    Ray actor: the sandbox pool lives on the actor's node and dies with the actor)."""
    with _ACTOR_LOCK:
        if "sandbox" not in _ACTOR_SANDBOX:
            from gem_core.sandbox import Sandbox

            _ACTOR_SANDBOX["sandbox"] = Sandbox(size=size)
        return _ACTOR_SANDBOX["sandbox"]


def _data_key(loads: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [(d.get("dataset"), d.get("split"), d.get("rows"), d.get("sha256")) for d in loads]


def _pooled_env(env_id: str, *, data_env: Mapping[str, str | None], data: Mapping[str, Any],
                sandbox_size: int | None, **settings: Any) -> Env:
    """`_make_eval_env` where an env pool builds its envs (a Ray actor, another process).

    Pickled to the pool with plain-data settings. The variables that select data
    (``GEM_DATA``, ``GEM_DATA_DIR``, the HF offline flags) are set as in the process that
    runs `evaluate`, and the rows the env read must be the ones the run pinned (``data``:
    the manifest's, read there) — another node's copy of a dataset is refused, not mixed.
    """
    from gem_core.data import recorded_loads

    with _ACTOR_LOCK:
        for name, value in data_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    sandbox = _actor_sandbox(sandbox_size) if sandbox_size else None
    with recorded_loads() as loads:
        env = _make_eval_env(env_id, sandbox=sandbox, **settings)
    pinned = data.get(env_id)
    if pinned is not None and loads and _data_key(loads) != _data_key(pinned):
        env.close()
        was = ", ".join(f"{d.get('source')} ({d.get('rows')} rows, sha256 {str(d.get('sha256'))[:12]})"
                        for d in pinned) or "no dataset"
        is_ = ", ".join(f"{d['source']} ({d['rows']} rows, sha256 {d['sha256'][:12]})" for d in loads)
        raise InvalidArgument(
            f"{env_id} reads other data in the env pool's process (pid {os.getpid()}, "
            f"{platform.node()}) than the run pinned where gem eval runs (pinned: {was}; read "
            f"here: {is_}); give every node the same data (the same GEM_DATA_DIR contents / "
            "data_path, or hub access)"
        )
    return env


async def _prebuild_pooled(env_pool: Any, make_env: Any, ids: Sequence[str]) -> None:
    """Build one env per id in ``env_pool`` before any episode (kept for reuse): an env
    the cluster cannot build fails the run now, once, not in every episode."""
    session = env_pool.bind(make_env, None)
    for env_id in ids:
        env = await session.acquire(env_id)
        await session.release(env_id, env, True)


def _describe_pool(env_pool: Any, ray_address: str | None, ray_actors: int | None,
                   ray_options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The manifest's ``env_pool``: where the envs ran (informational, never pinned)."""
    if ray_address is not None:
        return {"kind": "ray", "address": ray_address, "num_actors": ray_actors,
                "ray_options": dict(ray_options or {}), "pinned": False}
    if env_pool is not None:
        return {"kind": type(env_pool).__name__, "repr": repr(env_pool), "pinned": False}
    return None


def evaluate(
    env_ids: str | Sequence[str] | EvalConfig,
    *,
    policy: Any = None,
    env_pool: Any = None,
    **settings: Any,
) -> EvalResult:
    """Evaluate a served model on registered envs; the Python face of ``gem eval``.

    Episode ``i`` (``0 <= i < episodes``) of each env resets with seed ``seed + i`` and
    samples with ``derive_seed(seed, "sample", env_id, i)``; ``(env_id, i)`` is the
    episode's identity. Episodes run concurrently, in one of two ``api`` modes:

    - ``"completions"`` (default): `gem_core.rl.run_episode` (packed layout) with an
      `OpenAIPolicy` — token ids to ``/v1/completions``; the served model's tokenizer is
      loaded locally for the chat template, so prompts are token-exact and
      ``max_context`` is enforced exactly. Needs vLLM/SGLang-style token-id support.
    - ``"chat"``: `gem_core.rl.run_chat_episode` with an `OpenAIChatPolicy` — the
      conversation as chat ``messages`` to ``/v1/chat/completions``, text back; the
      server applies its own chat template, no tokenizer is needed (any
      OpenAI-compatible API). Token counts in the records come from the responses'
      ``usage`` (``null`` when a response lacks it); ``max_context`` is checked from
      those counts, and a server's "context length exceeded" answer ends the episode
      with ``end_reason="context"``. Observations with images (``{"text", "images"}``,
      e.g. ``eval:Geometry3K``) are sent as OpenAI content parts (text, then base64
      ``data:`` URLs; each request re-sends the images of earlier turns, the API being
      stateless); records keep only the text and an image summary
      (``observation_images``, ``images_sent``, ``image_bytes_sent``), never image data.

    Images need ``"chat"``: a text-only tokenizer cannot carry them as token ids, so in
    ``"completions"`` mode an env that declares images (``metadata["modalities"]``
    contains ``"image"``) is refused before anything runs, and an observation that
    carries images anyway ends its episode with an ``"env.reset"``/``"env.step"`` error
    saying so — images are never dropped silently.

    The mode is explicit (no auto-detection): the two modes measure slightly different
    things (client-side vs server-side chat template), so a run says which it used; the
    manifest pins it and a resume must use the same mode.

    A run that cannot measure says so, before or while it runs: before the first
    episode, the endpoint is checked (``GET /models``), one probe request is sent in the
    chosen mode (a server without token-id completions, e.g. ``transformers serve``, is
    refused with `EndpointIncompatible` pointing at ``api="chat"``; so is a rejected key
    or ``extra_body`` field) and one env of each id is built (a missing dataset, a
    missing optional dependency or a bad ``env_kwargs`` raises here, once). These
    failures raise; with ``out_dir`` the manifest is left with ``status="failed"`` and
    the error (such a directory, holding no records, may be reused by a fresh run).

    While it runs: transient HTTP failures are retried ``max_retries`` times; an episode
    whose requests still fail (HTTP errors, invalid JSON, no choices, a hung request
    past ``timeout``), or whose env raises, is recorded with its ``error``. Errored
    episodes measured nothing: the summary counts them apart (``errors``) and computes
    success over the measured ones. After ``max_consecutive_errors`` errored episodes in
    a row (a server that died, every request rejected) the run stops: the episodes in
    flight are abandoned (not recorded), finished ones are kept, and the status is
    ``failed``; resume it, after fixing the cause, with ``resume=True,
    retry_errors=True``. Ctrl-C (SIGINT, main thread) stops the run cleanly: finished
    episodes are kept, the summary is written and ``interrupted`` is set.

    With ``out_dir``, writes ``manifest.json`` (at the start, updated at the end),
    ``episodes.jsonl`` (one record per episode, appended as each finishes, sorted by
    env then index at the end), ``summary.json`` and ``summary.md``. The manifest pins
    what selects data and grading: the settings, ``GEM_DATA``/``GEM_DATA_DIR``, each
    env's registration (version, entry point, kwargs) and the rows each env read (source,
    count, content sha256, under ``data``); a resume refuses any difference, naming it.
    It keeps the original command line and appends each resume's under ``resumes``.

    User simulators: envs whose constructor takes ``user`` (``tau:Retail-v0``) play the
    assistant (the served ``model``) opposite a simulated user, given by ``user`` (or as
    ``env_kwargs["user"]``, not both) as a JSON spec: ``{"kind": "llm", "base_url": ...,
    "model": ..., "temperature": ..., "max_tokens": ...}`` (an `LLMUser` per episode) or
    ``"scripted"``. Before the first episode the user's endpoint is checked and probed
    like the assistant's (a failure raises and the run is ``failed``). The spec, less its
    key, is pinned (``config["user"]``) and described under the manifest's
    ``user_simulator``; a resume with another user model or sampling is refused, naming
    the field (its ``base_url``, ``timeout`` and ``max_retries`` may change). Each
    user's requests use the run's ``timeout`` and ``max_retries`` unless its spec says
    otherwise.

    On a Ray cluster (``ray_address``, or a ready ``env_pool``): each episode's env is
    built and stepped in a Ray actor (`gem_core.distributed.RayEnvPool`), with its
    tools, python sandbox and LLM user; the model is still called from here. The
    settings go to the actors as plain data (an LLM user's key with them, in Ray's task
    arguments); ``GEM_DATA``/``GEM_DATA_DIR`` and the HF offline flags are set there as
    here, and an actor whose env reads other rows than the run pinned is refused. Before
    the first episode the cluster is connected (an unreachable address raises
    `RayConnectionError` within the connect timeout; no Ray: `DependencyNotInstalled`)
    and one env per id is built in an actor. Where the envs run selects no data: the
    manifest records it (``env_pool``) but does not pin it, so a resume may run with
    other actors, another cluster or none. An actor that dies ends only its episodes
    (``env.step: WorkerError``); they count as errored episodes.

    Args:
        env_ids: one or more registered env ids, or a whole `EvalConfig` (then
            ``settings`` override its fields).
        policy: a ready backend to use instead of the HTTP client (tests, local models):
            a `gem_core.rl.Policy` (``generate``) in ``"completions"`` mode, an object with
            an async ``chat(messages, sampling) -> ChatResult`` (`gem_core.rl.ChatPolicy`)
            in ``"chat"`` mode; the endpoint is then not contacted.
        env_pool: a ready pool to build the envs in (e.g. a `RayEnvPool` the caller
            owns and closes); see `gem_core.rl.collect.run_jobs`. Not with ``ray_address``.
        **settings: the fields of `EvalConfig`, each documented there: ``base_url`` and
            ``model`` (required), ``api``, ``episodes``, ``concurrency``, ``seed``,
            ``tokenizer``, ``wrappers``, ``tools``, ``max_tool_uses``, ``env_kwargs``,
            ``temperature``, ``top_p``, ``max_tokens``, ``max_turns``, ``max_context``,
            ``system_prompt``, ``timeout``, ``max_retries``, ``api_key``, ``extra_body``,
            ``max_consecutive_errors``, ``out_dir``, ``resume``, ``retry_errors``,
            ``progress``, ``print_summary``, ``command_line``, ``user``, ``user_api_key``,
            ``ray_address``, ``ray_actors``, ``ray_options``.

    Returns:
        The `EvalResult`.

    Raises:
        NameNotFound / VersionNotFound: an unknown env id ("did you mean").
        EndpointUnreachable: nothing answers at ``base_url``.
        RayConnectionError: nothing answers as a Ray cluster at ``ray_address``.
        EndpointIncompatible: the probe request was refused or misread (e.g. no token-id
            completions: use ``api="chat"``).
        DatasetUnavailable / DependencyNotInstalled / InvalidKwarg /
            EnvConstructionError: an env cannot be built.
        InvalidArgument: a bad setting, an env with images in ``"completions"`` mode
            (use ``api="chat"``), a resume that does not match the run (or asks
            for fewer episodes), an ``out_dir`` that already holds a run without
            ``resume``, an ``out_dir`` that cannot be created or written, or a resume
            whose environment or data differ from the run's.
        InvalidKwarg: a setting that is no `EvalConfig` field, or ``base_url`` /
            ``model`` missing.
    """
    if isinstance(env_ids, EvalConfig):
        given = {f.name: getattr(env_ids, f.name) for f in dataclasses.fields(EvalConfig)}
        config = EvalConfig.from_kwargs("evaluate()", {**given, **settings}) if settings else env_ids
    else:
        config = EvalConfig.from_kwargs("evaluate()", {"env_ids": env_ids, **settings})
    plan = _validate(config, policy, env_pool)
    run = _open_run_dir(plan, env_pool)
    state, results, ran, breaker = _play(plan, run, policy, env_pool)
    result = _summarize_run(plan, run, results, state, ran, breaker)
    if config.print_summary:
        print(result.table())
    return result


@dataclass(frozen=True)
class _Plan:
    """A validated run: its settings (``config``: env ids as a list, the user simulator
    as a spec, ``env_kwargs`` without it) and what they resolve to."""

    config: EvalConfig
    env_user: Any  # a policy object given to the env as is in env_kwargs (not a spec: not pinned)
    user_key: str | None
    sampling: Any  # gem_core.rl.sampling.SamplingParams

    @property
    def ids(self) -> list[str]:
        return list(self.config.env_ids)


def _validate(config: EvalConfig, policy: Any, env_pool: Any) -> _Plan:
    """Check every setting before anything is written or contacted; the normalized `_Plan`."""
    from gem_core.registration import spec

    c = config
    ids = [c.env_ids] if isinstance(c.env_ids, str) else list(c.env_ids)
    if not ids:
        raise InvalidArgument("evaluate needs at least one env id, got none")
    if len(set(ids)) != len(ids):
        raise InvalidArgument(f"env ids repeat in {ids}; give each env once (use episodes= for more)")
    for env_id in ids:
        spec(env_id)  # unknown ids fail here, with "did you mean"
    check_positive_int("episodes", c.episodes)
    check_positive_int("concurrency", c.concurrency)
    if not isinstance(c.request_seed, bool):
        raise InvalidArgument(f"request_seed must be True or False, got {c.request_seed!r}")
    from gem_core.rl.env_calls import check_env_calls  # gem_core.rl loads on use only

    check_env_calls(c.env_calls)
    if isinstance(c.seed, bool) or not isinstance(c.seed, int) or c.seed < 0:
        raise InvalidArgument(f"seed must be a non-negative int, got {c.seed!r}")
    for w in c.wrappers:
        _parse_named(w, WRAPPER_NAMES, "wrapper")
    for t in c.tools:
        _check_tool(t)
    if isinstance(c.max_consecutive_errors, bool) or not isinstance(c.max_consecutive_errors, int) \
            or c.max_consecutive_errors < 0:
        raise InvalidArgument(
            f"max_consecutive_errors must be an int >= 0 (0: never stop), got {c.max_consecutive_errors!r}"
        )
    if c.extra_body is not None and not isinstance(c.extra_body, Mapping):
        raise InvalidArgument(
            f"extra_body must be a JSON object (dict), e.g. {{\"top_k\": 20}}, got {type(c.extra_body).__name__}"
        )
    if c.retry_errors and not c.resume:
        raise InvalidArgument("retry_errors=True only applies to a resumed run; pass resume=True too")
    if c.api not in API_MODES:
        raise InvalidArgument(
            f"unknown api {c.api!r}: expected one of {', '.join(API_MODES)} (completions: token "
            "ids to /v1/completions with a local tokenizer; chat: messages to /v1/chat/completions)"
        )
    if c.api == "chat" and c.tokenizer is not None:
        raise InvalidArgument(
            f"tokenizer={c.tokenizer!r} only applies to api='completions' (token ids); with "
            "api='chat' the server applies its own chat template: drop --tokenizer"
        )
    if policy is not None and not callable(getattr(policy, "chat" if c.api == "chat" else "generate", None)):
        need = "an async chat(messages, sampling) -> ChatResult" if c.api == "chat" else \
            "an async generate(prompt_ids, sampling) -> GenerationResult"
        raise InvalidArgument(
            f"policy {type(policy).__name__} does not fit api={c.api!r}: it needs {need} "
            f"method; pass api={'completions' if c.api == 'chat' else 'chat'!r} or another policy"
        )

    if env_pool is not None and c.ray_address is not None:
        raise InvalidArgument(
            "give either env_pool= (a ready pool) or ray_address= (gem eval --ray: a pool made "
            "for the run), not both"
        )
    if c.ray_address is None and (c.ray_actors is not None or c.ray_options is not None):
        raise InvalidArgument(
            "ray_actors / ray_options (--ray-actors / --ray-resources) need ray_address "
            "(--ray ADDRESS), the cluster to run the envs on"
        )
    if c.ray_address is not None and (not isinstance(c.ray_address, str) or not c.ray_address.strip()):
        raise InvalidArgument(
            f"ray_address must be the cluster's address ('host:port' printed by `ray start "
            f"--head`, 'auto' or 'ray://host:port'), got {c.ray_address!r}"
        )
    if env_pool is not None and not callable(getattr(env_pool, "bind", None)):
        raise InvalidArgument(
            f"env_pool {type(env_pool).__name__} has no bind(make_env, executor) method; pass a "
            "gem_core.distributed.RayEnvPool (or leave it out: envs in this process)"
        )

    if c.api == "completions":
        for env_id in ids:
            if "image" in _modalities(env_id):
                raise InvalidArgument(_images_need_chat(env_id, "its observations carry images"))

    env_kwargs = dict(c.env_kwargs or {})
    user = c.user
    env_user = None
    if "user" in env_kwargs:
        if user is not None:
            raise InvalidArgument(
                "the user simulator is given twice: user= (gem eval --user-model/--user-base-url) "
                "and env_kwargs['user'] (--env-kwargs); give it once"
            )
        if user_sim.is_spec(env_kwargs["user"]):
            user = env_kwargs.pop("user")
        else:
            env_user = env_kwargs["user"]
    user_spec, spec_key = user_sim.normalize_user(user)
    if user_spec is not None:
        no_user = [e for e in ids if not user_sim.takes_user(e)]
        if no_user:
            raise InvalidArgument(
                f"{', '.join(no_user)} take(s) no user simulator (the env's constructor has no "
                "`user` argument), so --user-model/--user-base-url (user=) cannot apply. Drop "
                "them, or evaluate an env played opposite a user, e.g. tau:Retail-v0"
            )
    user_key = c.user_api_key or spec_key or os.environ.get(user_sim.USER_API_KEY_ENV) or None

    from gem_core.rl.sampling import SamplingParams

    sampling = SamplingParams(temperature=c.temperature, top_p=c.top_p, max_new_tokens=c.max_tokens,
                              seed=c.seed)
    normalized = dataclasses.replace(c, env_ids=ids, wrappers=list(c.wrappers), tools=list(c.tools),
                                     env_kwargs=env_kwargs, extra_body=dict(c.extra_body or {}),
                                     user=user_spec)
    return _Plan(normalized, env_user, user_key, sampling)


@dataclass
class _RunDir:
    """A run's directory (``out``; ``None``: nothing written), its manifest and episodes:
    ``done`` (recorded before this call), ``wanted`` and ``jobs`` (``(env_id, index, seed)``:
    every episode of the run, those still to play)."""

    out: Path | None
    manifest: dict[str, Any]
    done: list[dict[str, Any]]
    wanted: list[tuple[str, int, int]]
    jobs: list[tuple[str, int, int]]

    def save_manifest(self) -> None:
        if self.out is not None:
            try:
                rec.write_json(self.out / rec.MANIFEST_FILE, self.manifest)
            except OSError as exc:
                raise _unwritable(self.out, exc) from None

    def fail(self, exc: BaseException) -> None:
        """Leave the manifest with ``status="failed"`` and the error."""
        self.manifest["status"] = "failed"
        self.manifest["error"] = f"{type(exc).__name__}: {exc}"
        self.manifest["updated_at"] = _now()
        self.save_manifest()


def _open_run_dir(plan: _Plan, env_pool: Any) -> _RunDir:
    """Check ``out_dir`` (a resume against its manifest; no fresh run over an old one),
    create it and write the run's first manifest."""
    c = plan.config
    ids = plan.ids
    config = c.manifest_config()
    user_spec = c.user
    out = Path(c.out_dir) if c.out_dir is not None else None
    done: list[dict[str, Any]] = []
    now = _now()
    created = now
    this_command = list(c.command_line) if c.command_line is not None else list(sys.argv)
    first_command = this_command
    resumes: list[dict[str, Any]] = []
    pinned_data: dict[str, Any] = {}
    pool = _describe_pool(env_pool, c.ray_address, c.ray_actors, c.ray_options)
    if out is not None:
        has_run = (out / rec.MANIFEST_FILE).exists() or (out / rec.RECORDS_FILE).exists()
        if has_run and not c.resume and _failed_before_any_episode(out):
            has_run = False  # a run that failed before its first episode: nothing to mix
        if c.resume and has_run:
            old = rec.read_manifest(out)
            _check_resume(old.get("config", {}), config, out)
            user_sim.check_resume_user(old.get("config", {}).get("user"), user_spec, out)
            _check_resume_environment(old, ids, out)
            ran_before = old.get("config", {}).get("episodes", 0)
            if isinstance(ran_before, int) and c.episodes < ran_before:
                raise InvalidArgument(
                    f"cannot resume {out} with episodes={c.episodes}: the run asks for "
                    f"{ran_before} episodes per env and a resume may only add episodes. Pass "
                    f"--episodes {ran_before} or more (or leave it out), or write to a new --out "
                    "directory"
                )
            if old.get("gem_core_version") not in (None, _gem_version()):
                warnings.warn(
                    f"resuming {out}, begun with gem-core {old.get('gem_core_version')}, with "
                    f"gem-core {_gem_version()}: the env registrations and data are unchanged "
                    "(checked), but grading code may differ",
                    RuntimeWarning, stacklevel=3,
                )
            created = old.get("created_at", created)
            first_command = old.get("command_line", first_command)
            resumes = list(old.get("resumes") or [])
            resumes.append({"at": now, "command_line": this_command, "gem_core_version": _gem_version(),
                            "base_url": c.base_url,
                            "user_base_url": (user_spec or {}).get("base_url"),
                            "env_pool": _describe_pool(env_pool, c.ray_address, c.ray_actors,
                                                       c.ray_options)})
            pinned_data = dict(old.get("data") or {})
            done = rec.read_records(out / rec.RECORDS_FILE)
            if c.retry_errors:
                done = [r for r in done if not r.get("error")]
        elif has_run:
            raise InvalidArgument(
                f"{out} already holds a gem eval run; pass --resume (resume=True) to continue "
                "it, or choose another --out directory"
            )
        try:  # fail now, before the endpoint is contacted, not after the first episodes
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _unwritable(out, exc) from None

    wanted = [(e, i, c.seed + i) for e in ids for i in range(c.episodes)]
    finished = {(r["env_id"], int(r["index"])) for r in done}
    jobs = [j for j in wanted if (j[0], j[1]) not in finished]

    api = c.api
    manifest: dict[str, Any] = {
        "format": rec.MANIFEST_FORMAT,
        "gem_core_version": _gem_version(),
        "created_at": created,
        "updated_at": now,
        "status": "running",
        "command_line": first_command,
        "resumes": resumes,
        "config": config,
        "endpoint": {"base_url": c.base_url, "api": api,
                     "route": "/chat/completions" if api == "chat" else "/completions",
                     "timeout_s": c.timeout, "max_retries": c.max_retries,
                     "api_key": "set" if (c.api_key or os.environ.get("OPENAI_API_KEY")) else None},
        "user_simulator": user_sim.describe_user(
            user_spec, ids, plan.env_user,
            key_set=bool(plan.user_key or os.environ.get("OPENAI_API_KEY"))),
        "concurrency": c.concurrency,
        # Where the envs ran (None: in this process). It selects no data, so it is not
        # pinned: a resume may use other actors, another cluster, or none.
        "env_pool": pool,
        "envs": {e: _env_info(e) for e in ids},
        "seeds": {
            "env_seeds": [c.seed + i for i in range(c.episodes)],
            "rule": "episode i of every env resets with seed + i and samples with "
                    "gem_core.rl.derive_seed(seed, 'sample', env_id, i)",
        },
        "sampling": {"temperature": c.temperature, "top_p": c.top_p, "max_new_tokens": c.max_tokens,
                     "stop_token_ids": None, "extra_body": dict(c.extra_body or {})},
        "layout": "packed" if api == "completions" else "messages",
        "token_counts": "tokenizer" if api == "completions" else "server usage (null when absent)",
        "stack": {"tools": list(c.tools), "wrappers": list(c.wrappers),
                  "order": "make(env_id, **env_kwargs) -> ToolEnvWrapper(tools) -> wrappers in order"},
        # What selects the rows of dataset-backed envs (gem_core.data.load_rows): pinned, a
        # resume under other values is refused (env_kwargs' data_path is in config).
        "data_env": {v: os.environ.get(v) for v in (*_DATA_VARS, "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")},
        # Where each env's rows came from, with their content hash (filled when envs are built).
        "data": pinned_data,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {p: _version(p) for p in ("transformers", "tokenizers", "torch")},
    }
    run = _RunDir(out, manifest, done, wanted, jobs)
    run.save_manifest()
    return run


class _Session:
    """What a run's episodes are played with: the policy (and chat formatter), the env
    factory and the env pool; `close` closes what the session made."""

    def __init__(self, plan: _Plan, policy: Any, env_pool: Any):
        c = plan.config
        self.plan = plan
        self.policy = policy
        self.own_policy = False
        self.env_pool = env_pool
        self.own_pool = False
        self.formatter: Any = None
        self.pool_env: Any = None  # what the env pool builds envs with (pickled to it)
        self.prebuilt: dict[str, Env] = {}
        self.shared = _SharedSandbox(c.concurrency)
        self.uses_python = any(_parse_named(t, TOOL_NAMES, "tool")[0] == "python" for t in c.tools)
        self.env_settings: dict[str, Any] = {
            "api": c.api, "wrappers": list(c.wrappers), "tools": list(c.tools),
            "max_tool_uses": c.max_tool_uses, "env_kwargs": c.env_kwargs, "user_spec": c.user,
            "user_key": plan.user_key, "timeout": c.timeout, "max_retries": c.max_retries,
        }

    def make_env(self, env_id: str) -> Env:
        return _make_eval_env(env_id, sandbox=self.shared.get() if self.uses_python else None,
                              **self.env_settings)

    def reuse_or_make(self, env_id: str) -> Env:
        env = self.prebuilt.pop(env_id, None)
        return env if env is not None else self.make_env(env_id)

    def open(self, run: _RunDir) -> None:
        """Connect everything before the first episode: the Ray pool, the endpoint (checked
        and probed), the user simulator's endpoint, and one env per id (its data pinned)."""
        c = self.plan.config
        manifest = run.manifest
        if c.ray_address is not None:  # before the endpoint: a wrong address fails in seconds
            from gem_core.distributed import RayEnvPool

            self.env_pool = RayEnvPool(c.ray_actors, ray_options=c.ray_options, address=c.ray_address)
            self.own_pool = True
            manifest["env_pool"]["num_actors"] = self.env_pool.num_actors
            run.save_manifest()
        if self.policy is None:
            if not c.base_url.startswith(("http://", "https://")):
                raise InvalidArgument(
                    f"base_url must start with http:// or https://, got {c.base_url!r} "
                    "(e.g. http://127.0.0.1:8000/v1)"
                )
            check_endpoint(c.base_url, timeout=min(float(c.timeout), 10.0))
        if c.api == "completions":
            from gem_core.rl.chat import ChatFormatter

            self.formatter = ChatFormatter(_load_tokenizer(c.tokenizer or c.model),
                                           system_prompt=c.system_prompt, max_context=c.max_context)
            manifest["sampling"]["stop_token_ids"] = list(self.formatter.stop_token_ids)
        if self.policy is None:
            from gem_core.rl.policies import OpenAIChatPolicy, OpenAIPolicy

            client = OpenAIChatPolicy if c.api == "chat" else OpenAIPolicy
            self.policy = client(c.base_url, c.model, api_key=c.api_key, timeout=c.timeout,
                                 max_retries=c.max_retries, max_connections=c.concurrency,
                                 extra_body=dict(c.extra_body or {}))
            self.own_policy = True
            _probe(self.policy, c.api, self.formatter, c.base_url, c.model)
        if c.user is not None and c.user["kind"] == "llm":
            _probe_user(c.user, self.plan.user_key, timeout=c.timeout, max_retries=c.max_retries)
        # One env per id before any episode: a missing dataset or dependency, or a bad
        # env_kwargs, is one clear error now instead of an error in every episode.
        from gem_core.data import recorded_loads

        pinned_data = dict(manifest["data"])
        ids = list(dict.fromkeys(j[0] for j in run.jobs))
        built: dict[str, Any] = {}
        for env_id in ids:
            with recorded_loads() as loads:
                self.prebuilt[env_id] = self.make_env(env_id)
            built[env_id] = loads
        _check_data(pinned_data, built, run.out)
        manifest["data"] = {**pinned_data, **built}
        self.check_first_prompts(run.jobs)
        if self.env_pool is not None:  # the episodes' envs are built in the pool: check it can
            for env in self.prebuilt.values():
                env.close()
            self.prebuilt.clear()
            self.pool_env = functools.partial(
                _pooled_env, data_env=dict(manifest["data_env"]), data=dict(manifest["data"]),
                sandbox_size=self.shared.size if self.uses_python else None, **self.env_settings)
            try:
                pickle.dumps(self.pool_env)
            except Exception as exc:
                raise InvalidArgument(
                    f"the env settings cannot be sent to the env pool ({type(exc).__name__}: "
                    f"{exc}); envs built in Ray actors take plain data only: give env_kwargs as "
                    "JSON values and a user simulator as a spec (user=..., --user-model), not "
                    "an object"
                ) from None
            if _run_loop(_prebuild_pooled(self.env_pool, self.pool_env, ids)) == "interrupted":
                raise KeyboardInterrupt

    def check_first_prompts(self, jobs: list[tuple[str, int, int]]) -> None:
        """Completions mode: refuse a run whose first prompt cannot fit ``--max-context``.

        Each env id's first episode is reset (on the prebuilt env, which that episode
        reuses) and its first prompt rendered as the episode will render it; when that
        prompt plus ``--max-tokens`` exceeds ``--max-context``, no episode of the id could
        take a turn, so the run stops now with the size needed. An env whose reset fails
        is left to its episodes, which record the error. Chat mode has no tokenizer: the
        server counts, and a run in which no episode took a turn ends ``failed``.
        """
        if self.formatter is None:
            return
        from gem_core.rl.loop import TokenConversation

        c = self.plan.config
        budget = self.plan.sampling.max_new_tokens
        first: dict[str, int] = {}
        for env_id, _index, seed in jobs:
            first.setdefault(env_id, seed)
        for env_id, env in self.prebuilt.items():
            try:
                obs, _info = env.reset(seed=first[env_id])
                prompt, _starts = TokenConversation(self.formatter).add_observation(observation_text(obs))
            except Exception:  # noqa: BLE001 - the episode records it as its own error
                continue
            if len(prompt) + budget > c.max_context:
                raise InvalidArgument(
                    f"{env_id}: the first prompt (seed {first[env_id]}) is {len(prompt)} tokens; "
                    f"with --max-tokens {budget} a turn needs {len(prompt) + budget}, over "
                    f"--max-context {c.max_context}, so no episode could take a turn. Set "
                    f"--max-context {len(prompt) + budget} or more (up to the model's context "
                    "length), or lower --max-tokens"
                )

    def close(self, manifest: dict[str, Any] | None = None) -> None:
        """Close the prebuilt envs, the shared sandbox, and the pool and policy this session
        made; with ``manifest``, record the pool's counters in it first."""
        for env in self.prebuilt.values():
            env.close()
        self.shared.close()
        pool = self.env_pool
        if manifest is not None and pool is not None and manifest["env_pool"] is not None:
            for key in ("restarts", "built"):
                if isinstance(getattr(pool, key, None), int):
                    manifest["env_pool"]["actor_restarts" if key == "restarts" else "envs_built"] = \
                        getattr(pool, key)
        if self.own_pool:
            pool.close()
        if self.own_policy:
            self.policy.close()


def _play(plan: _Plan, run: _RunDir, policy: Any, env_pool: Any) -> tuple[str, list[dict[str, Any]], int, _Breaker]:
    """Play the run's missing episodes, appending each record as it finishes.

    Returns:
        ``(state, records, ran, breaker)``: `_run_loop`'s state (``"done"``,
        ``"interrupted"`` or ``"aborted"``), every record (earlier ones first), the
        episodes played now, and the breaker that may have stopped the run.
    """
    c = plan.config
    session = _Session(plan, policy, env_pool)
    if run.jobs:
        try:
            session.open(run)
        except BaseException as exc:
            session.close()
            run.fail(exc)
            raise
    if run.out is not None:
        try:
            rec.write_records(run.out / rec.RECORDS_FILE, run.done)  # drops partial lines and retried errors
            run.save_manifest()
        except OSError as exc:
            raise _unwritable(run.out, exc) from None

    breaker = _Breaker(c.max_consecutive_errors)
    results = list(run.done)
    if not run.jobs:
        return "done", results, 0, breaker
    from gem_core.rl.collect import EpisodeJob, run_jobs
    from gem_core.rl.sampling import derive_seed
    from gem_core.rl.types import Episode

    if c.api == "chat":
        from gem_core.rl.loop import run_chat_episode

        play = functools.partial(run_chat_episode, policy=session.policy, system_prompt=c.system_prompt,
                                 max_turns=c.max_turns, max_context=c.max_context, env_calls=c.env_calls)
    else:
        from gem_core.rl.loop import run_episode

        play = functools.partial(run_episode, policy=session.policy, formatter=session.formatter,
                                 max_turns=c.max_turns, env_calls=c.env_calls)
    done = run.done
    bar = _Progress(len(run.wanted), len(done), sum(bool(r["success"]) for r in done),
                    sum(bool(r["error"]) for r in done), c.progress)
    sink = (run.out / rec.RECORDS_FILE).open("a", encoding="utf-8") if run.out is not None else None
    ran = 0

    def on_done(job: EpisodeJob, ep: Episode) -> None:
        nonlocal ran
        if breaker.tripped:
            return  # finished while the run was being stopped: left for the resume
        record = rec.episode_record(ep, index=job.tag, sampling_seed=job.sampling_seed, api=c.api)
        results.append(record)
        ran += 1
        if sink is not None:
            rec.append_record(sink, record)
        bar.update(record)
        breaker.update(record)

    episode_jobs = [EpisodeJob(e, s, derive_seed(plan.sampling.seed, "sample", e, i) if c.request_seed else None,
                               e, tag=i)
                    for e, i, s in run.jobs]
    pool = session.env_pool
    try:
        state = _run_loop(
            run_jobs(episode_jobs, play, make_env=session.reuse_or_make if pool is None else session.pool_env,
                     sampling=plan.sampling, concurrency=c.concurrency,
                     layout="per_turn" if c.api == "chat" else "packed",
                     thread_name="gem-eval-env", on_episode=on_done, env_pool=pool),
            breaker,
        )
    finally:
        bar.close()
        try:
            session.close(run.manifest)
        finally:
            if sink is not None:
                sink.close()
    return state, results, ran, breaker


def _summarize_run(plan: _Plan, run: _RunDir, results: list[dict[str, Any]], state: str, ran: int,
                   breaker: _Breaker) -> EvalResult:
    """Sort the records, set the run's status and counts, and write the summary files."""
    c = plan.config
    ids, manifest, wanted = plan.ids, run.manifest, run.wanted
    order = {e: i for i, e in enumerate(ids)}
    results.sort(key=lambda r: (order.get(r["env_id"], len(order)), r["index"]))
    have = {(r["env_id"], int(r["index"])) for r in results}
    missing = [(e, i) for e, i, _ in wanted if (e, i) not in have]
    summary = summarize(results)
    errors = _error_counts(results)
    errored = sum(n for _, n in errors)
    if state == "aborted":
        status = "failed"
        manifest["error"] = (
            f"stopped after {breaker.limit} consecutive errored episodes; the last: {breaker.tripped}"
        )
    elif state == "interrupted":
        status = "interrupted"
    elif missing:
        status = "partial"
    elif results and errored == len(results):
        status = "failed"
        manifest["error"] = f"every episode errored; the most frequent: {errors[0][0]}"
    elif results and all(r["end_reason"] == "context" and r["num_turns"] == 0 for r in results):
        # Not one turn was played: the run measured nothing (a first prompt over the budget).
        status = "failed"
        manifest["error"] = (
            f"no episode took a turn: each ended on the context budget before its first request "
            f"(--max-context {c.max_context} must hold the first prompt plus --max-tokens "
            f"{c.max_tokens}); raise --max-context to the model's context length, or lower "
            "--max-tokens"
        )
    elif errored:
        status = "complete_with_errors"
    else:
        status = "complete"
    if status != "failed":
        manifest.pop("error", None)
    manifest["status"] = status
    manifest["updated_at"] = _now()
    manifest["counts"] = {"wanted": len(wanted), "recorded": len(results), "ran_this_call": ran,
                          "missing": len(missing), "errored": errored,
                          "measured": len(results) - errored}
    out = run.out
    if out is not None:
        rec.write_records(out / rec.RECORDS_FILE, results)  # sorted by env, then index
        rec.write_json(out / rec.SUMMARY_JSON, summary)
        rec.write_text(
            out / rec.SUMMARY_MD,
            f"# gem eval: {c.model}"
            + (f" (user simulator: {user_sim.user_label(c.user)})" if c.user else "")
            + f"\n\n{summary_markdown(summary)}\n\n"
            f"Status: {status} ({len(results)}/{len(wanted)} episodes recorded, {errored} "
            "errored). Success: over the measured (non-errored) episodes, with a 95% Wilson "
            "interval; errored episodes are counted apart.\n",
        )
        rec.write_json(out / rec.MANIFEST_FILE, manifest)
    return EvalResult(results, summary, manifest, out, state == "interrupted", ran, missing,
                      failed=status == "failed", errors=errors)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _failed_before_any_episode(out: Path) -> bool:
    """The run directory holds a run that failed before recording any episode."""
    try:
        manifest = rec.read_manifest(out)
    except InvalidArgument:
        return False
    return manifest.get("status") == "failed" and not rec.read_records(out / rec.RECORDS_FILE)


def _error_counts(records: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for r in records:
        if r.get("error"):
            counts[str(r["error"])] = counts.get(str(r["error"]), 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])


class _Breaker:
    """Stops a run after ``limit`` errored episodes in a row (``limit == 0``: never)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.streak = 0
        self.tripped: str | None = None
        self.stop: Any = None  # set by _run_loop: cancels the run

    def update(self, record: Mapping[str, Any]) -> None:
        if not record.get("error"):
            self.streak = 0
            return
        self.streak += 1
        if self.limit and self.streak >= self.limit and self.tripped is None:
            self.tripped = str(record["error"])
            if self.stop is not None:
                self.stop()


@dataclass(frozen=True)
class _Role:
    """Whose endpoint a probe checks, and the flags its messages name."""

    what: str = "model endpoint"
    base_url: str = "--base-url"
    model: str = "--model"
    key: str = "--api-key (or $OPENAI_API_KEY)"
    extra_body: str = "--extra-body"


_USER_ROLE = _Role("user simulator's endpoint", "--user-base-url", "--user-model",
                   f"--user-api-key (or ${user_sim.USER_API_KEY_ENV})", "the user spec's extra_body")


def _probe(policy: Any, api: str, formatter: Any, base_url: str, model: str, role: _Role = _Role()) -> None:
    """One tiny request in the run's mode; refuse a server that cannot serve it."""
    from gem_core.rl.sampling import PolicyError, SamplingParams

    probe = SamplingParams(temperature=0.0, max_new_tokens=1)
    try:
        if api == "chat":
            policy.chat_sync([{"role": "user", "content": "Say OK."}], probe)
        else:
            try:
                ids = list(formatter.tokenizer.encode("Hello", add_special_tokens=False))
            except Exception:  # noqa: BLE001 - any token will do for a probe
                ids = []
            policy.generate_sync(ids or [0], probe)
    except PolicyError as exc:
        text = str(exc)
        if type(exc).__name__ == "ContextLengthExceeded":
            return  # it answered in this mode; a 1-token prompt is just odd for it
        if "gave up after" in text:
            raise EndpointUnreachable(
                f"the {role.what} at {base_url} did not answer the probe request ({text}). "
                f"Check that the server is up and {role.base_url} is right"
            ) from None
        if any(f"HTTP {code} " in text for code in (401, 403)):
            raise EndpointIncompatible(
                f"the server at {base_url} ({role.what}) refused the probe request: {text}. "
                f"Pass its key with {role.key}"
            ) from None
        if api == "completions":
            raise EndpointIncompatible(
                f"the server at {base_url} does not serve token-id completions: a probe "
                f"request (prompt token ids, logprobs, token ids back) to /completions failed: "
                f"{text}. --api completions needs a vLLM/SGLang-style /v1/completions; for "
                "other OpenAI-compatible servers (e.g. `transformers serve`, hosted APIs) use "
                "--api chat (chat messages, no tokenizer)"
            ) from None
        raise EndpointIncompatible(
            f"the server at {base_url} ({role.what}) rejected a probe chat request for model "
            f"{model!r}: {text}. Check {role.model}, {role.base_url} (the API root, e.g. "
            f"http://HOST:PORT/v1) and {role.extra_body}"
        ) from None


def _probe_user(spec: Mapping[str, Any], api_key: str | None, *, timeout: float, max_retries: int) -> None:
    """Check and probe an LLM user simulator's endpoint as the assistant's is (chat mode)."""
    from gem_core.rl.policies import OpenAIChatPolicy

    base_url, model = spec["base_url"], spec["model"]
    check_endpoint(base_url, timeout=min(float(spec.get("timeout", timeout)), 10.0),
                   flag=_USER_ROLE.base_url, what=_USER_ROLE.what)
    client = OpenAIChatPolicy(base_url, model, api_key=api_key, timeout=spec.get("timeout", timeout),
                              max_retries=spec.get("max_retries", max_retries),
                              extra_body=dict(spec.get("extra_body") or {}))
    try:
        _probe(client, "chat", None, base_url, model, _USER_ROLE)
    finally:
        client.close()


def _modalities(env_id: str) -> tuple[str, ...]:
    """What the env's observations carry, from its class's ``metadata["modalities"]``
    (``("text",)`` when it does not say or its entry point cannot be loaded here)."""
    from gem_core.registration import load_entry_point, spec

    entry = spec(env_id).entry_point
    try:
        target = load_entry_point(entry) if isinstance(entry, str) else entry
    except Exception:  # make() will report it, with the env id
        return ("text",)
    metadata = getattr(target, "metadata", None)
    modalities = metadata.get("modalities") if isinstance(metadata, Mapping) else None
    return tuple(modalities) if isinstance(modalities, (list, tuple)) else ("text",)


def _images_need_chat(env_id: str, what: str) -> str:
    return (
        f"{env_id}: {what}, and --api completions sends token ids from a text-only "
        "tokenizer, which cannot carry images. Use --api chat (api='chat'): observations "
        "with images go to /v1/chat/completions as image_url content parts"
    )


class TextOnlyObservations(ObservationWrapper):
    """Refuses observations with images: ``api="completions"`` sends token ids from a
    text-only tokenizer, which would drop them silently. Text passes through unchanged.

    Args:
        env: the env (stack) a run plays.
        env_id: named in the error.

    Raises:
        InvalidArgument: from ``reset``/``step``, on an observation ``{"text", "images"}``
            with images (the episode ends with that error; use ``api="chat"``).
    """

    def __init__(self, env: Env, env_id: str):
        super().__init__(env)
        self._env_id = env_id

    def observation(self, observation: Any) -> Any:
        if isinstance(observation, Mapping) and observation.get("images"):
            raise InvalidArgument(_images_need_chat(
                self._env_id, f"an observation carries {len(observation['images'])} image(s)"))
        return observation


def _unwritable(out: Path, exc: OSError) -> InvalidArgument:
    return InvalidArgument(
        f"cannot write the run directory {out} ({type(exc).__name__}: {exc}); pass an --out "
        "directory you can create and write to"
    )


def _gem_version() -> str:
    import gem_core

    return gem_core.__version__


def _run_loop(coro: Any, breaker: _Breaker | None = None) -> str:
    """Run ``coro`` on a fresh loop; ``"done"``, ``"interrupted"`` (SIGINT) or ``"aborted"``
    (``breaker`` tripped)."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(coro)
    stopped = threading.Event()
    handled = False
    if breaker is not None:
        breaker.stop = task.cancel  # called from an episode callback, on the loop

    def on_sigint() -> None:
        stopped.set()
        print("\ngem eval: interrupted; finishing up (finished episodes are kept; "
              "Ctrl-C again aborts)", file=sys.stderr, flush=True)
        loop.remove_signal_handler(signal.SIGINT)
        task.cancel()

    if threading.current_thread() is threading.main_thread():
        try:
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            handled = True
        except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - Windows
            handled = False
    try:
        loop.run_until_complete(task)
    except asyncio.CancelledError:
        if not stopped.is_set() and not (breaker is not None and breaker.tripped):
            raise
    except KeyboardInterrupt:
        stopped.set()
        task.cancel()
        try:
            loop.run_until_complete(task)
        except (asyncio.CancelledError, Exception):
            pass
    finally:
        if handled:
            try:
                loop.remove_signal_handler(signal.SIGINT)
            except Exception:  # pragma: no cover
                pass
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
    if stopped.is_set():
        return "interrupted"
    return "aborted" if breaker is not None and breaker.tripped else "done"
