"""Import stand-in (gem-rl2 tests, see integrations/rl2/STUBS.md)."""

from _gem_rl2_stub import unavailable

_flash_attn_forward = unavailable("flash_attn.flash_attn_interface._flash_attn_forward")
_flash_attn_backward = unavailable("flash_attn.flash_attn_interface._flash_attn_backward")
_flash_attn_varlen_forward = unavailable("flash_attn.flash_attn_interface._flash_attn_varlen_forward")
_flash_attn_varlen_backward = unavailable("flash_attn.flash_attn_interface._flash_attn_varlen_backward")
