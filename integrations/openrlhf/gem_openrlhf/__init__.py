"""gem-openrlhf: GEM environments and exact ReBN inside OpenRLHF.

- `gem_openrlhf.agent`: the agent file for ``--train.agent_func_path``; its
  ``AgentExecutor`` plays one gem_core env episode per sample (env id and seed from the
  sample's label, see `gem_openrlhf.agent.make_label`).
- `gem_openrlhf.experience`: OpenRLHF's samples generator and experience maker
  subclassed so that each turn's reward reaches the advantage step, which computes
  per-turn ReBN with the adapter kit.
- `gem_openrlhf.train`: the entry module, ``python -m gem_openrlhf.train <OpenRLHF's
  flags>``: installs the trainer subclass, then runs OpenRLHF's own CLI.

Importing this package checks the installed OpenRLHF version (from its metadata; it
imports neither OpenRLHF nor torch) and raises ImportError with the fix when it is
missing or outside the tested range.
"""

from __future__ import annotations

from gem_openrlhf._version import OPENRLHF_BELOW, OPENRLHF_MIN, check_openrlhf_version

__all__ = ["__version__", "OPENRLHF_MIN", "OPENRLHF_BELOW", "check_openrlhf_version"]

__version__ = "0.1.0"

check_openrlhf_version()
