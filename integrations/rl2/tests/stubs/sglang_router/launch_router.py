"""Import stand-in (gem-rl2 tests, see integrations/rl2/STUBS.md)."""

from _gem_rl2_stub import unavailable

RouterArgs = unavailable("sglang_router.launch_router.RouterArgs")
launch_router = unavailable("sglang_router.launch_router.launch_router")
