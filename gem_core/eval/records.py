"""Run directories of `gem eval`: per-episode records (JSON lines), the manifest and the summary files."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gem_core.errors import InvalidArgument

__all__ = [
    "RECORDS_FILE",
    "MANIFEST_FILE",
    "SUMMARY_JSON",
    "SUMMARY_MD",
    "MANIFEST_FORMAT",
    "episode_record",
    "read_records",
    "write_records",
    "append_record",
    "read_manifest",
    "write_json",
    "write_text",
    "load_run",
]

RECORDS_FILE = "episodes.jsonl"
MANIFEST_FILE = "manifest.json"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
MANIFEST_FORMAT = "gem-eval/1"


def episode_record(
    episode: Any, *, index: int, sampling_seed: int | None, api: str = "completions"
) -> dict[str, Any]:
    """One JSON-able record of a finished `gem_core.rl.Episode`.

    Keys: ``env_id``, ``index`` (episode number within the env; with ``env_id`` the
    episode's identity), ``seed`` (passed to ``env.reset``), ``sampling_seed``,
    ``success``, ``return``, ``num_turns``, ``end_reason``, ``error`` (``None`` or
    ``"<where>: <Type>: message"``), ``rewards``, ``actions``, ``observations`` (the
    text of the observation each turn answered), ``observation_images`` (one list per
    turn, parallel to ``observations``: a ``{"mime", "bytes", "width", "height"}``
    summary of each image its observation carried, ``[]`` for text; never the image
    data), ``final_observation`` (text), ``format_errors`` (turns
    flagged ``info["format_error"]``), ``final_format_error`` (the last turn was one),
    ``truncated_responses`` (responses that hit the
    token limit), ``tool_calls`` (``{tool name: calls run}``), ``prompt_tokens`` (prompt
    tokens sent, summed over requests), ``generated_tokens``, ``latency_s`` (wall time
    of the episode), ``template_rewrite``.

    Images (``api="chat"``): the records never hold image data or base64, only the
    summaries (from ``turn.info["observation_images"]``, set by
    `gem_core.rl.run_chat_episode`), plus ``images_sent`` and ``image_bytes_sent``
    (image parts sent over all requests, re-sends of earlier turns' images included;
    ``0`` for text episodes).

    Token counts: with ``api="completions"`` they are counted from the turns' token ids;
    with ``api="chat"`` (text-level episodes, no token ids) they are the servers'
    ``usage`` counts from ``episode.stats`` — ``None`` when a response lacked them.
    """
    turns = list(episode.turns)
    tools: dict[str, int] = {}
    sent = 0
    context = 0
    for t in turns:
        if t.starts_sample:
            context = 0
        context += len(t.prompt_ids)
        sent += context
        context += len(t.response_ids)
        if t.info.get("use_tool"):
            name = str(t.info.get("tool_name") or "tool")
            tools[name] = tools.get(name, 0) + 1
    return {
        "env_id": episode.env_id,
        "index": int(index),
        "seed": episode.seed,
        "sampling_seed": sampling_seed,
        "success": bool(episode.success),
        "return": float(episode.episode_return),
        "num_turns": len(turns),
        "end_reason": episode.end_reason,
        "error": episode.error,
        "rewards": [float(t.reward) for t in turns],
        "actions": [t.action for t in turns],
        "observations": [t.observation for t in turns],
        "observation_images": [_image_summaries(t.info) for t in turns],
        "final_observation": episode.final_observation,
        "format_errors": sum(1 for t in turns if t.format_error),
        "final_format_error": bool(turns and turns[-1].format_error),
        "truncated_responses": sum(1 for t in turns if t.response_truncated),
        "tool_calls": tools,
        "prompt_tokens": sent if api != "chat" else _usage(episode, "prompt_tokens"),
        "generated_tokens": sum(len(t.response_ids) for t in turns)
        if api != "chat"
        else _usage(episode, "generated_tokens"),
        "latency_s": float(episode.stats.get("wall_time_s", 0.0)),
        "template_rewrite": bool(episode.template_rewrite),
        "images_sent": int(episode.stats.get("images_sent", 0)),
        "image_bytes_sent": int(episode.stats.get("image_bytes_sent", 0)),
    }


def _image_summaries(info: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON-able image summaries of one turn (only the summary keys, never data)."""
    summaries = info.get("observation_images") or []
    return [
        {k: s.get(k) for k in ("mime", "bytes", "width", "height")}
        for s in summaries
        if isinstance(s, Mapping)
    ]


def _usage(episode: Any, key: str) -> int | None:
    value = episode.stats.get(key)
    return None if value is None else int(value)


MAX_RECORD_BYTES = 16 << 20
"""Longest records line read (16 MiB: a long episode's whole transcript is a few MiB); a
longer line is skipped without being held in memory."""
MAX_RECORD_DEPTH = 256
"""Deepest JSON nesting read from a run directory (records nest a few levels); deeper
lines are skipped (a manifest is refused) instead of overflowing the decoder's stack."""


def _bounded_lines(f: Any, limit: int) -> Iterator[bytes]:
    """The lines of binary file ``f`` of at most ``limit`` bytes; longer ones are skipped,
    read in 1 MiB pieces and dropped."""
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        if len(line) > limit:
            while not line.endswith(b"\n"):
                line = f.readline(1 << 20)
                if not line:
                    return
            continue
        yield line


def _loads(text: str) -> Any:
    from gem_core.tools.text import loads_bounded

    return loads_bounded(text, max_depth=MAX_RECORD_DEPTH, max_chars=MAX_RECORD_BYTES)


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a records file; the last record of an identity wins.

    A line that is not a JSON object with an ``env_id`` and an int ``index`` (a run
    killed while writing it, possibly in the middle of a multi-byte character), or that is
    over `MAX_RECORD_BYTES` or nests deeper than `MAX_RECORD_DEPTH` (a damaged or
    hostile shared run dir), is skipped. A missing file reads as no records.
    """
    path = Path(path)
    if not path.is_file():
        return []
    by_key: dict[tuple[str, int], dict[str, Any]] = {}
    with path.open("rb") as f:  # bytes: a line cut inside a UTF-8 character must not stop the read
        for line in _bounded_lines(f, MAX_RECORD_BYTES):
            try:
                rec = _loads(line.decode("utf-8"))  # invalid UTF-8 and limits: ValueErrors
            except ValueError:
                continue
            if not isinstance(rec, dict) or "env_id" not in rec:
                continue
            index = rec.get("index")
            if isinstance(index, bool) or not isinstance(index, int):
                continue
            by_key[(str(rec["env_id"]), index)] = rec
    return list(by_key.values())


def _record_line(record: Mapping[str, Any]) -> str:
    """One JSON line; readable UTF-8, or ``\\uXXXX`` escapes when the record holds text
    UTF-8 cannot encode (a lone surrogate from a server's JSON ``"\\ud83d"``)."""
    line = json.dumps(record, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record, ensure_ascii=True)
    return line + "\n"


def write_records(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> None:
    """Replace the records file atomically with ``records``."""
    _atomic_write(Path(path), "".join(_record_line(r) for r in records))


def append_record(f: Any, record: Mapping[str, Any]) -> None:
    """Append one record (one line) to an open UTF-8 records file and flush it to the OS."""
    f.write(_record_line(record))
    f.flush()


def write_json(path: str | os.PathLike[str], payload: Any) -> None:
    """Write ``payload`` as indented JSON, atomically (``\\uXXXX`` escapes where UTF-8 cannot
    encode a string, e.g. a command line argument that was not valid UTF-8)."""
    text = json.dumps(payload, indent=2, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(payload, indent=2, ensure_ascii=True, default=str)
    _atomic_write(Path(path), text + "\n")


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) atomically, with the same permissions as the records file."""
    _atomic_write(Path(path), text)


def read_manifest(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a run directory.

    Raises:
        InvalidArgument: the directory has no readable manifest.
    """
    path = Path(run_dir) / MANIFEST_FILE
    try:
        with path.open("rb") as f:
            data = f.read(MAX_RECORD_BYTES + 1)
        if len(data) > MAX_RECORD_BYTES:
            raise ValueError(f"over {MAX_RECORD_BYTES} bytes")
        manifest = _loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise InvalidArgument(
            f"{run_dir} is not a gem eval run: no {MANIFEST_FILE} in it; pass the --out "
            "directory of a `gem eval` run"
        ) from None
    except ValueError as exc:
        raise InvalidArgument(f"{path} is not valid JSON ({exc}); the run directory is damaged") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise InvalidArgument(
            f"{path}: expected a manifest with format {MANIFEST_FORMAT!r}, got "
            f"{manifest.get('format') if isinstance(manifest, dict) else type(manifest).__name__!r}"
        )
    return manifest


def load_run(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(manifest, records)`` of a run directory, records sorted by (env order, index)."""
    manifest = read_manifest(run_dir)
    records = read_records(Path(run_dir) / RECORDS_FILE)
    order = {e: i for i, e in enumerate(manifest.get("config", {}).get("env_ids", []))}
    records.sort(key=lambda r: (order.get(r["env_id"], len(order)), str(r["env_id"]), r["index"]))
    return manifest, records


def _atomic_write(path: Path, text: str) -> None:
    """Write through a temporary file and a rename; the file gets the mode an ordinary
    ``open(path, "w")`` gives (0666 less the umask), like the appended records file —
    ``mkstemp`` alone would leave it 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:  # pragma: no cover - 48 random bits collided
            continue
        break
    else:  # pragma: no cover
        raise FileExistsError(f"could not create a temporary file next to {path}")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
