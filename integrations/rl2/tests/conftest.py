"""Fixtures for gem-rl2's tests: RL2 (0.0.2 installed, or HEAD from GEM_RL2_SRC), stand-ins, a tiny model.

The default run imports the installed rl-square 0.0.2. RL2 HEAD has the same package
name, so its checks (``head_checks/``) run in a subprocess started by ``test_head.py``
with ``GEM_RL2_HEAD=1`` and the source ``GEM_RL2_SRC`` first on ``sys.path``.
Import stand-ins for ``sglang``, ``sglang_router`` and ``flash_attn`` (``stubs/``, see
STUBS.md) are put on ``sys.path`` only for those of them that are not installed.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")

HERE = Path(__file__).resolve().parent
STUBS = HERE / "stubs"
HEAD_MODE = os.environ.get("GEM_RL2_HEAD") == "1"

if HEAD_MODE:
    _src = os.environ.get("GEM_RL2_SRC", "")
    if not (Path(_src) / "RL2" / "__init__.py").is_file():
        raise pytest.UsageError(f"GEM_RL2_HEAD=1 needs GEM_RL2_SRC to hold a RL2 checkout, got {_src!r}")
    sys.path.insert(0, _src)
    collect_ignore_glob = ["test_*.py"]  # only head_checks/ runs in HEAD mode
else:
    collect_ignore = ["head_checks"]

_missing = [m for m in ("sglang", "sglang_router", "flash_attn") if importlib.util.find_spec(m) is None]
if _missing:
    sys.path.append(str(STUBS))  # after site-packages: a real install always wins


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_rl2_process() -> None:
    """What RL2's trainer sets up before a rollout: a 1-rank gloo group and wandb (disabled)."""
    import torch
    import torch.distributed as dist
    import wandb

    torch.set_num_threads(1)
    if not dist.is_initialized():
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1
        )
        os.environ.setdefault("LOCAL_RANK", "0")
    if wandb.run is None:
        wandb.init(mode="disabled")


@pytest.fixture(scope="session")
def tiny_model_path() -> str:
    from gem_core.rl.testing import build_tiny_model

    return str(build_tiny_model())


@pytest.fixture(scope="session")
def tokenizer(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path, local_files_only=True)
