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
