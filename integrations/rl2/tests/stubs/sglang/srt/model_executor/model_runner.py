"""Import stand-in (gem-rl2 tests, see integrations/rl2/STUBS.md)."""

from _gem_rl2_stub import unavailable

LocalSerializedTensor = unavailable("sglang.srt.model_executor.model_runner.LocalSerializedTensor")
FlattenedTensorBucket = unavailable("sglang.srt.model_executor.model_runner.FlattenedTensorBucket")
