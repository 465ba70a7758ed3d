"""GEM environments and ReBN in RL2 (rl-square 0.0.2 and RL2 HEAD).

- `gem_rl2.env`: the env file for ``rollout.env_path`` (both RL2 env APIs);
- `gem_rl2.train`: the entry module (``torchrun -m gem_rl2.train ...``) adding
  ``adv.estimator=rebn`` to RL2's ``compute_advantages``;
- `gem_rl2.advantage`: ReBN over RL2's ``tensor_dict`` and ``cu_seqs``;
- `gem_rl2.testing`: a local stand-in of SGLang's ``/generate`` for tests.

Importing this package imports neither RL2 nor torch.
"""

__version__ = "0.1.0"
