"""`evaluate`: run episodes of registered envs against an OpenAI-compatible endpoint and record them."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import os
import platform
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_core.core import Env, Wrapper
from gem_core.errors import DependencyNotInstalled, Error, InvalidArgument
from gem_core.eval import records as rec
from gem_core.eval.stats import summarize, summary_markdown, summary_table

__all__ = [
    "EvalResult",
    "EndpointUnreachable",
    "evaluate",
    "check_endpoint",
    "build_env",
    "API_MODES",
    "WRAPPER_NAMES",
    "TOOL_NAMES",
    "CONFIG_DEFAULTS",
]

#: Endpoint modes for ``api=`` / ``--api``: token ids to ``/v1/completions`` (the
#: default: token-exact, needs the served model's tokenizer locally) or chat messages to
#: ``/v1/chat/completions`` (text in, text out: no tokenizer, any OpenAI-compatible API;
#: observation images go as ``image_url`` content parts). Envs with images need ``"chat"``.
API_MODES = ("completions", "chat")

#: Named wrappers for ``wrappers=`` / ``--wrappers``: ``NAME[:ARG]``.
WRAPPER_NAMES = ("history",)
#: Named tools for ``tools=`` / ``--tools``.
TOOL_NAMES = ("python", "search")

#: Defaults of the settings a run's manifest pins (``config``).
CONFIG_DEFAULTS: dict[str, Any] = {
    "api": "completions",
    "episodes": 10,
    "seed": 0,
    "tokenizer": None,
    "wrappers": [],
    "tools": [],
    "max_tool_uses": 10,
    "env_kwargs": {},
    "temperature": 0.0,
    "top_p": 1.0,
    "max_tokens": 1024,
    "max_turns": None,
    "max_context": 4096,
    "system_prompt": None,
}

# Settings that must match when a run is resumed (``episodes`` may grow).
_PINNED = tuple(k for k in CONFIG_DEFAULTS if k != "episodes") + ("env_ids", "model")


class EndpointUnreachable(Error, ConnectionError):
    """The model endpoint could not be reached (no server at the URL, DNS failure, timeout)."""


@dataclass
class EvalResult:
    """What `evaluate` returns.

    Attributes:
        records: one dict per finished episode (see `gem_core.eval.episode_record`),
            ordered by env (as given) then episode index; on a resumed run, earlier
            episodes included.
        summary: ``{env_id: row}`` (see `gem_core.eval.summarize`).
        manifest: the run's manifest (settings, versions, seeds, command line).
        out_dir: where the run was written (``None``: nothing written).
        interrupted: the run was stopped (Ctrl-C) before every episode finished.
        ran: episodes run by this call (not counting those resumed from disk).
    """

    records: list[dict[str, Any]]
    summary: dict[str, dict[str, Any]]
    manifest: dict[str, Any]
    out_dir: Path | None = None
    interrupted: bool = False
    ran: int = 0
    missing: list[tuple[str, int]] = field(default_factory=list)

    def table(self) -> str:
        """The summary as a plain-text table."""
        return summary_table(self.summary)


def check_endpoint(base_url: str, timeout: float = 5.0) -> None:
    """Check that something answers HTTP at ``base_url`` (``GET {base_url}/models``).

    Any HTTP answer, even an error status, counts as reachable.

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
            f"cannot reach the model endpoint at {base_url} (GET {url} failed: "
            f"{type(reason).__name__}: {reason}). Start an OpenAI-compatible server there "
            "(e.g. `vllm serve MODEL --port 8000` for http://127.0.0.1:8000/v1) or fix --base-url."
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


def _tool(item: str, sandbox: Any = None) -> Any:
    name, arg = _parse_named(item, TOOL_NAMES, "tool")
    if name == "python":
        from gem_core.tools import PythonCodeTool

        return PythonCodeTool(sandbox=sandbox)
    from gem_core.tools import SearchTool

    return SearchTool(index=arg) if arg else SearchTool()


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
        tools: ``python`` (`PythonCodeTool`) and/or ``search[:INDEX]`` (`SearchTool`),
            run by a `ToolEnvWrapper` right around the env.
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

            env = ToolEnvWrapper(env, [_tool(t, sandbox) for t in tools], max_tool_uses=max_tool_uses)
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
    try:
        return transformers.AutoTokenizer.from_pretrained(name)
    except Exception as exc:
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
    old = {"api": "completions", **old}  # runs from before --api were token-id runs
    diffs = [k for k in _PINNED if old.get(k) != new.get(k)]
    if diffs:
        shown = "; ".join(f"{k}: run has {old.get(k)!r}, got {new.get(k)!r}" for k in diffs)
        raise InvalidArgument(
            f"cannot resume {out_dir} with different settings ({shown}). Resume with the "
            "run's own settings (`gem eval --resume --out DIR` takes them from its "
            "manifest) or write to a new --out directory"
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


def evaluate(
    env_ids: str | Sequence[str],
    *,
    base_url: str,
    model: str,
    api: str = "completions",
    episodes: int = 10,
    concurrency: int = 8,
    seed: int = 0,
    tokenizer: str | None = None,
    wrappers: Sequence[str] = (),
    tools: Sequence[str] = (),
    max_tool_uses: int = 10,
    env_kwargs: Mapping[str, Any] | None = None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_tokens: int = 1024,
    max_turns: int | None = None,
    max_context: int = 4096,
    system_prompt: str | None = None,
    timeout: float = 120.0,
    max_retries: int = 3,
    out_dir: str | Path | None = None,
    resume: bool = False,
    retry_errors: bool = False,
    progress: bool = True,
    print_summary: bool = False,
    command_line: Sequence[str] | None = None,
    policy: Any = None,
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

    Transient HTTP failures are retried ``max_retries`` times; an episode whose
    requests still fail (HTTP errors, invalid JSON, no choices, a hung request past
    ``timeout``), or whose env raises, is recorded with its ``error`` and counted as not
    solved — the run goes on. Ctrl-C (SIGINT, main thread) stops the run cleanly: finished episodes are
    kept, the summary is written and ``interrupted`` is set.

    With ``out_dir``, writes ``manifest.json`` (at the start, updated at the end),
    ``episodes.jsonl`` (one record per episode, appended as each finishes),
    ``summary.json`` and ``summary.md``.

    Args:
        env_ids: one or more registered env ids.
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the served model name.
        api: ``"completions"`` (token ids) or ``"chat"`` (chat messages), see above.
        episodes: episodes per env.
        concurrency: episodes in flight at once.
        seed: the base env seed (see above).
        tokenizer: tokenizer name or directory (default: ``model``); ``"completions"``
            mode only.
        wrappers: named wrappers, outermost last: ``history[:FORMAT]``.
        tools: ``python`` and/or ``search[:INDEX]`` (see `build_env`).
        max_tool_uses: per-episode tool-call limit.
        env_kwargs: constructor arguments for every env (e.g. ``{"data_path": "sample"}``).
        temperature, top_p, max_tokens: sampling (``temperature=0``: greedy).
        max_turns: the engine's turn limit per episode (``None``: the env's own).
        max_context: prompt plus ``max_tokens`` must fit in it, else the episode ends
            (``end_reason="context"``).
        system_prompt: text of a system message before the first observation.
        timeout: seconds per HTTP request.
        max_retries: retries of a request after a transient failure.
        out_dir: the run directory (``None``: nothing written).
        resume: continue the run in ``out_dir``: episodes already recorded are not run
            again. The pinned settings must match the manifest's; ``episodes`` may grow.
        retry_errors: with ``resume``, also run again the episodes recorded with an error.
        progress: show a progress bar on stderr.
        print_summary: print the summary table to stdout at the end.
        command_line: recorded in the manifest (default ``sys.argv``).
        policy: a ready backend to use instead of the HTTP client (tests, local models):
            a `gem_core.rl.Policy` (``generate``) in ``"completions"`` mode, an object with
            an async ``chat(messages, sampling) -> ChatResult`` (`gem_core.rl.ChatPolicy`)
            in ``"chat"`` mode; the endpoint is then not contacted.

    Returns:
        The `EvalResult`.

    Raises:
        NameNotFound / VersionNotFound: an unknown env id ("did you mean").
        EndpointUnreachable: nothing answers at ``base_url``.
        InvalidArgument: a bad setting, an env with images in ``"completions"`` mode
            (use ``api="chat"``), a resume that does not match the run (or asks
            for fewer episodes), an ``out_dir`` that already holds a run without
            ``resume``, or an ``out_dir`` that cannot be created or written.
    """
    from gem_core.registration import spec

    ids = [env_ids] if isinstance(env_ids, str) else list(env_ids)
    if not ids:
        raise InvalidArgument("evaluate needs at least one env id, got none")
    if len(set(ids)) != len(ids):
        raise InvalidArgument(f"env ids repeat in {ids}; give each env once (use episodes= for more)")
    for env_id in ids:
        spec(env_id)  # unknown ids fail here, with "did you mean"
    for name, value in (("episodes", episodes), ("concurrency", concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"{name} must be a positive int, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgument(f"seed must be a non-negative int, got {seed!r}")
    for w in wrappers:
        _parse_named(w, WRAPPER_NAMES, "wrapper")
    for t in tools:
        _parse_named(t, TOOL_NAMES, "tool")
    if retry_errors and not resume:
        raise InvalidArgument("retry_errors=True only applies to a resumed run; pass resume=True too")
    if api not in API_MODES:
        raise InvalidArgument(
            f"unknown api {api!r}: expected one of {', '.join(API_MODES)} (completions: token "
            "ids to /v1/completions with a local tokenizer; chat: messages to /v1/chat/completions)"
        )
    if api == "chat" and tokenizer is not None:
        raise InvalidArgument(
            f"tokenizer={tokenizer!r} only applies to api='completions' (token ids); with "
            "api='chat' the server applies its own chat template: drop --tokenizer"
        )
    if policy is not None and not callable(getattr(policy, "chat" if api == "chat" else "generate", None)):
        need = "an async chat(messages, sampling) -> ChatResult" if api == "chat" else \
            "an async generate(prompt_ids, sampling) -> GenerationResult"
        raise InvalidArgument(
            f"policy {type(policy).__name__} does not fit api={api!r}: it needs {need} "
            f"method; pass api={'completions' if api == 'chat' else 'chat'!r} or another policy"
        )

    if api == "completions":
        for env_id in ids:
            if "image" in _modalities(env_id):
                raise InvalidArgument(_images_need_chat(env_id, "its observations carry images"))

    from gem_core.rl.sampling import SamplingParams

    sampling = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_tokens, seed=seed)
    config: dict[str, Any] = {
        "env_ids": ids,
        "model": model,
        "api": api,
        "episodes": episodes,
        "seed": seed,
        "tokenizer": tokenizer,
        "wrappers": list(wrappers),
        "tools": list(tools),
        "max_tool_uses": max_tool_uses,
        "env_kwargs": dict(env_kwargs or {}),
        "temperature": temperature,
        "top_p": top_p,
        "max_tokens": max_tokens,
        "max_turns": max_turns,
        "max_context": max_context,
        "system_prompt": system_prompt,
    }

    out = Path(out_dir) if out_dir is not None else None
    done: list[dict[str, Any]] = []
    created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    if out is not None:
        has_run = (out / rec.MANIFEST_FILE).exists() or (out / rec.RECORDS_FILE).exists()
        if resume and has_run:
            old = rec.read_manifest(out)
            _check_resume(old.get("config", {}), config, out)
            ran_before = old.get("config", {}).get("episodes", 0)
            if isinstance(ran_before, int) and episodes < ran_before:
                raise InvalidArgument(
                    f"cannot resume {out} with episodes={episodes}: the run asks for "
                    f"{ran_before} episodes per env and a resume may only add episodes. Pass "
                    f"--episodes {ran_before} or more (or leave it out), or write to a new --out "
                    "directory"
                )
            created = old.get("created_at", created)
            done = rec.read_records(out / rec.RECORDS_FILE)
            if retry_errors:
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

    wanted = [(e, i, seed + i) for e in ids for i in range(episodes)]
    finished = {(r["env_id"], int(r["index"])) for r in done}
    jobs = [j for j in wanted if (j[0], j[1]) not in finished]

    formatter = None
    if jobs:
        if policy is None:
            if not base_url.startswith(("http://", "https://")):
                raise InvalidArgument(
                    f"base_url must start with http:// or https://, got {base_url!r} "
                    "(e.g. http://127.0.0.1:8000/v1)"
                )
            check_endpoint(base_url, timeout=min(float(timeout), 10.0))
        if api == "completions":
            from gem_core.rl.chat import ChatFormatter

            formatter = ChatFormatter(
                _load_tokenizer(tokenizer or model), system_prompt=system_prompt, max_context=max_context
            )

    manifest: dict[str, Any] = {
        "format": rec.MANIFEST_FORMAT,
        "gem_core_version": _gem_version(),
        "created_at": created,
        "updated_at": created,
        "status": "running",
        "command_line": list(command_line) if command_line is not None else list(sys.argv),
        "config": config,
        "endpoint": {"base_url": base_url, "api": api,
                     "route": "/chat/completions" if api == "chat" else "/completions",
                     "timeout_s": timeout, "max_retries": max_retries},
        "concurrency": concurrency,
        "envs": {e: _env_info(e) for e in ids},
        "seeds": {
            "env_seeds": [seed + i for i in range(episodes)],
            "rule": "episode i of every env resets with seed + i and samples with "
                    "gem_core.rl.derive_seed(seed, 'sample', env_id, i)",
        },
        "sampling": {"temperature": temperature, "top_p": top_p, "max_new_tokens": max_tokens,
                     "stop_token_ids": list(formatter.stop_token_ids) if formatter else None},
        "layout": "packed" if api == "completions" else "messages",
        "token_counts": "tokenizer" if api == "completions" else "server usage (null when absent)",
        "stack": {"tools": list(tools), "wrappers": list(wrappers),
                  "order": "make(env_id, **env_kwargs) -> ToolEnvWrapper(tools) -> wrappers in order"},
        # Where dataset-backed envs took their rows (gem_core.data.load_rows): the same ids
        # read other data under another GEM_DATA / GEM_DATA_DIR (env_kwargs' data_path is in config).
        "data_env": {v: os.environ.get(v) for v in ("GEM_DATA", "GEM_DATA_DIR", "HF_HUB_OFFLINE",
                                                     "HF_DATASETS_OFFLINE")},
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {p: _version(p) for p in ("transformers", "tokenizers", "torch")},
    }
    if out is not None:
        try:
            rec.write_records(out / rec.RECORDS_FILE, done)  # drops partial lines and retried errors
            rec.write_json(out / rec.MANIFEST_FILE, manifest)
        except OSError as exc:
            raise _unwritable(out, exc) from None

    ran = 0
    interrupted = False
    results = list(done)
    if jobs:
        own_policy = policy is None
        if own_policy:
            from gem_core.rl.policies import OpenAIChatPolicy, OpenAIPolicy

            client = OpenAIChatPolicy if api == "chat" else OpenAIPolicy
            policy = client(base_url, model, timeout=timeout, max_retries=max_retries,
                            max_connections=concurrency)
        from gem_core.rl.collect import EpisodeJob, run_jobs
        from gem_core.rl.sampling import derive_seed
        from gem_core.rl.types import Episode

        if api == "chat":
            from gem_core.rl.loop import run_chat_episode

            play = functools.partial(run_chat_episode, policy=policy, system_prompt=system_prompt,
                                     max_turns=max_turns, max_context=max_context)
        else:
            from gem_core.rl.loop import run_episode

            play = functools.partial(run_episode, policy=policy, formatter=formatter,
                                     max_turns=max_turns)
        bar = _Progress(len(wanted), len(done), sum(bool(r["success"]) for r in done),
                        sum(bool(r["error"]) for r in done), progress)
        sink = (out / rec.RECORDS_FILE).open("a", encoding="utf-8") if out is not None else None

        def on_done(job: EpisodeJob, ep: Episode) -> None:
            nonlocal ran
            record = rec.episode_record(ep, index=job.tag, sampling_seed=job.sampling_seed, api=api)
            results.append(record)
            ran += 1
            if sink is not None:
                rec.append_record(sink, record)
            bar.update(record)

        shared = _SharedSandbox(concurrency)
        uses_python = any(_parse_named(t, TOOL_NAMES, "tool")[0] == "python" for t in tools)

        def make_env(env_id: str) -> Env:
            env = build_env(env_id, wrappers=wrappers, tools=tools, max_tool_uses=max_tool_uses,
                            env_kwargs=env_kwargs, sandbox=shared.get() if uses_python else None)
            return env if api == "chat" else _TextOnly(env, env_id)

        episode_jobs = [EpisodeJob(e, s, derive_seed(sampling.seed, "sample", e, i), e, tag=i)
                        for e, i, s in jobs]
        try:
            interrupted = _run_loop(
                run_jobs(episode_jobs, play, make_env=make_env, sampling=sampling,
                         concurrency=concurrency, layout="per_turn" if api == "chat" else "packed",
                         thread_name="gem-eval-env", on_episode=on_done)
            )
        finally:
            bar.close()
            shared.close()
            if sink is not None:
                sink.close()
            if own_policy:
                policy.close()

    order = {e: i for i, e in enumerate(ids)}
    results.sort(key=lambda r: (order.get(r["env_id"], len(order)), r["index"]))
    have = {(r["env_id"], int(r["index"])) for r in results}
    missing = [(e, i) for e, i, _ in wanted if (e, i) not in have]
    summary = summarize(results)
    manifest["status"] = "interrupted" if interrupted else ("complete" if not missing else "partial")
    manifest["updated_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    manifest["counts"] = {"wanted": len(wanted), "recorded": len(results), "ran_this_call": ran,
                          "missing": len(missing)}
    if out is not None:
        rec.write_json(out / rec.SUMMARY_JSON, summary)
        (out / rec.SUMMARY_MD).write_text(
            f"# gem eval: {model}\n\n{summary_markdown(summary)}\n\n"
            f"Status: {manifest['status']} ({len(results)}/{len(wanted)} episodes). "
            "Success: 95% Wilson interval; errored episodes count as not solved.\n",
            encoding="utf-8",
        )
        rec.write_json(out / rec.MANIFEST_FILE, manifest)
    result = EvalResult(results, summary, manifest, out, interrupted, ran, missing)
    if print_summary:
        print(result.table())
    return result


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


class _TextOnly(Wrapper):
    """Refuses observations with images (``--api completions`` would drop them)."""

    def __init__(self, env: Env, env_id: str):
        super().__init__(env)
        self._env_id = env_id

    def _check(self, obs: Any) -> Any:
        if isinstance(obs, Mapping) and obs.get("images"):
            raise InvalidArgument(
                _images_need_chat(self._env_id, f"an observation carries {len(obs['images'])} image(s)")
            )
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        obs, info = self.env.reset(seed=seed, options=options)
        return self._check(obs), info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._check(obs), reward, terminated, truncated, info


def _unwritable(out: Path, exc: OSError) -> InvalidArgument:
    return InvalidArgument(
        f"cannot write the run directory {out} ({type(exc).__name__}: {exc}); pass an --out "
        "directory you can create and write to"
    )


def _gem_version() -> str:
    import gem_core

    return gem_core.__version__


def _run_loop(coro: Any) -> bool:
    """Run ``coro`` on a fresh loop; return True when SIGINT stopped it."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(coro)
    stopped = threading.Event()
    handled = False

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
        if not stopped.is_set():
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
    return stopped.is_set()
