"""gem-openrlhf's tests: environment for OpenRLHF on a CPU machine, set before anything imports it.

There is deliberately no ``tests/__init__.py``: the openrlhf wheel installs a top-level
``tests`` package into site-packages, which a package named ``tests`` here would collide
with. pytest's default (prepend) import mode imports these modules by their own names
(``test_agent``, ``openrlhf_harness``, ...) with this directory on ``sys.path``
(``test_layout.py`` checks that).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before any `import ray`
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

try:  # OpenRLHF imports vllm / flash_attn at module level; neither installs without CUDA.
    from gem_openrlhf.testing import install_import_stubs
except ImportError:  # openrlhf missing: the test modules skip with the reason
    pass
else:
    install_import_stubs()
