"""Import stand-in (gem-rl2 tests, see integrations/rl2/STUBS.md)."""

from _gem_rl2_stub import unavailable

ServerArgs = unavailable("sglang.srt.server_args.ServerArgs")
