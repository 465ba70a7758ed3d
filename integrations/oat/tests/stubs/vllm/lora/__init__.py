"""Import-only stand-in (see ``vllm/__init__.py``)."""
