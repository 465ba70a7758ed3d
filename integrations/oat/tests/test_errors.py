"""Bad input: bad env settings fail before any GPU work; a failing env drops only its episode."""

from __future__ import annotations

import pytest

pytest.importorskip("oat", reason="gem-oat's tests need oat-llm 0.2.4 (make venv-oat)")

from gem_core.core import Wrapper  # noqa: E402
from gem_core.errors import InvalidArgument, PlayRowError  # noqa: E402
from tests.conftest import make_args  # noqa: E402
from tests.oat_harness import scripted_actor  # noqa: E402


class BoomOnSeed1(Wrapper):
    """Raises in ``step`` for the episode of seed 1 (an env bug)."""

    def reset(self, *, seed=None, **kwargs):
        self._boom = seed == 1
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action):
        if self._boom:
            raise RuntimeError("env bug: step exploded")
        return self.env.step(action)


def test_bad_env_id_fails_in_the_actor_constructor_before_the_engine_loads(monkeypatch):
    from gem_oat import GemActor
    from oat.actors import base

    monkeypatch.setattr(base.ActorBase, "init", lambda *a, **k: pytest.fail("engine init reached"))
    with pytest.raises(InvalidArgument, match=r"--env_ids 'game:GuessTheNumbr-v0-easy'.*cannot be made") as err:
        GemActor(None, {}, make_args(env_ids=["game:GuessTheNumbr-v0-easy"]))
    assert "GuessTheNumber" in str(err.value), "the message should offer the close match"


def test_bad_env_kwargs_and_mixture_settings_are_refused():
    from gem_oat import validate_args

    with pytest.raises(InvalidArgument, match="--env_kwargs must be a JSON object"):
        validate_args(make_args(env_kwargs="[1, 2]"))
    with pytest.raises(InvalidArgument, match="cannot be made"):
        validate_args(make_args(env_kwargs='{"no_such_kwarg": 1}'))
    with pytest.raises(InvalidArgument, match="--env_weights has 1 entries for 2 env ids"):
        validate_args(make_args(env_ids=["game:GuessTheNumber-v0-easy", "toy:Echo-v0"], env_weights=[1.0]))
    with pytest.raises(InvalidArgument, match="--wrappers 'nope:Nothing'"):
        validate_args(make_args(wrappers=["nope:Nothing"]))


def test_oat_settings_that_fail_late_are_refused_early():
    from gem_oat import validate_args

    with pytest.raises(InvalidArgument, match="--reinforce_update.*ZeroDivisionError"):
        validate_args(make_args(reinforce_update=True), make_envs=False)
    with pytest.raises(InvalidArgument, match="--num_samples must be 1"):
        validate_args(make_args(num_samples=2), make_envs=False)
    with pytest.raises(InvalidArgument, match="--train_batch_size_per_device must be 1"):
        validate_args(make_args(train_batch_size_per_device=2), make_envs=False)


def test_learner_checks_the_args_before_loading_the_model(monkeypatch):
    from gem_oat import GemLearner
    from oat.algorithms.ppo import PPOLearner

    monkeypatch.setattr(PPOLearner, "_init", lambda *a, **k: pytest.fail("model loading reached"))
    learner = GemLearner.__new__(GemLearner)
    with pytest.raises(InvalidArgument, match="--reinforce_update"):
        learner._init(make_args(reinforce_update=True), [])


def test_an_env_exception_drops_that_episode_and_collection_goes_on():
    actor = scripted_actor("guess", env_seeds=[0, 1, 2], wrappers=["tests.test_errors:BoomOnSeed1"])
    episodes, metrics = actor.collect_experience()
    assert len(episodes) == 2 and metrics["actor/gem_failed_episodes"] == 1.0
    [(env_id, seed, error)] = actor.last_failures
    assert seed == 1 and "step exploded" in error, actor.last_failures
    assert all(len(ep) >= 1 and ep[-1].done for ep in episodes)


def test_an_engine_failure_on_one_request_drops_those_episodes_only():
    from tests.conftest import tiny_tokenizer

    tok = tiny_tokenizer()
    # Fail the batch that holds seed 3's second turn: every episode of that batch fails.
    calls = {"n": 0}

    def fail_on(prompt_ids):
        calls["n"] += 1
        return tok.decode(prompt_ids).count("<|im_start|>assistant") == 3

    actor = scripted_actor("guess", env_seeds=[0, 1, 2, 3, 5], fail_on=fail_on)
    episodes, metrics = actor.collect_experience()
    assert metrics["actor/gem_failed_episodes"] >= 1 and len(episodes) >= 1
    assert all("injected engine failure" in err for _, _, err in actor.last_failures)


def test_all_episodes_failing_raises_with_the_first_error():
    actor = scripted_actor("guess", env_seeds=[1, 1], wrappers=["tests.test_errors:BoomOnSeed1"])
    with pytest.raises(PlayRowError, match="all 2 episodes.*step exploded"):
        actor.collect_experience()
