"""Task-env families together: every id builds offline, `offline` flags the hub-backed ones, the
shared dataset base (`DatasetTaskEnv`) and the sample index."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

import gem_core
from gem_core.data import SAMPLES_DIR, DatasetUnavailable
from gem_core.envs.dataset import DatasetTaskEnv
from gem_core.errors import InvalidArgument, ResetNeeded
from gem_core.registration import registry

FAMILIES = ("math", "eval", "qa", "logic", "code", "rg", "terminal", "mcp")
IDS = sorted(i for i in registry if i.split(":", 1)[0] in FAMILIES)


def _entry_class(env_id: str) -> type:
    module, attr = registry[env_id].entry_point.split(":")
    return getattr(importlib.import_module(module), attr)


@pytest.fixture
def no_local_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("GEM_DATA", raising=False)
    monkeypatch.delenv("GEM_DATA_DIR", raising=False)


def test_every_family_has_ids() -> None:
    assert {i.split(":", 1)[0] for i in IDS} == set(FAMILIES)
    assert len(IDS) > 150


def test_every_id_builds_offline_and_offline_flags_exactly_the_hub_backed_ones(
    no_local_data: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_backed = []
    for env_id in IDS:
        try:
            gem_core.make(env_id).close()
        except DatasetUnavailable as e:
            assert env_id in str(e) and "data_path='sample'" in str(e), str(e)
            hub_backed.append(env_id)
    flagged = sorted(i for i in IDS if not registry[i].offline)
    assert hub_backed == flagged, (
        f"offline=False should mark exactly the ids that need the hub; builds without data but "
        f"flagged: {sorted(set(flagged) - set(hub_backed))}; needs data but not flagged: "
        f"{sorted(set(hub_backed) - set(flagged))}"
    )
    # The hub-backed ids are exactly the dataset-backed families, all on the one base.
    assert hub_backed == sorted(i for i in IDS if issubclass(_entry_class(i), DatasetTaskEnv))
    assert {i.split(":", 1)[0] for i in hub_backed} == {"math", "eval", "qa", "logic", "code"}

    monkeypatch.setenv("GEM_DATA", "sample")
    for env_id in hub_backed:
        env = gem_core.make(env_id)
        obs, info = env.reset(seed=0)
        assert obs and info["index"] >= 0 and info["success"] is False, env_id
        env.close()


# --- the shared base ---------------------------------------------------------------------------
class _Echo(DatasetTaskEnv):
    """The smallest DatasetTaskEnv: the answer is the row's ``a``; ``bad`` is a format error."""

    def __init__(self, data_path, **kwargs):
        super().__init__(env_id="test:Echo", dataset_name="org/echo", split="train",
                         data_path=data_path, required_keys=("q", "a"), **kwargs)

    def prompt(self, row):
        return f"Q{row['q']}"

    def grade(self, action):
        if action == "bad":
            return "Format error.", -0.5, {"success": False, "format_error": True}
        ok = action == self.row["a"]
        return ("Correct." if ok else "Incorrect."), float(ok), {"success": ok}

    def sample_random_action(self):
        return str(self.rng.randrange(1000))


@pytest.fixture
def rows_file(tmp_path: Path):
    def write(n: int) -> Path:
        path = tmp_path / f"echo{n}.jsonl"
        path.write_text("".join(json.dumps({"q": i, "a": str(i)}) + "\n" for i in range(n)))
        return path

    return write


def test_seeded_reset_opens_an_epoch_that_covers_every_row(rows_file) -> None:
    env = _Echo(rows_file(37))
    for seed in range(5):
        seen = [env.reset(seed=seed)[1]["index"]] + [env.reset()[1]["index"] for _ in range(36)]
        assert sorted(seen) == list(range(37)) and env.epoch == 0
        again = [env.reset()[1]["index"] for _ in range(37)]
        assert sorted(again) == list(range(37)) and env.epoch == 1 and again != seen


def test_same_seed_same_order_whatever_else_draws_from_rng(rows_file) -> None:
    env = _Echo(rows_file(50))
    first = [env.reset(seed=3)[1]["index"]] + [env.reset()[1]["index"] for _ in range(60)]
    env.reset(seed=3)
    other = [env.index]
    for _ in range(60):
        env.sample_random_action()  # draws from self.rng between resets
        other.append(env.reset()[1]["index"])
    assert first == other
    assert len({_Echo(rows_file(50)).reset(seed=s)[1]["index"] for s in range(20)}) > 5


def test_unseeded_envs_walk_a_shuffled_epoch_from_fresh_entropy(rows_file) -> None:
    path = rows_file(200)
    orders = []
    for _ in range(2):
        env = _Echo(path)
        orders.append([env.reset()[1]["index"] for _ in range(200)])
        assert sorted(orders[-1]) == list(range(200)) and env.epoch == 0
    assert orders[0] != list(range(200)) and orders[0] != orders[1]


def test_file_order_without_shuffle(rows_file) -> None:
    env = _Echo(rows_file(10), shuffle=False)
    assert [env.reset()[1]["index"] for _ in range(12)] == [*range(10), 0, 1]
    start = env.reset(seed=1)[1]["index"]
    rest = [env.reset()[1]["index"] for _ in range(9)]
    assert [start, *rest] == [(start + k) % 10 for k in range(10)] and env.epoch == 0
    assert env.reset()[1]["index"] == 0 and env.epoch == 1


def test_index_option_serves_the_row_and_keeps_the_epoch(rows_file) -> None:
    env = _Echo(rows_file(10))
    walk = [env.reset(seed=2)[1]["index"]] + [env.reset()[1]["index"] for _ in range(3)]
    env.reset(seed=2)
    got = [env.index]
    for _ in range(3):
        assert env.reset(options={"index": 7})[0] == "Q7"
        got.append(env.reset()[1]["index"])
    assert got == walk
    for bad in (10, -1, "3", True, 2.0):
        with pytest.raises(InvalidArgument, match=re.escape(
                f"test:Echo: reset(options={{'index': ...}}) expects an int in [0, 10) "
                f"(the dataset has 10 rows), got {bad!r}")):
            env.reset(options={"index": bad})


def test_index_option_takes_numpy_integers(rows_file) -> None:
    np = pytest.importorskip("numpy")
    env = _Echo(rows_file(10))
    assert env.reset(options={"index": np.int64(7)})[1]["index"] == 7
    assert type(env.index) is int  # JSON-able in info and records
    for bad in (np.int64(10), np.float64(2.0)):
        with pytest.raises(InvalidArgument, match=r"expects an int in \[0, 10\)"):
            env.reset(options={"index": bad})


def test_same_seed_same_rows_in_another_process(rows_file) -> None:
    import os
    import subprocess
    import sys

    path = rows_file(100)

    def walk() -> list[int]:
        env = _Echo(path)
        return [env.reset(seed=11)[1]["index"]] + [env.reset()[1]["index"] for _ in range(9)]

    script = (
        "import json, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from test_families import _Echo\n"
        "env = _Echo(sys.argv[1])\n"
        "print(json.dumps([env.reset(seed=11)[1]['index']] + [env.reset()[1]['index'] for _ in range(9)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(path), str(Path(__file__).parent)],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONHASHSEED": "123"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == walk()


def test_step_ends_single_turn_episodes_and_reset_is_needed(rows_file) -> None:
    env = _Echo(rows_file(5))
    with pytest.raises(ResetNeeded, match=r"test:Echo: step\(\) called before reset\(\)"):
        env.step("0")
    obs, info = env.reset(options={"index": 4})
    assert (obs, info) == ("Q4", {"index": 4, "turn": 0, "success": False})
    obs, reward, terminated, truncated, info = env.step("4")
    assert (obs, reward, terminated, truncated) == ("Correct.", 1.0, True, False)
    assert info == {"success": True, "format_error": False, "invalid_action": False, "turn": 1, "index": 4}
    with pytest.raises(ResetNeeded, match="after the episode ended"):
        env.step("4")
    env.reset(options={"index": 1})
    _, reward, terminated, _, info = env.step("bad")
    assert (reward, terminated, info["format_error"], info["invalid_action"]) == (-0.5, True, True, True)


def test_attempts_with_max_turns(rows_file) -> None:
    env = _Echo(rows_file(5), max_turns=3)
    env.reset(options={"index": 2})
    obs, _, terminated, _, info = env.step("9")
    assert obs == "Incorrect. Try again: 2 attempts left." and not terminated and info["turn"] == 1
    obs, _, terminated, _, _ = env.step("bad")
    assert obs == "Format error. Try again: 1 attempt left." and not terminated
    obs, reward, terminated, _, info = env.step("9")
    assert (obs, reward, terminated, info["success"], info["turn"]) == ("Incorrect.", 0.0, True, False, 3)
    env.reset(options={"index": 2})
    env.step("9")
    assert env.step("2")[1:3] == (1.0, True)
    with pytest.raises(InvalidArgument, match=r"test:Echo: max_turns must be an int >= 1 .*got 0"):
        _Echo(rows_file(5), max_turns=0)


def test_large_datasets_reset_in_constant_time(rows_file) -> None:
    import time

    env = _Echo(rows_file(200_000))
    start = time.perf_counter()
    for seed in range(200):
        env.reset(seed=seed)
        for _ in range(20):
            env.reset()
    assert time.perf_counter() - start < 2.0  # no O(n) shuffle per seeded reset
    assert len(env._swaps) <= 40


def test_every_dataset_family_uses_the_base() -> None:
    from gem_core.envs.code import CodeEnv
    from gem_core.envs.math import MathEnv
    from gem_core.envs.math_visual import MathVisualEnv
    from gem_core.envs.qa import QaEnv

    for cls in (MathEnv, MathVisualEnv, QaEnv, CodeEnv):
        assert issubclass(cls, DatasetTaskEnv)
        for name in ("reset", "step", "_next_index"):
            assert getattr(cls, name) is getattr(DatasetTaskEnv, name), (cls, name)


# --- the sample index --------------------------------------------------------------------------
def test_sources_md_indexes_every_sample_directory() -> None:
    sources = (SAMPLES_DIR / "SOURCES.md").read_text()
    dirs = sorted(p for p in SAMPLES_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert dirs
    for d in dirs:
        row = next((line for line in sources.splitlines() if line.startswith(f"| `{d.name}` |")), None)
        assert row is not None, f"SOURCES.md has no row for {d.name}"
        readme = (d / "README.md").read_text()
        assert "Apache-2.0" in readme and f"({d.name}/README.md)" in row
        for split_file in sorted(d.glob("*.jsonl")):
            if split_file.stem == "corpus":
                continue
            count = sum(1 for line in split_file.read_text().splitlines() if line.strip())
            assert re.search(rf"`{split_file.stem}`[^|]*?: {count}\b|`{split_file.stem}`: {count}\b", row) or \
                re.search(rf": {count} each", row), (d.name, split_file.stem, count, row)
    for env_id in (i for i in IDS if not registry[i].offline):
        assert f"`{env_id}`" in sources, f"SOURCES.md does not name {env_id}"
