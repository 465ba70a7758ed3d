"""Entry module: RL2's PPO trainer with ``adv.estimator=rebn`` and gem_rl2's env file.

Launch it where you would launch ``RL2.trainer.ppo``, with the same Hydra overrides::

    torchrun --nproc_per_node=8 -m gem_rl2.train rollout.env_path=$(python -c \\
        "import gem_rl2.env as m; print(m.__file__)") adv.estimator=rebn adv.gamma=0.9 ...

Before RL2's ``main`` runs it:

- wraps ``RL2.trainer.ppo.compute_advantages`` (`gem_rl2.advantage.install`), so
  ``adv.estimator=rebn`` computes ReBN and every other estimator runs RL2's code;
- on rl-square 0.0.2 (whose env API passes no tokenizer), hooks
  ``Rollout.prepare_environment`` so that an env file with a ``configure`` function
  (gem_rl2's) gets ``server_args.model_path``, ``max_turns`` and the sampling params.

``recipes/rl2_rebn.py`` writes the dataset and the overrides and launches this module.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["install", "main"]


def _hook_prepare_environment() -> bool:
    """0.0.2: call the env file's ``configure`` after RL2 loads it; False on HEAD."""
    from RL2.workers import rollout

    cls = rollout.Rollout
    original = getattr(cls, "prepare_environment", None)
    if original is None or getattr(original, "__gem_hook__", False):
        return original is not None

    @functools.wraps(original)
    def prepare_environment(self: Any) -> None:
        original(self)
        configure = getattr(self.env, "configure", None)
        if configure is not None:
            configure(self.config)

    prepare_environment.__gem_hook__ = True  # type: ignore[attr-defined]
    cls.prepare_environment = prepare_environment
    return True


def install() -> None:
    """Wrap RL2's ``compute_advantages`` and (0.0.2) hook its env loading; idempotent."""
    from gem_rl2.advantage import install as install_rebn

    install_rebn()
    _hook_prepare_environment()


def main() -> None:
    """`install`, then RL2's ``RL2.trainer.ppo.main`` (Hydra reads ``sys.argv``)."""
    install()
    from RL2.trainer import ppo

    ppo.main()


if __name__ == "__main__":
    main()
