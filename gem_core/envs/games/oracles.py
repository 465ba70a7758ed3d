"""Oracles: one function per game, taking the env (wrapped or not) and returning the next action.

They are the ground truth for tests and a baseline for researchers. Each lives beside its
game's rules (``oracle`` in the game module) and is re-exported here under the game's name;
`oracle_for` finds the right one for any game env.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["ORACLES", "oracle_for", "play_oracle_episode"]

# Game name (as in the env id) -> module under gem_core.envs.games holding `oracle`.
_MODULES = {
    "GuessTheNumber": "guess_the_number",
    "Mastermind": "mastermind",
    "Minesweeper": "minesweeper",
    "Wordle": "wordle",
    "Hangman": "hangman",
    "FifteenPuzzle": "fifteen_puzzle",
    "Sudoku": "sudoku",
    "TowerofHanoi": "tower_of_hanoi",
    "Game2048": "game_2048",
    "Sokoban": "sokoban",
    "Crosswords": "crosswords",
    "WordSearch": "word_search",
}


def _lazy(module: str) -> Callable[[Any], str]:
    def oracle(env: Any) -> str:
        fn = importlib.import_module(f"gem_core.envs.games.{module}").oracle
        return fn(env.unwrapped)

    oracle.__name__ = module
    oracle.__doc__ = f"The next action of the `gem_core.envs.games.{module}` oracle."
    return oracle


guess_the_number = _lazy("guess_the_number")
mastermind = _lazy("mastermind")
minesweeper = _lazy("minesweeper")
wordle = _lazy("wordle")
hangman = _lazy("hangman")
fifteen_puzzle = _lazy("fifteen_puzzle")
sudoku = _lazy("sudoku")
tower_of_hanoi = _lazy("tower_of_hanoi")
game_2048 = _lazy("game_2048")
sokoban = _lazy("sokoban")
crosswords = _lazy("crosswords")
word_search = _lazy("word_search")

ORACLES: dict[str, Callable[[Any], str]] = {name: globals()[mod] for name, mod in _MODULES.items()}
__all__ += list(_MODULES.values())


def oracle_for(env: Any) -> Callable[[Any], str]:
    """The oracle of a game env (found from its spec's name or its class)."""
    spec = getattr(env, "spec", None)
    name = getattr(spec, "name", None)
    if name in ORACLES:
        return ORACLES[name]
    cls = type(env.unwrapped).__name__.removesuffix("Env")
    if cls in ORACLES:
        return ORACLES[cls]
    raise KeyError(f"no oracle for {env}; games with oracles: {', '.join(sorted(ORACLES))}")


def play_oracle_episode(env: Any, seed: int | None = None) -> tuple[bool, int, float]:
    """Play one episode with the oracle; returns ``(success, turns, return)``."""
    oracle = oracle_for(env)
    env.reset(seed=seed)
    total, turns = 0.0, 0
    while True:
        _, reward, terminated, truncated, info = env.step(oracle(env))
        total += float(reward)
        turns += 1
        if terminated or truncated:
            return bool(info.get("success", False)), turns, total
