"""Import stand-in (gem-rl2 tests, see integrations/rl2/STUBS.md)."""

from _gem_rl2_stub import unavailable

launch_server_process = unavailable("sglang.srt.entrypoints.http_server_engine.launch_server_process")
