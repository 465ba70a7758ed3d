"""Offline: a dataset-backed id without local data fails `gem eval` within seconds, not after hub retries."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest


@pytest.fixture
def blackhole():
    """A hub endpoint that accepts connections and never answers (a network that drops packets)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    yield f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()


def test_missing_dataset_with_an_unreachable_hub_fails_fast(server, blackhole, tmp_path):
    server.chat_reply = lambda messages: "\\boxed{0}"
    env = {k: v for k, v in os.environ.items() if k not in ("GEM_DATA", "GEM_DATA_DIR", "HF_HUB_OFFLINE",
                                                            "HF_DATASETS_OFFLINE")}
    env.update(HF_ENDPOINT=blackhole, HF_HOME=str(tmp_path / "hf"), GEM_HUB_PROBE_TIMEOUT="2")
    out = tmp_path / "run"
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "gem_core.cli", "eval", "math:GSM8K", "--api", "chat", "--base-url",
         server.base_url, "--model", "tiny", "--episodes", "3", "--out", str(out), "--no-progress"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    elapsed = time.monotonic() - start
    assert r.returncode == 2, r.stderr
    # Generous for a loaded box: the probe waits 2 s; the hub libraries' retries took 24-48 s+.
    assert elapsed < 20, (elapsed, r.stderr)
    assert "the hub is unreachable" in r.stderr and "switched to offline mode" in r.stderr
    assert "data_path='sample'" in r.stderr and r.stderr.count("hub is unreachable") == 1
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "failed" and "DatasetUnavailable" in m["error"]
    assert server.requests == []


def test_sample_data_and_local_paths_never_probe_the_hub(server, blackhole, tmp_path):
    server.chat_reply = lambda messages: "\\boxed{0}"
    env = dict(os.environ, HF_ENDPOINT=blackhole, HF_HOME=str(tmp_path / "hf"), GEM_HUB_PROBE_TIMEOUT="30")
    env.pop("GEM_DATA", None)
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "gem_core.cli", "eval", "math:GSM8K", "--api", "chat", "--base-url",
         server.base_url, "--model", "tiny", "--episodes", "1", "--env-kwargs", '{"data_path": "sample"}',
         "--out", str(tmp_path / "run"), "--no-progress"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - start < 25  # a probe would have waited the 30 s


def test_a_hub_tokenizer_with_an_unreachable_hub_fails_fast(server, blackhole, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=blackhole, HF_HOME=str(tmp_path / "hf"), GEM_HUB_PROBE_TIMEOUT="2")
    out = tmp_path / "run"
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "gem_core.cli", "eval", "toy:Echo-v0", "--base-url", server.base_url,
         "--model", "some-org/some-model", "--episodes", "1", "--out", str(out), "--no-progress"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    elapsed = time.monotonic() - start
    assert r.returncode == 2, r.stderr
    # Quiet: ~4 s (the 2 s probe and the start-up); the hub library's retries took 51 s.
    assert elapsed < 25, (elapsed, r.stderr)
    assert "could not load the tokenizer 'some-org/some-model': the hub is unreachable" in r.stderr
    assert "--tokenizer with a local directory" in r.stderr and server.requests == []
