"""The games bench's interleaved phase: two workers take turns (`benchmarks/baton.py`), and its ratios decide the target."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_games  # noqa: E402
import run as bench_run  # noqa: E402
from baton import Baton  # noqa: E402


def _alternate(spans_a: list[tuple[float, float]], spans_b: list[tuple[float, float]]) -> str:
    """The order in which the two sides' blocks ran ("abab..."); raises if two blocks overlapped."""
    events = sorted([(s, e, "a") for s, e in spans_a] + [(s, e, "b") for s, e in spans_b])
    for (_, end, _), (start, _, _) in zip(events, events[1:], strict=False):
        assert end <= start, f"two blocks overlapped in time: {events}"
    return "".join(side for _, _, side in events)


def test_two_workers_take_turns_block_by_block() -> None:
    config = {"env_ids": ["game:GuessTheNumber-v0-easy", "game:FifteenPuzzle-v0-easy"], "block_s": 0.01, "blocks": 3}
    first, second = bench_run.run_interleaved(bench_games, [(sys.executable, "ours"), (sys.executable, "ours")], config, timeout=120)
    for side in (first, second):
        assert "error" not in side, side
        assert side["baton"]["broken"] is None
        assert side["baton"]["turns"] == 2 * (1 + 3)  # per game: one warm-up turn, then the timed blocks
        for env_id in config["env_ids"]:
            entry = side["result"]["games"][env_id]
            assert "error" not in entry and len(entry["rates"]) == 3 and all(r > 0 for r in entry["rates"])
    assert _alternate(first["baton"]["spans"], second["baton"]["spans"]) == "ab" * 8  # the first side went first


def test_both_sides_play_the_same_fallback_actions_where_one_lacks_sample_random_action() -> None:
    config = {"env_ids": ["game:Sudoku-v0-easy"], "block_s": 0.01, "blocks": 2, "fallback_ids": ["game:Sudoku-v0-easy"]}
    first, second = bench_run.run_interleaved(bench_games, [(sys.executable, "ours"), (sys.executable, "ours")], config, timeout=120)
    for side in (first, second):
        assert side["result"]["games"]["game:Sudoku-v0-easy"]["policy"] == "fallback (both sides)"
    config["fallback_ids"] = []
    first, _ = bench_run.run_interleaved(bench_games, [(sys.executable, "ours"), (sys.executable, "ours")], config, timeout=120)
    assert first["result"]["games"]["game:Sudoku-v0-easy"]["policy"] == "sample_random_action"


def test_a_failing_side_keeps_its_turns_paired() -> None:
    """A game one side cannot build still costs that side its turns, so the games after it stay paired."""
    config = {"env_ids": ["game:NoSuchGame-v0", "game:GuessTheNumber-v0-easy"], "block_s": 0.01, "blocks": 2}
    first, second = bench_run.run_interleaved(bench_games, [(sys.executable, "ours"), (sys.executable, "ours")], config, timeout=120)
    for side in (first, second):
        games = side["result"]["games"]
        assert "error" in games["game:NoSuchGame-v0"] and games["game:NoSuchGame-v0"]["rates"] == []
        assert len(games["game:GuessTheNumber-v0-easy"]["rates"]) == 2
        assert side["baton"]["broken"] is None
    assert _alternate(first["baton"]["spans"], second["baton"]["spans"]) == "ab" * 6


def _pipes() -> tuple[Baton, int, int]:
    """A baton whose peer is this test: ``(baton, write end towards it, read end from it)``."""
    to_baton, from_baton = os.pipe(), os.pipe()
    return Baton(to_baton[0], from_baton[1], timeout_s=0.2), to_baton[1], from_baton[0]


def test_baton_hands_the_turn_over() -> None:
    baton, give, take = _pipes()
    os.write(give, b"t")
    with baton:
        pass
    assert os.read(take, 1) == b"t" and baton.turns == 1 and baton.broken is None


def test_baton_goes_on_alone_when_the_peer_has_finished() -> None:
    baton, give, take = _pipes()
    os.close(give)  # the peer exited without handing the turn back
    with baton:
        pass
    assert baton.broken == "the peer has finished"
    with baton:  # later turns do not wait any more
        pass
    assert baton.turns == 0 and len(baton.spans) == 2


def test_baton_stops_waiting_for_a_peer_that_keeps_the_turn() -> None:
    baton, give, take = _pipes()
    start = time.monotonic()
    with baton:
        pass
    assert 0.15 <= time.monotonic() - start < 5
    assert baton.broken is not None and "kept the baton" in baton.broken


def test_a_lone_baton_never_waits() -> None:
    baton = Baton.from_env() if "GEM_BENCH_BATON" not in os.environ else Baton(None, None)
    with baton:
        pass
    assert baton.broken == "no peer" and baton.turns == 0


def _side(rate: float, rates: list[float] | None) -> dict:
    games = {"game:X-v0": {"step": {"steps_per_s": rate}, "reset": {"p99_s": 1e-5}}}
    side: dict = {"games": games}
    if rates is not None:
        side["interleaved"] = {"games": {"game:X-v0": {"rates": rates}}, "blocks": len(rates), "block_s": 0.1}
    return side


def test_the_target_uses_the_interleaved_ratio_when_there_is_one() -> None:
    # Sequentially ours looked 1.5x faster, but block by block it is slower: the target says missed.
    ours, ref = _side(150.0, [90.0, 95.0, 300.0]), _side(100.0, [100.0, 100.0, 100.0])
    assert bench_games.interleaved_ratio(ours, ref, "game:X-v0") == pytest.approx(0.95)
    speed = bench_games.targets(ours, ref)[0]
    assert speed["met"] is False and "(interleaved)" in speed["value"] and "0.95" in speed["value"]
    # Without an interleaved phase the sequential ratio decides.
    speed = bench_games.targets(_side(150.0, None), _side(100.0, None))[0]
    assert speed["met"] is True and "1 sequential" in speed["value"]
    assert "interleaved" in bench_games.render(ours, ref, "")


def test_unpaired_blocks_give_no_interleaved_ratio() -> None:
    assert bench_games.interleaved_ratio(_side(1.0, [1.0, 2.0]), _side(1.0, [1.0]), "game:X-v0") is None
    assert bench_games.interleaved_ratio(_side(1.0, None), _side(1.0, [1.0]), "game:X-v0") is None


def test_interleaved_config_takes_the_games_both_sides_stepped_and_reset_quickly() -> None:
    config = {"interleaved_block_s": 0.1, "interleaved_blocks": 10}

    def game(rate: float, reset_s: float) -> dict:
        return {"step": {"steps_per_s": rate}, "reset": {"mean_s": reset_s}}

    ours = {"games": {"game:A-v0": game(1.0, 1e-5), "game:B-v0": {"error": "x"}, "game:C-v0": game(1.0, 0.002)}}
    ref = {"games": {"game:A-v0": game(2.0, 3e-5), "game:B-v0": game(2.0, 1e-5), "game:C-v0": game(2.0, 3.0)}}
    inter = bench_games.interleaved_config(config, ours, ref)
    assert inter == {"env_ids": ["game:A-v0"], "block_s": 0.1, "blocks": 10, "reset_s": {"game:A-v0": 3e-5}, "fallback_ids": []}
    ref["games"]["game:A-v0"]["step"]["policy"] = "fallback (sample_random_action not implemented)"
    assert bench_games.interleaved_config(config, ours, ref)["fallback_ids"] == ["game:A-v0"]  # both sides play it
    assert bench_games.interleaved_config(config, {"games": {}}, ref) is None
    # The phase's timeout allows for the resets; the slow-reset game is marked in the table.
    assert bench_games.timeout_s(inter) == pytest.approx(120 + 22 * (0.1 + 6e-5) + 10)
    ours["interleaved"] = {"games": {"game:A-v0": {"rates": [1.0]}}, "blocks": 1, "block_s": 0.1}
    ref["interleaved"] = {"games": {"game:A-v0": {"rates": [2.0]}}, "blocks": 1, "block_s": 0.1}
    table = bench_games.render(ours, ref, "")
    assert "n/a (slow reset)" in next(line for line in table.splitlines() if line.startswith("game:C-v0"))


def test_a_failed_interleaved_phase_is_reported() -> None:
    ours, ref = _side(150.0, None), _side(100.0, None)
    for side in (ours, ref):
        side["interleaved"] = {"error": "interleaved run timed out after 541 s", "baton": None}
    table = bench_games.render(ours, ref, "")
    assert "interleaved, ours: the turns stopped alternating (interleaved run timed out after 541 s)" in table
    assert "interleaved, ref: the turns stopped alternating" in table
    assert bench_games.targets(ours, ref)[0]["value"].startswith("0 of 1 slower (0 interleaved, 1 sequential)")


def test_the_python_tool_bench_takes_turns_too() -> None:
    import bench_python_tool

    config = {"blocks": 2, "block_s": 0.05, "warmup_calls": 1, "pool_size": 1}
    first, second = bench_run.run_interleaved(bench_python_tool, [(sys.executable, "ours"), (sys.executable, "ours")],
                                              config, timeout=180)
    for side in (first, second):
        assert "error" not in side and "error" not in side["result"], side
        assert side["baton"]["broken"] is None and side["baton"]["turns"] == 1 + 2
        assert len(side["result"]["block_p50_s"]) == 2 and all(p > 0 for p in side["result"]["block_p50_s"])
    assert _alternate(first["baton"]["spans"], second["baton"]["spans"]) == "ab" * 3
    ours = {"interleaved": first["result"]}
    ref = {"interleaved": {"block_p50_s": [10 * p for p in first["result"]["block_p50_s"]]}}
    assert bench_python_tool.interleaved_ratio(ours, ref) == pytest.approx(10.0)
    assert bench_python_tool.interleaved_ratio(ours, {"interleaved": {"block_p50_s": [1.0]}}) is None
