"""`gem eval --ray ADDRESS`: the envs of an evaluation in Ray actors on the two-node loopback
cluster, the model on the eval tests' local server (tiny offline model)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gem_core.cli import main
from tests.distributed.conftest import REPO
from tests.eval.conftest import server, tiny  # noqa: F401 - the eval tests' fixtures

pytestmark = pytest.mark.timeout(300)

GTN = "game:GuessTheNumber-v0-easy"
ECHO = "toy:Echo-v0"
# What an episode measured: must not depend on where its env ran.
SAME = ("env_id", "index", "seed", "sampling_seed", "rewards", "return", "num_turns", "success",
        "end_reason", "error", "actions", "observations")


def _args(server, tiny, out, *extra):  # noqa: F811 - fixtures
    return ["eval", GTN, ECHO, "--base-url", server.base_url, "--model", "tiny", "--tokenizer", tiny[1],
            "--max-tokens", "6", "--max-turns", "3", "--temperature", "1.0", "--seed", "3",
            "--concurrency", "4", "--out", str(out), "--no-progress", *extra]


def _measured(out: Path) -> list[tuple]:
    lines = (out / "episodes.jsonl").read_text().splitlines()
    return [tuple(json.dumps(rec[k], sort_keys=True) for k in SAME) for rec in map(json.loads, lines)]


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_eval_on_ray_gives_the_local_records_and_resumes_anywhere(ray_cluster, server, tiny, tmp_path):  # noqa: F811
    local, remote, moved = tmp_path / "local", tmp_path / "ray", tmp_path / "moved"
    assert main(_args(server, tiny, local, "--episodes", "4")) == 0
    ray_flags = ("--ray", ray_cluster.address, "--ray-actors", "2", "--ray-resources", '{"gem_env": 1}')
    assert main(_args(server, tiny, remote, "--episodes", "4", *ray_flags)) == 0

    want = _measured(local)
    assert len(want) == 8 and len({r[SAME.index("actions")] for r in want}) > 1  # varied episodes
    assert _measured(remote) == want
    pool = _manifest(remote)["env_pool"]
    assert pool["kind"] == "ray" and pool["address"] == ray_cluster.address and pool["pinned"] is False
    assert pool["num_actors"] == 2 and pool["ray_options"] == {"num_cpus": 1, "resources": {"gem_env": 1}}
    assert 2 <= pool["envs_built"] <= 8 and pool["actor_restarts"] == 0  # one per id first, then reused
    assert _manifest(local)["env_pool"] is None

    # Where the envs run selects no data: a run begun on Ray resumes in this process, and back.
    assert main(_args(server, tiny, moved, "--episodes", "2", *ray_flags)) == 0
    assert main(["eval", "--resume", "--out", str(moved), "--episodes", "3", "--no-progress",
                 "--base-url", server.base_url]) == 0
    assert main(["eval", "--resume", "--out", str(moved), "--episodes", "4", "--no-progress",
                 "--base-url", server.base_url, "--ray", ray_cluster.address]) == 0
    assert _measured(moved) == want
    manifest = _manifest(moved)
    assert [r["env_pool"] and r["env_pool"]["address"] for r in manifest["resumes"]] == [None, ray_cluster.address]

    import ray

    assert not [a for a in ray.util.list_named_actors(all_namespaces=True)]  # nothing named left over
    assert ray.available_resources().get("gem_env") == 16  # every pool's actors were closed


def test_unreachable_ray_address_fails_the_run_in_seconds(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'gem-core[ray]'")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    out = tmp_path / "run"
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gem_core.cli", "eval", ECHO, "--api", "chat", "--base-url",
         "http://127.0.0.1:9/v1", "--model", "tiny", "--ray", f"127.0.0.1:{port}", "--out", str(out),
         "--no-progress"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    elapsed = time.monotonic() - start
    assert done.returncode == 2, done.stderr
    err = done.stderr.strip().splitlines()
    assert len(err) == 1, done.stderr  # one line, no traceback
    assert err[0].startswith(f"gem eval: no Ray cluster answers at 127.0.0.1:{port} (ConnectionRefusedError")
    assert "ray start --head" in err[0]
    assert elapsed < 30, elapsed  # interpreter + Ray import on a loaded box; the probe itself is instant
    manifest = _manifest(out)
    assert manifest["status"] == "failed"
    assert manifest["error"].startswith(f"RayConnectionError: no Ray cluster answers at 127.0.0.1:{port}")
    assert manifest["env_pool"]["address"] == f"127.0.0.1:{port}"


@pytest.mark.parametrize(("extra", "message"), [
    (["--ray-actors", "2"], "--ray-actors need(s) --ray ADDRESS"),
    (["--ray", "127.0.0.1:1", "--ray-actors", "0"], "--ray-actors must be a positive number of actors, got 0"),
    (["--ray", "127.0.0.1:1", "--ray-resources", '{"CPU": 2}'],
     "--ray-resources takes custom resources with positive amounts"),
    (["--ray", "127.0.0.1:1", "--ray-resources", '{"gem_env": "x"}'],
     "--ray-resources takes custom resources with positive amounts"),
])
def test_bad_ray_flags_are_refused_before_anything_runs(extra, message, tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["eval", ECHO, "--api", "chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "tiny",
               "--out", str(out), "--no-progress", *extra])
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_actors_read_the_data_the_run_pins(ray_cluster, server, tiny, tmp_path, monkeypatch):  # noqa: F811
    # The cluster was started without GEM_DATA: the actors get this process's value, so a
    # dataset-backed env reads the shipped sample there too (not the hub), as pinned here.
    monkeypatch.setenv("GEM_DATA", "sample")
    out = tmp_path / "run"
    rc = main(["eval", "math:GSM8K", "--base-url", server.base_url, "--model", "tiny", "--tokenizer",
               tiny[1], "--max-tokens", "4", "--episodes", "2", "--out", str(out), "--no-progress",
               "--ray", ray_cluster.address, "--ray-actors", "1"])
    manifest = _manifest(out)
    assert rc in (0, 1) and manifest["status"] in ("complete", "complete_with_errors"), manifest.get("error")
    assert [d["source"].split(":")[0] for d in manifest["data"]["math:GSM8K"]] == ["sample"]
    assert manifest["env_pool"]["envs_built"] >= 1
    assert all(r["error"] is None for r in map(json.loads, (out / "episodes.jsonl").read_text().splitlines()))

    # An actor whose env reads other rows than the run pinned is refused, not mixed in.
    from gem_core.errors import InvalidArgument
    from gem_core.eval.runner import _pooled_env

    pinned = {"math:GSM8K": [{**manifest["data"]["math:GSM8K"][0], "sha256": "0" * 64}]}
    settings = {"api": "chat", "wrappers": [], "tools": [], "max_tool_uses": 1, "env_kwargs": {},
                "user_spec": None, "user_key": None, "timeout": 1.0, "max_retries": 0}
    with pytest.raises(InvalidArgument, match=r"math:GSM8K reads other data in the env pool's process .*"
                       r"pinned: sample:.*sha256 000000000000\); read here: sample:"):
        _pooled_env("math:GSM8K", data_env={"GEM_DATA": "sample"}, data=pinned, sandbox_size=None, **settings)
