"""The built-in env catalog: a flat list of `register` calls; nothing heavy is imported here."""

from __future__ import annotations

from gem_core.registration import register

register(
    "toy:Echo-v0",
    "gem_core.envs.toy:EchoEnv",
    max_turns=4,
    description="Repeat a random word back (cheapest env; tests and benchmarks).",
)
register(
    "toy:PrimeCount-v0",
    "gem_core.envs.toy:PrimeCountEnv",
    max_turns=8,
    description="Count the primes <= N; each step runs a Python sieve (CPU-heavy benchmark env).",
)

# --- Games (gem_core.envs.games): the reference GEM's ids and difficulty settings. ---
# GuessTheNumber
register(
    "game:GuessTheNumber-v0-easy",
    "gem_core.envs.games.guess_the_number:GuessTheNumberEnv",
    kwargs={"min_number": 1, "max_number": 10, "max_turns": 4},
    max_turns=4,
    description="Find a hidden integer from higher/lower hints. (easy)",
)
register(
    "game:GuessTheNumber-v0-hard",
    "gem_core.envs.games.guess_the_number:GuessTheNumberEnv",
    kwargs={"min_number": 1, "max_number": 50, "max_turns": 7},
    max_turns=7,
    description="Find a hidden integer from higher/lower hints. (hard)",
)
register(
    "game:GuessTheNumber-v0-random",
    "gem_core.envs.games.guess_the_number:GuessTheNumberEnv",
    kwargs={"min_number": None, "max_number": None, "max_turns": None},
    max_turns=None,
    description="Find a hidden integer from higher/lower hints. (random)",
)
