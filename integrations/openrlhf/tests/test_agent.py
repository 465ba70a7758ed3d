"""The agent executor's own behaviour through OpenRLHF's classes: labels, bad input, a failing env,
budgets, log-probs, n_samples_per_prompt."""

from __future__ import annotations

import functools
import json

import pytest

pytest.importorskip("openrlhf", reason="gem-openrlhf's tests need openrlhf (make test-openrlhf builds its venv)")

import torch  # noqa: E402
from gem_openrlhf.agent import ERROR_FLAG, TOKEN_REWARDS, make_label, parse_label  # noqa: E402
from openrlhf_harness import harness  # noqa: E402

from gem_core.errors import InvalidArgument, InvalidRow, PlayRowError  # noqa: E402
from gem_core.testing.conformance import SCENARIO, scenario_script  # noqa: E402

GUESS = "game:GuessTheNumber-v0-easy"
BROKEN = "test:OpenRLHFBroken-v0"


def _script():
    return functools.partial(scenario_script, SCENARIO.name)


@pytest.fixture(scope="module")
def broken_env():
    """GuessTheNumber whose second step raises (an env bug mid-episode)."""
    from gem_core.envs.games.guess_the_number import GuessTheNumberEnv
    from gem_core.registration import register, registry

    class Broken(GuessTheNumberEnv):
        def __init__(self, **kwargs):
            super().__init__(min_number=1, max_number=10, max_turns=4)
            self.steps = 0

        def step(self, action):
            self.steps += 1
            if self.steps == 2:
                raise RuntimeError("the env crashed")
            return super().step(action)

    register(BROKEN, Broken, override=True)
    yield BROKEN
    dict.pop(registry, BROKEN, None)


def test_label_round_trip_and_unknown_options():
    label = make_label(GUESS, 3, max_turns=2, system_prompt="Play.")
    assert parse_label(label) == {"env_id": GUESS, "seed": 3, "max_turns": 2, "system_prompt": "Play."}
    with pytest.raises(InvalidArgument, match="unknown options \\['max_turn'\\]"):
        make_label(GUESS, 0, max_turn=2)
    with pytest.raises(InvalidRow, match="has unknown keys \\['sed'\\]"):
        parse_label(json.dumps({"env_id": GUESS, "sed": 1}), prompt="p")


@pytest.mark.parametrize(
    ("label", "message"),
    [
        ('{"seed": 4}', r"names no env id: expected a non-empty string in its \"env_id\" key, got None"),
        ("", "is not a JSON object"),
        ("GuessTheNumber seed 4", "is not a JSON object"),
        ('["game:GuessTheNumber-v0-easy", 4]', "is not a JSON object"),
    ],
)
def test_a_label_without_env_id_is_a_clear_error_naming_the_sample(label, message):
    h = harness()
    with pytest.raises(InvalidRow, match=message) as err:
        h.responses(h.engine(script=_script()), [label])  # through RolloutRayActor.generate_responses
    text = str(err.value)
    assert f"sample with label {label!r} (prompt 'play 0')" in text, text
    assert "recipes/openrlhf_rebn.py" in text


def test_an_env_exception_flags_that_episode_and_the_batch_goes_on(broken_env):
    h = harness()
    # Seed 0 needs more than one guess, so the broken env raises mid-episode.
    labels = [make_label(GUESS, 2, max_tokens_per_turn=16), make_label(broken_env, 0, max_tokens_per_turn=16),
              make_label(GUESS, 3, max_tokens_per_turn=16)]
    responses = h.responses(h.engine(script=_script()), labels)
    assert len(responses) == 3
    bad = responses[1]
    assert bad["extra_logs"][ERROR_FLAG] == 1.0 and bad["reward"] == 0.0
    assert "the env crashed" in bad["gem_error_message"]
    assert [r["extra_logs"][ERROR_FLAG] for r in responses] == [0.0, 1.0, 0.0]

    batches = h.micro_batches(h.experiences(responses))
    flags = torch.cat([b.info[ERROR_FLAG] for b in batches]).tolist()
    assert flags == [0.0, 1.0, 0.0]
    batches = h.advantages(batches, 0.9)
    adv = [b.advantages[i] for b in batches for i in range(b.advantages.shape[0])]
    assert not adv[1].any(), "a failed episode trains nothing"
    assert all(torch.isfinite(a).all() for a in adv)

    # The good episodes' ReBN is exactly the ReBN of the good episodes alone.
    alone = h.advantages(h.micro_batches(h.experiences([responses[0], responses[2]])), 0.9)
    solo = [b.advantages[i] for b in alone for i in range(b.advantages.shape[0])]
    for got, want in zip([adv[0], adv[2]], solo, strict=True):
        n = min(got.shape[0], want.shape[0])  # micro-batches pad rows to different widths
        assert torch.allclose(got[:n], want[:n], atol=1e-6) and not got[n:].any() and not want[n:].any()


def test_a_first_observation_longer_than_max_len_is_a_configuration_error():
    h = harness()
    for max_length in (16, 60):  # the 74-token prompt: over 2 * max_len (the engine checks), over max_len (the policy)
        with pytest.raises((InvalidArgument, PlayRowError), match=r"more than --data.max_len=\d+.*raise --data.max_len"):
            h.responses(h.engine(script=_script()), [make_label(GUESS, 0)], max_length=max_length)


def test_the_whole_episode_fits_max_len():
    h = harness()
    # Greedy decoding by the tiny model with a tight budget: the episode ends when no token is left.
    (r,) = h.responses(h.engine(), [make_label(GUESS, 0, max_tokens_per_turn=64)], max_length=160)
    assert len(r["observation_tokens"]) <= 160
    (exp,) = h.experiences([r])
    assert exp.sequences.shape[1] == len(r["observation_tokens"])  # nothing cut by OpenRLHF's [:max_len]


def test_logprobs_only_when_the_sampling_params_ask_for_them():
    h = harness()
    engine = h.engine(script=_script())
    (without,) = h.responses(engine, [make_label(GUESS, 0, max_tokens_per_turn=16)], logprobs=False)
    assert without["rollout_log_probs"] is None
    (exp,) = h.experiences([without])
    assert exp.rollout_log_probs is None
    (with_lp,) = h.responses(engine, [make_label(GUESS, 0, max_tokens_per_turn=16)])
    lp = with_lp["rollout_log_probs"]
    assert len(lp) == len(with_lp["observation_tokens"])
    inside = {i for s, e in with_lp["action_ranges"] for i in range(s, e)}
    assert all(lp[i] == 0.0 for i in range(len(lp)) if i not in inside)
    assert all(lp[i] < 0.0 for i in inside)


def test_n_samples_per_prompt_plays_the_labelled_episode_each_time():
    h = harness()
    responses = h.responses(h.engine(script=_script()), [make_label(GUESS, 3, max_tokens_per_turn=16)], num_samples=3)
    assert len(responses) == 3
    assert len({tuple(r["observation_tokens"]) for r in responses}) == 1  # same seed, scripted policy
    assert all(len(r[TOKEN_REWARDS]) == len(r["observation_tokens"]) for r in responses)


def test_the_overridden_openrlhf_method_is_checked_with_a_named_message(monkeypatch):
    """gem-openrlhf overrides SamplesGenerator._process_response_into_experience; a changed signature is named."""
    from gem_openrlhf import experience

    experience.check_openrlhf_hooks()  # the installed OpenRLHF
    monkeypatch.setattr(experience.SamplesGenerator, "_process_response_into_experience", lambda self, out: None)
    with pytest.raises(ImportError, match=r"OpenRLHF changed SamplesGenerator._process_response_into_experience: .*openrlhf 0.11.2"):
        experience.check_openrlhf_hooks()


@pytest.mark.parametrize(
    ("hook", "changed"),
    [
        ("SamplesGenerator.__init__", lambda self, strategy, dataloader, *a: None),
        ("RemoteExperienceMaker.__init__", lambda self, actor_model_group, critic_model_group, strategy, *a: None),
    ],
)
def test_the_constructors_gem_openrlhf_rebuilds_are_checked_with_a_named_message(monkeypatch, hook, changed):
    from gem_openrlhf import experience

    cls, _ = hook.split(".")
    monkeypatch.setattr(getattr(experience, cls), "__init__", changed)
    with pytest.raises(ImportError, match=rf"OpenRLHF changed {hook}: its parameters start .*openrlhf 0.11.2"):
        experience.check_openrlhf_hooks()


def test_the_trainer_swap_is_checked_against_how_train_imports_ppo_trainer(monkeypatch):
    """`install` swaps openrlhf.trainer.ppo_trainer.PPOTrainer, which train() imports when it
    runs; a CLI module that binds PPOTrainer at import would ignore the swap: named."""
    import importlib

    from gem_openrlhf import train

    train.check_trainer_swap()  # the installed OpenRLHF
    cli = importlib.import_module(train.OPENRLHF_CLI)
    monkeypatch.setattr(cli, "PPOTrainer", object(), raising=False)
    with pytest.raises(ImportError, match=r"OpenRLHF changed openrlhf.cli.train_ppo_ray.train: .*openrlhf 0.11.2"):
        train.install()
    monkeypatch.delattr(cli, "PPOTrainer")
    monkeypatch.setattr(cli, "train", lambda args: None)
    with pytest.raises(ImportError, match="no longer imports PPOTrainer"):
        train.check_trainer_swap()
