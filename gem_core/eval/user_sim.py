"""The user simulator of a `gem eval` run: its spec, manifest entry, resume check, probe and build.

Envs whose constructor takes a ``user`` argument (``tau:Retail-v0``: a spec for
`gem_core.multiagent.make_user`) are played opposite a user simulator. A run gives it
once, as a JSON spec (``evaluate(user=...)``, ``gem eval --user-model/--user-base-url``
or ``--env-kwargs '{"user": ...}'``): ``{"kind": "scripted"}`` or ``{"kind": "llm",
"base_url": ..., "model": ..., **LLMUser options}``. The spec, without its API key, is
pinned in the manifest (``config["user"]``, described under ``user_simulator``); the key
is given to each episode's `LLMUser` directly and is never written to the run directory.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from gem_core.errors import InvalidArgument

__all__ = ["USER_API_KEY_ENV", "UNPINNED_FIELDS", "normalize_user", "takes_user", "describe_user",
           "check_resume_user", "user_label"]

#: The environment variable an LLM user simulator's API key is read from when none is given.
USER_API_KEY_ENV = "GEM_USER_API_KEY"
#: Spec fields a resume may change (where the model is served and how requests are retried,
#: like the assistant's ``--base-url``); everything else is pinned.
UNPINNED_FIELDS = ("base_url", "timeout", "max_retries")
_FORMS = ('{"kind": "scripted"} or {"kind": "llm", "base_url": "http://HOST:PORT/v1", '
          '"model": "NAME", ...LLMUser options}')


def _llm_defaults() -> dict[str, Any]:
    """`LLMUser`'s keyword arguments and defaults (``client`` and ``api_key`` left out)."""
    from gem_core.multiagent.users import LLMUser

    params = inspect.signature(LLMUser.__init__).parameters
    return {n: p.default for n, p in params.items()
            if n not in ("self", "client", "api_key") and p.kind is not p.VAR_KEYWORD}


def is_spec(value: Any) -> bool:
    """``value`` is a JSON user spec (not a policy object)."""
    return value is None or isinstance(value, (str, Mapping))


def normalize_user(user: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``(spec, api_key)``: the spec with `LLMUser`'s sampling defaults filled in and its
    ``api_key`` taken out (``(None, None)`` for ``None``).

    Raises:
        InvalidArgument: not a spec, an unknown kind or field, or an LLM spec without a
            ``http(s)://`` ``base_url`` or a ``model``.
    """
    if user is None:
        return None, None
    if user == "scripted":
        return {"kind": "scripted"}, None
    if not isinstance(user, Mapping):
        raise InvalidArgument(
            f"the user simulator must be a JSON spec, {_FORMS}; got {type(user).__name__}. "
            "(A policy object can be passed as env_kwargs['user'] to the env itself)"
        )
    spec = dict(user)
    kind = spec.get("kind")
    if kind == "scripted" and len(spec) == 1:
        return {"kind": "scripted"}, None
    if kind != "llm":
        raise InvalidArgument(f"unknown user simulator spec {json.dumps(spec, default=str)[:300]}: expected {_FORMS}")
    key = spec.pop("api_key", None)
    defaults = _llm_defaults()
    unknown = sorted(set(spec) - set(defaults) - {"kind"})
    if unknown:
        raise InvalidArgument(
            f"the LLM user simulator spec has unknown field(s) {unknown}; expected some of "
            f"{sorted(['kind', 'api_key', *defaults])}"
        )
    base_url, model = spec.get("base_url"), spec.get("model")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise InvalidArgument(
            f"the LLM user simulator needs base_url, the API root of an OpenAI-compatible "
            f"server (e.g. --user-base-url http://127.0.0.1:8001/v1), got {base_url!r}"
        )
    if not isinstance(model, str) or not model:
        raise InvalidArgument(f"the LLM user simulator needs model (--user-model NAME), got {model!r}")
    out = {"kind": "llm", "base_url": base_url, "model": model}
    for name, default in defaults.items():
        if name in ("base_url", "model"):
            continue
        if name == "extra_body":
            out[name] = dict(spec.get(name) or {})
        elif name in spec:
            out[name] = spec[name]
        elif name not in ("timeout", "max_retries"):  # those follow the run's settings
            out[name] = default
    for name, value in out.items():
        why = _bad_field(name, value)
        if why:
            raise InvalidArgument(f"the LLM user simulator's {name} must be {why}, got {value!r}")
    if key is not None and not isinstance(key, str):
        raise InvalidArgument(f"the user simulator's api_key must be a string, got {type(key).__name__}")
    return out, key


def _bad_field(name: str, value: Any) -> str | None:
    """What a spec field must be, when ``value`` is not that (``None``: it is fine)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if name in ("temperature", "top_p"):
        return None if number and value >= 0 else "a number >= 0"
    if name == "timeout":
        return None if number and value > 0 else "a number of seconds > 0"
    if name in ("max_tokens", "max_retries"):
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= (name == "max_tokens")
        return None if ok else ("an int >= 1" if name == "max_tokens" else "an int >= 0")
    if name == "extra_body":
        return None if isinstance(value, Mapping) else "a JSON object"
    if name == "stop_token":
        return None if isinstance(value, str) and value.strip() else "a non-empty string"
    return None


def takes_user(env_id: str) -> bool:
    """The env's constructor (its registered entry point) has a ``user`` argument."""
    from gem_core.registration import load_entry_point, spec

    s = spec(env_id)
    if "user" in (s.kwargs or {}):
        return True
    try:
        target = load_entry_point(s.entry_point) if isinstance(s.entry_point, str) else s.entry_point
        params = inspect.signature(target).parameters
    except (Exception, ValueError):  # make() reports an entry point that cannot be loaded
        return False
    return "user" in params


def _default_user(env_id: str) -> Any:
    from gem_core.registration import load_entry_point, spec

    s = spec(env_id)
    if "user" in (s.kwargs or {}):
        return s.kwargs["user"]
    try:
        target = load_entry_point(s.entry_point) if isinstance(s.entry_point, str) else s.entry_point
        default = inspect.signature(target).parameters["user"].default
    except Exception:
        return None
    return None if default is inspect.Parameter.empty else default


def describe_user(spec: Mapping[str, Any] | None, env_ids: Sequence[str], env_user: Any,
                  key_set: bool) -> dict[str, Any] | None:
    """The manifest's ``user_simulator`` entry: the spec played (``None``: no env takes a
    user), whether a key was set (never the key), and the route of an LLM user."""
    if spec is not None:
        out = dict(spec)
        if out["kind"] == "llm":
            out["route"] = "/chat/completions"
            out["api_key"] = "set" if key_set else None
        return out
    if env_user is not None:  # a policy object given to the env as is
        return {"kind": "object", "repr": repr(env_user)[:300]}
    users = [e for e in env_ids if takes_user(e)]
    if not users:
        return None
    defaults = {}
    for e in users:
        default = _default_user(e)
        try:
            defaults[e] = normalize_user(default)[0] or {"kind": "scripted"}
        except InvalidArgument:
            defaults[e] = {"kind": "object", "repr": repr(default)[:300]}
    first = next(iter(defaults.values()))
    if all(d == first for d in defaults.values()):
        return {**first, "default": True}
    return {"kind": "per env", "default": True, "envs": defaults}


def pinned(spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The fields of a spec a resume must keep."""
    return None if spec is None else {k: v for k, v in spec.items() if k not in UNPINNED_FIELDS}


def check_resume_user(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, out_dir: Any) -> None:
    """Refuse a resume whose user simulator differs from the run's, naming each difference.

    Raises:
        InvalidArgument: another kind, model or sampling (``base_url``, ``timeout`` and
            ``max_retries`` may change).
    """
    a, b = pinned(old), pinned(new)
    if json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str):
        return
    if a is None or b is None:
        shown = f"run has {user_label(old) if old else 'none'}, got {user_label(new) if new else 'none'}"
    else:
        shown = "; ".join(f"{k}: run has {a.get(k)!r}, got {b.get(k)!r}"
                          for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))
    raise InvalidArgument(
        f"cannot resume {out_dir} with another user simulator ({shown}). The user simulator "
        "is part of what the run measures: resume with the run's own (leave the --user-* "
        "flags out: `gem eval --resume --out DIR` takes it from the manifest; a moved server "
        "may get --user-base-url) or write to a new --out directory"
    )


def user_label(spec: Mapping[str, Any] | None) -> str:
    """A short name: ``scripted``, or the model's last path part (``org/Model-7B`` -> ``Model-7B``)."""
    if not spec:
        return "none"
    kind = spec.get("kind")
    if kind == "llm":
        return str(spec.get("model") or "?").rstrip("/").rsplit("/", 1)[-1]
    return str(kind or "?")
