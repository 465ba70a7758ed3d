"""oat's real actor and learner wired for CPU tests (only the LLM engine and the
DeepSpeed/launchpad runtime are replaced; see ../STUBS.md)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections import deque
from typing import Any
from unittest import mock

import numpy as np

from tests.conftest import make_args, tiny_model_path


def scripted_actor(scenario_name: str | None = None, *, fail_on: Any = None, **overrides: Any) -> Any:
    """A `gem_oat.GemActor` built by oat's constructor, its engine a `ScriptedLLM`."""
    import functools

    from gem_oat import GemActor
    from gem_oat.testing import ScriptedLLM, attach_engine

    from gem_core.rl.testing import TinyModelGenerator
    from gem_core.testing.conformance import scenario_script

    script = functools.partial(scenario_script, scenario_name) if scenario_name else None
    args = make_args(**overrides)
    actor = GemActor(None, {}, args)  # oat's ActorBase.__init__ (the engine loads in init())
    return attach_engine(actor, ScriptedLLM(TinyModelGenerator(tiny_model_path(), script=script), fail_on=fail_on))


def gloo_strategy(args: Any) -> Any:
    """oat's ``DeepspeedStrategy`` over the initialised gloo group, without DeepSpeed's engine.

    oat's own ``all_reduce`` (the whitening's sums go through it) and ``is_rank_0``, with
    ``world_size`` read from the process group; ``backward``/``optimizer_step`` are plain
    torch (no gradient all-reduce: these tests train with lr 0), ``grad_acc_step`` 1,
    ``print`` silent.
    """
    from oat.utils.deepspeed import DeepspeedStrategy

    class GlooStrategy(DeepspeedStrategy):
        grad_acc_step = 1

        @property
        def world_size(self) -> int:
            import torch.distributed as dist

            return dist.get_world_size()

        def print(self, *args: Any, **kwargs: Any) -> None:
            pass

        backward_calls = 0

        def backward(self, loss: Any, model: Any, optimizer: Any, **kwargs: Any) -> None:
            self.backward_calls += 1
            loss.backward()

        def get_gradient_norm(self, model: Any, **kwargs: Any) -> float:
            return 0.0

        def optimizer_step(self, optimizer: Any, model: Any, scheduler: Any, **kwargs: Any) -> None:
            optimizer.step()
            optimizer.zero_grad()

    return GlooStrategy(args=args)


_GROUP = {"ready": False}


def _one_rank_group() -> None:
    """A one-rank gloo group for ``learn()``, unless a group is up already (tests/test_multi_rank.py)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        store = os.path.join(tempfile.mkdtemp(prefix="gem-oat-pg-"), "store")
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)


class CapturingLearner:
    """Builds a `gem_oat.GemLearner` whose real ``learn()`` records the whitened advantages.

    The advantage of each transition is read from oat's own policy loss: with the learning
    rate 0 and ``tis_c=None`` the PPO ratio is 1, so ``pg_loss_max == -advantage`` on
    every response token; the row is identified by the input ids of the grad pass.
    """

    def __init__(self, **overrides: Any):
        import torch
        from gem_oat import GemLearner
        from oat.algorithms.ppo_multiturn import MultiTurnTransitionDataset
        from oat.model import LLM
        from oat.utils.ops import masked_sum

        class _Learner(GemLearner):
            def get_batch_logps(self, model, input_ids, att_mask, temperature=1.0, compute_entropy=False):
                if compute_entropy:  # the grad pass of one minibatch (train_batch_size_per_device 1)
                    self._current = tuple(int(t) for t in input_ids[0].tolist())
                return super().get_batch_logps(model, input_ids, att_mask, temperature, compute_entropy)

        args = make_args(**overrides)
        learner = _Learner.__new__(_Learner)  # LearnerBase.__init__ only stores launch info
        learner.args = args
        learner.strategy = gloo_strategy(args)
        learner.model = LLM(tiny_model_path(), use_flash_attention_2=False, bf16=False)
        learner.optimizer = torch.optim.SGD(learner.model.parameters(), lr=0.0)
        learner.scheduler = None
        learner.critic = None
        learner.ref_model = None
        learner.tokenizer = _tokenizer()
        learner.pi_buffer = deque()
        learner.all_buffer = deque()
        learner.query_step = 0
        learner.policy_sgd_step = 0
        learner.global_step = 0
        learner.gradient_update_st = 0.0
        learner.dataset_builder = MultiTurnTransitionDataset
        learner.captured = {}
        learner.trained = []  # (input ids, advantage) per grad pass, in order (pads repeat a key)
        oat_aggregator = masked_sum  # critic_type drgrpo: masked_sum / generate_max_length

        def aggregator(values, mask, axis=None):
            m = mask.float()
            v = values.detach()
            learner.captured[learner._current] = float(-(v * m).sum() / m.sum())
            learner.trained.append((learner._current, learner.captured[learner._current]))
            return oat_aggregator(values, mask, axis=axis, constant_normalizer=args.generate_max_length)

        learner.masked_aggregator = aggregator
        self.learner = learner

    def learn(self, episodes: list[list[Any]]) -> dict[tuple[int, ...], float]:
        """``process_feedback_data`` then the real ``learn()``; ``{input ids: whitened advantage}``."""
        import torch

        _one_rank_group()
        learner = self.learner
        learner.captured = {}
        learner.trained = []
        learner.pi_buffer.clear()
        learner.process_feedback_data(episodes)
        with contextlib.ExitStack() as stack:
            stack.enter_context(mock.patch.object(torch.cuda, "current_device", lambda: "cpu"))
            stack.enter_context(mock.patch.object(torch.cuda, "synchronize", lambda *a, **k: None))
            stack.enter_context(mock.patch.object(torch.cuda, "empty_cache", lambda *a, **k: None))
            learner.learn(1)
        return dict(learner.captured)


def _tokenizer() -> Any:
    from tests.conftest import tiny_tokenizer

    return tiny_tokenizer()


def row_transitions(rewards: np.ndarray, mask: np.ndarray) -> tuple[list[list[Any]], list[list[tuple[int, int, tuple[int, ...]]]]]:
    """Packed ``[B, L]`` rows as oat episodes: one ``Transition`` per turn (run of the mask).

    Returns:
        ``(episodes, index)``: per row, the transitions and ``(start, end, input ids)`` of
        each turn (input ids identify the transition in the captured advantages).
    """
    from oat.types import Transition

    from gem_core.rl.packing import turn_spans

    episodes, index = [], []
    for i in range(mask.shape[0]):
        spans = turn_spans(np.asarray(mask[i]))
        eps, idx = [], []
        for k, (s, e) in enumerate(spans):
            prompt = [1 + i, 1 + k]  # unique per (row, turn): identifies the transition
            response = [5] * (e - s)
            eps.append(
                Transition(
                    obs="", action="", rewards=float(np.sum(rewards[i, s:e])), done=k == len(spans) - 1,
                    prompt="", prompt_ids=prompt, response="", response_ids=response,
                    response_logprobs=[0.0] * len(response), response_is_truncated=False,
                    action_is_formatted=True, info={},
                )
            )
            idx.append((s, e, tuple(prompt + response)))
        if eps:
            episodes.append(eps)
        index.append(idx)
    return episodes, index
