"""Import stand-in (gem-rl2 tests, see integrations/rl2/STUBS.md)."""

from _gem_rl2_stub import unavailable

launch_server = unavailable("sglang.srt.entrypoints.http_server.launch_server")
