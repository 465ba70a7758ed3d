r"""`GemPPOTrainer`: OpenRLHF's PPO trainer actor with the gem samples generator and experience maker.

OpenRLHF's ``PPOTrainer`` is a Ray actor class (subclassing it raises Ray's
``ActorClassInheritanceException``), so `GemPPOTrainerClass` derives from its
``__ray_actor_class__`` and `GemPPOTrainer` is that class made remote (a plain class of
an importable module, so Ray workers import it by reference). After OpenRLHF's ``__init__`` it
swaps in `gem_openrlhf.experience.GemSamplesGenerator` (per-turn rewards into
``Experience.info``) and `gem_openrlhf.experience.GemExperienceMaker` (per-turn ReBN),
built with the same arguments OpenRLHF built its own with. `gem_openrlhf.train`
installs it as ``openrlhf.trainer.ppo_trainer.PPOTrainer`` before OpenRLHF's CLI runs.
"""

from __future__ import annotations

from typing import Any

import ray
from openrlhf.trainer.ppo_trainer import PPOTrainer

from gem_openrlhf.experience import GemExperienceMaker, GemSamplesGenerator

__all__ = ["GemPPOTrainer", "GemPPOTrainerClass", "install_gem_pipeline"]


def install_gem_pipeline(trainer: Any) -> Any:
    """Replace a built trainer's samples generator and experience maker with the gem subclasses."""
    old = trainer.samples_generator
    trainer.samples_generator = GemSamplesGenerator(
        strategy=old.strategy,
        prompts_dataloader=old.prompts_dataloader,
        eval_dataloader=old.eval_dataloader,
        tokenizer=old.tokenizer,
        vllm_engines=old.vllm_engines,
    )
    maker = trainer.experience_maker
    trainer.experience_maker = GemExperienceMaker(
        maker.actor_model_group,
        maker.critic_model_group,
        maker.reward_model_group,
        maker.initial_model_group,
        maker.kl_ctl,
        maker.strategy,
        maker.tokenizer,
    )
    return trainer


class GemPPOTrainerClass(PPOTrainer.__ray_actor_class__):
    """OpenRLHF's PPO trainer (single controller) with the gem samples generator and experience maker."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        install_gem_pipeline(self)


#: The Ray actor class `gem_openrlhf.train` installs as OpenRLHF's ``PPOTrainer``.
GemPPOTrainer = ray.remote(GemPPOTrainerClass)
