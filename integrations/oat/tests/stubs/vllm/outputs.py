"""Import-only stand-in for ``vllm.outputs`` (see ``vllm/__init__.py``)."""

from _gem_oat_stand_in import unavailable

RequestOutput = unavailable("vllm.outputs.RequestOutput", "vLLM 0.8.4 needs CUDA")
