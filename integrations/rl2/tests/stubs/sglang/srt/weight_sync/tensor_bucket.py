"""Import stand-in (gem-rl2 tests, see integrations/rl2/STUBS.md)."""

from _gem_rl2_stub import unavailable

FlattenedTensorBucket = unavailable("sglang.srt.weight_sync.tensor_bucket.FlattenedTensorBucket")
