"""Import-only stand-in for vLLM 0.8.4 (CUDA-only; not installable on this CPU machine).

oat imports ``vllm`` at module level (``oat.actors.base``); the tests never run the engine:
the actor's ``self.llm`` is `gem_oat.testing.ScriptedLLM`. Everything here raises when
used. Listed in integrations/oat/STUBS.md.
"""

from _gem_oat_stand_in import unavailable

__version__ = "0.8.4"
_WHY = "vLLM 0.8.4 needs CUDA"
LLM = unavailable("vllm.LLM", _WHY)
SamplingParams = unavailable("vllm.SamplingParams", _WHY)
