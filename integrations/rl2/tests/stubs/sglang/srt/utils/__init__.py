"""Import stand-in (gem-rl2 tests, see integrations/rl2/STUBS.md)."""

from _gem_rl2_stub import unavailable


class MultiprocessingSerializer:
    serialize = staticmethod(unavailable("sglang.srt.utils.MultiprocessingSerializer.serialize"))
    deserialize = staticmethod(unavailable("sglang.srt.utils.MultiprocessingSerializer.deserialize"))
