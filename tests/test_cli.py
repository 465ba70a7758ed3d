"""Tests for the `gem` command line."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
import time

from gem_core.cli import main, play


def test_list_filters_and_reports_no_match(capsys):
    assert main(["list", "Echo"]) == 0
    out = capsys.readouterr().out
    assert "toy:Echo-v0" in out and "PrimeCount" not in out
    assert out.splitlines()[0].split() == ["ID", "FAMILY", "OFFLINE", "DESCRIPTION"]
    assert main(["list", "no-such-env-zz"]) == 1
    assert "no env id contains" in capsys.readouterr().err


def test_list_takes_glob_patterns(capsys):
    assert main(["list", "game:*-easy"]) == 0
    ids = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:] if line.startswith("game:")]
    assert ids and all(i.startswith("game:") and i.endswith("-easy") for i in ids)
    assert "game:GuessTheNumber-v0-easy" in ids and "game:GuessTheNumber-v0-hard" not in ids
    assert main(["list", "GAME:guess*"]) == 0  # case-insensitive
    assert "game:GuessTheNumber-v0-random" in capsys.readouterr().out
    assert main(["list", "nothing:*"]) == 1
    assert "no env id matches 'nothing:*'" in capsys.readouterr().err


def test_list_family_name_lists_that_family_only(capsys):
    assert main(["list", "game"]) == 0
    ids = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:] if ":" in line.split(" ")[0]]
    assert "game:GuessTheNumber-v0-easy" in ids
    assert all(i.startswith("game:") for i in ids), [i for i in ids if not i.startswith("game:")]
    assert main(["list", "RG:"]) == 0
    ids = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:] if ":" in line.split(" ")[0]]
    assert "rg:game_of_life" in ids and all(i.startswith("rg:") for i in ids)
    assert main(["list", "game_of"]) == 0  # not a family: text an id contains, any family
    assert "rg:game_of_life" in capsys.readouterr().out


def test_version(capsys):
    import gem_core

    r = subprocess.run([sys.executable, "-m", "gem_core.cli", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"gem (gem-core) {gem_core.__version__}"


def test_play_reads_actions_and_reports_outcome():
    import gem_core

    probe = gem_core.make("game:GuessTheNumber-v0-hard")
    probe.reset(seed=0)
    target = probe.unwrapped.target
    wrong = 1 if target != 1 else 2
    out = io.StringIO()
    lines = f"not a move\n\\boxed{{{wrong}}}\n\\boxed{{{target}}}\n"
    success = play("game:GuessTheNumber-v0-hard", seed=0, stdin=io.StringIO(lines), stdout=out)
    text = out.getvalue()
    # The first line is a format error, which ends the episode (reference behaviour).
    assert success is False and "Format error" in text and "reward -0.100" in text
    out = io.StringIO()
    lines = f"\\boxed{{{wrong}}}\n\\boxed{{{target}}}\n"
    assert play("game:GuessTheNumber-v0-hard", seed=0, stdin=io.StringIO(lines), stdout=out) is True
    assert "SUCCESS" in out.getvalue() and "reward +1.000" in out.getvalue()


def test_play_commands_never_reach_the_env(monkeypatch):
    import gem_core

    seen = []
    real_make = gem_core.make

    def make(env_id, **kwargs):
        env = real_make(env_id, **kwargs)
        step = env.step

        def recording_step(action):
            seen.append(action)
            return step(action)

        env.step = recording_step
        return env

    monkeypatch.setattr(gem_core, "make", make)
    out = io.StringIO()
    lines = ":help\n:hint\n:bogus\n::raw\n:quit\n"
    assert play("toy:Echo-v0", seed=0, stdin=io.StringIO(lines), stdout=out) is False
    text = out.getvalue()
    assert ":hint" in text and "an example of a well-formed action, not played" in text
    assert "unknown command ':bogus'" in text and "quit." in text
    assert seen == [":raw"]  # only the escaped line was an action


def test_play_shows_the_correct_answer_when_unsolved():
    import gem_core

    probe = gem_core.make("game:GuessTheNumber-v0-easy")
    probe.reset(seed=2)
    target = probe.unwrapped.target
    wrong = [n for n in range(1, 11) if n != target][:4]
    out = io.StringIO()
    lines = "".join(f"\\boxed{{{n}}}\n" for n in wrong)
    assert play("game:GuessTheNumber-v0-easy", seed=2, stdin=io.StringIO(lines), stdout=out) is False
    assert f"the correct answer: {target}" in out.getvalue()
    out = io.StringIO()
    probe = gem_core.make("toy:Echo-v0")
    probe.reset(seed=4)
    word = probe.unwrapped.word
    assert play("toy:Echo-v0", seed=4, stdin=io.StringIO("x\nx\nx\nx\n"), stdout=out) is False
    assert f"the correct answer: {word}" in out.getvalue()


def test_play_quit_and_unknown_env(capsys):
    out = io.StringIO()
    assert play("toy:Echo-v0", seed=0, stdin=io.StringIO(":q\n"), stdout=out) is False
    assert "quit." in out.getvalue()
    assert main(["play", "toy:Ehco-v0"]) == 2
    assert "Did you mean" in capsys.readouterr().err


def test_play_through_a_pseudo_terminal():
    """`gem play` driven like a human at a terminal: prompt, typed action, outcome."""
    pid, fd = pty.fork()
    if pid == 0:  # child: run the CLI on the pty
        os.execv(sys.executable, [sys.executable, "-m", "gem_core.cli", "play", "toy:Echo-v0", "--seed", "3"])
    buf = b""

    def read_until(token: bytes, timeout: float = 20.0) -> bytes:
        nonlocal buf
        end = time.time() + timeout
        while token not in buf:
            left = end - time.time()
            assert left > 0, f"timed out waiting for {token!r}; got {buf[-500:]!r}"
            r, _, _ = select.select([fd], [], [], left)
            if r:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                buf += chunk
        return buf

    text = read_until(b"your action> ").decode()
    word = text.split("nothing else: ")[1].split()[0]
    os.write(fd, f"{word}\n".encode())
    text = read_until(b"episode").decode()
    _, status = os.waitpid(pid, 0)
    assert "SUCCESS" in read_until(b"return").decode()
    assert os.WEXITSTATUS(status) == 0
    assert "reward +1.000" in text


def test_help_on_every_command():
    commands = ([], ["list"], ["play"], ["eval"], ["report"], ["bench"], ["index"], ["index", "build"])
    for cmd in commands:
        r = subprocess.run([sys.executable, "-m", "gem_core.cli", *cmd, "--help"], capture_output=True, text=True)
        assert r.returncode == 0 and f"usage: gem {' '.join(cmd)}".rstrip() in r.stdout, (cmd, r.stderr)
    r = subprocess.run([sys.executable, "-m", "gem_core.cli", "eval", "--help"], capture_output=True, text=True)
    assert "--base-url" in r.stdout and "--resume" in r.stdout and "95% Wilson" in r.stdout


def test_list_shows_family_and_offline_flag(capsys):
    from gem_core.registration import registry

    assert main(["list", "toy:Echo"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("toy:Echo-v0"))
    assert line.split()[1:3] == ["toy", "yes"] and "Repeat a random word" in line
    # A hub-backed id with a shipped sample says how it runs offline, not a bare "online".
    assert not registry["math:GSM8K"].offline
    assert main(["list", "math:GSM8K"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("math:GSM8K "))
    assert line.split()[2] == "GEM_DATA=sample" and "online" not in out
    assert "with GEM_DATA=sample (or data_path='sample') it runs offline" in out


def test_bench_passes_its_options_through(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--only", "import", "--no-reference", "--json", str(out)]) == 0
    assert json.loads(out.read_text())  # the harness ran and wrote its results
    r = subprocess.run([sys.executable, "-m", "gem_core.cli", "bench", "--", "--help"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "usage: benchmarks/run.py" in r.stdout


def test_unknown_command_options_fail_with_usage():
    r = subprocess.run([sys.executable, "-m", "gem_core.cli", "list", "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr


def test_play_has_line_editing_on_a_terminal():
    """Ctrl-A (readline: start of line) lets a typo at the start be fixed before Enter."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-m", "gem_core.cli", "play", "toy:Echo-v0", "--seed", "3"])
    buf = b""

    def read_until(token: bytes, timeout: float = 20.0) -> bytes:
        nonlocal buf
        end = time.time() + timeout
        while token not in buf:
            left = end - time.time()
            assert left > 0, f"timed out waiting for {token!r}; got {buf[-500:]!r}"
            r, _, _ = select.select([fd], [], [], left)
            if r:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                buf += chunk
        return buf

    text = read_until(b"your action> ").decode()
    word = text.split("nothing else: ")[1].split()[0]
    os.write(fd, f"{word[1:]}\x01{word[0]}\n".encode())  # type the tail, jump home, add the head
    read_until(b"return")
    _, status = os.waitpid(pid, 0)
    assert b"SUCCESS" in buf and os.WEXITSTATUS(status) == 0, buf[-800:]


def test_every_eval_setting_has_its_gem_eval_flag():
    """`gem eval` reads each `EvalConfig` setting from the flag of the same name, so a new
    field without its flag fails here, not in a user's run."""
    import dataclasses

    from gem_core.cli import build_parser
    from gem_core.eval.config import EvalConfig

    args = build_parser().parse_args(["eval"])
    # Set by flags of other names (--out, --no-progress, --ray, --ray-resources, --user-*)
    # or by the command itself (command_line, print_summary).
    other = {"user", "out_dir", "progress", "print_summary", "command_line", "ray_address", "ray_options"}
    missing = [f.name for f in dataclasses.fields(EvalConfig) if f.name not in other and not hasattr(args, f.name)]
    assert missing == [], f"EvalConfig fields without a gem eval flag of that name: {missing}"


def _ctrl_c_during_shutdown(quiet: bool) -> subprocess.CompletedProcess:
    """A process whose exit waits on a busy worker thread (as an interrupted `gem eval` waits on
    env steps in flight) gets Ctrl-C while the interpreter shuts down."""
    code = (
        "import sys, threading, time\n"
        "from gem_core.cli import exit_quietly_on_sigint\n"
        "threading.Thread(target=time.sleep, args=(30,)).start()  # joined at shutdown\n"
        + ("exit_quietly_on_sigint(130)\n" if quiet else "")
        + "print('summary', flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "summary\n"
    time.sleep(0.5)  # in threading's shutdown join now
    proc.send_signal(__import__("signal").SIGINT)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_after_an_interrupted_run_exits_without_a_traceback():
    loud = _ctrl_c_during_shutdown(quiet=False)
    assert "KeyboardInterrupt" in loud.stderr  # what a second Ctrl-C printed before
    quiet = _ctrl_c_during_shutdown(quiet=True)
    assert quiet.returncode == 130 and quiet.stderr == "", quiet.stderr
