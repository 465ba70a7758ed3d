"""Import stand-in (gem-rl2 tests, see integrations/rl2/STUBS.md)."""

from _gem_rl2_stub import unavailable

monkey_patch_torch_reductions = unavailable("sglang.srt.patch_torch.monkey_patch_torch_reductions")
