"""Import-only stand-in for ``vllm.lora.request`` (see ``vllm/__init__.py``)."""

from _gem_oat_stand_in import unavailable

LoRARequest = unavailable("vllm.lora.request.LoRARequest", "vLLM 0.8.4 needs CUDA")
