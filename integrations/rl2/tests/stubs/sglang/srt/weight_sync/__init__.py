"""Import stand-in (gem-rl2 tests, see integrations/rl2/STUBS.md)."""
