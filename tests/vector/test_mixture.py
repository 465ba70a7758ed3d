"""Weighted multi-task mixtures: `Mixture` checks, `MixtureEnv` seeding, and make_vec with sync/async autoreset."""

from __future__ import annotations

import functools
import pickle
import random
from collections import Counter

import pytest

import gem_core
from gem_core.core import Wrapper
from gem_core.errors import ClosedEnvError, InvalidArgument, NameNotFound, ResetNeeded
from gem_core.vector import AutoresetMode, make_vec
from gem_core.vector.mixture import Mixture, MixtureEnv

pytestmark = pytest.mark.timeout(60)

ECHO, GUESS = "toy:Echo-v0", "game:GuessTheNumber-v0-easy"


class Shout(Wrapper):
    """Upper-cases observations (a picklable wrapper)."""

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs.upper(), info


@pytest.fixture(params=["sync", "async"])
def mode(request):
    return request.param


def _vec(mode, *args, **kwargs):
    if mode == "async":
        kwargs.setdefault("timeout", 20.0)
    return make_vec(*args, vectorization_mode=mode, **kwargs)


# --- Mixture: weights and their errors --------------------------------------------------
def test_weights_are_normalized_and_drawn_in_proportion():
    mix = Mixture([(ECHO, 3), (GUESS, 1.0), ("toy:PrimeCount-v0", 0)])
    assert mix.ids == (ECHO, GUESS, "toy:PrimeCount-v0")
    assert mix.probabilities == (0.75, 0.25, 0.0)
    rng = random.Random(0)
    counts = Counter(mix.draw(rng) for _ in range(20_000))
    assert counts[2] == 0  # weight 0: never drawn
    assert abs(counts[0] / 20_000 - 0.75) < 0.02
    assert "Mixture(toy:Echo-v0=0.75, game:GuessTheNumber-v0-easy=0.25" in repr(mix)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({ECHO: -0.5, GUESS: 1}, "weight of 'toy:Echo-v0' is -0.5; weights must be >= 0"),
        ({ECHO: float("nan")}, "weight of 'toy:Echo-v0' is nan; expected a finite number >= 0"),
        ({ECHO: float("inf")}, "expected a finite number >= 0"),
        ({ECHO: True}, "weight of 'toy:Echo-v0' is True; expected a finite number"),
        ({ECHO: "1"}, "weight of 'toy:Echo-v0' is '1'"),
        ({ECHO: 0, GUESS: 0.0}, "weights are all 0 (toy:Echo-v0, game:GuessTheNumber-v0-easy)"),
        ({}, "got no env ids"),
        ([(ECHO, 1), (ECHO, 2)], "got env id 'toy:Echo-v0' twice"),
        ([ECHO], "expected an (env_id, weight) pair"),
        (ECHO, "expects a dict {env_id: weight} or a list of (env_id, weight) pairs, got str"),
    ],
)
def test_bad_weights_are_explained(weights, message):
    with pytest.raises(InvalidArgument) as err:
        Mixture(weights)
    assert message in str(err.value)


def test_unknown_id_suggests_close_matches():
    with pytest.raises(NameNotFound, match="GuessTheNumber-v0-easy"):
        Mixture({"game:GuessTheNumbr-v0-easy": 1.0})
    with pytest.raises(NameNotFound):
        make_vec({"toy:Echo-v0": 1, "toy:Ech-v0": 1}, 2)


def test_bad_env_kwargs_are_explained():
    with pytest.raises(InvalidArgument, match="names 'toy:PrimeCount-v0', which is not in the mix"):
        Mixture({ECHO: 1}, env_kwargs={"toy:PrimeCount-v0": {}})
    with pytest.raises(InvalidArgument, match=r"env_kwargs\['toy:Echo-v0'\] must be a dict"):
        Mixture({ECHO: 1}, env_kwargs={ECHO: 3})
    with pytest.raises(
        InvalidArgument, match=r"give them per id: make_vec\(Mixture\(weights, env_kwargs="
    ):
        make_vec({ECHO: 1}, 2, env_kwargs={"word_length": 3})


# --- MixtureEnv ----------------------------------------------------------------------
def test_seeded_reset_plays_the_drawn_ids_own_episode():
    env = MixtureEnv({ECHO: 1, GUESS: 1})
    seen = set()
    for seed in range(12):
        obs, info = env.reset(seed=seed)
        assert info["env_id"] == env.env_id
        seen.add(info["env_id"])
        assert obs == gem_core.make(info["env_id"]).reset(seed=seed)[0]
        assert env.reset(seed=seed) == (obs, info)
    assert seen == {ECHO, GUESS}
    env.close()


def test_the_id_draw_is_independent_of_the_task_draws():
    """The id is drawn from a salted stream: with the task's own stream, seeds that pick
    Echo (u < 0.5) would all start their word with one of a..p, never u..z."""
    env = MixtureEnv({ECHO: 1, GUESS: 1})
    first_letters = set()
    for seed in range(200):
        obs, info = env.reset(seed=seed)
        if info["env_id"] == ECHO:
            first_letters.add(env.current_env.unwrapped.word[0])
    assert first_letters & set("abcdef") and first_letters & set("uvwxyz"), sorted(first_letters)
    env.close()


def test_unseeded_resets_redraw_reproducibly_and_env_id_can_be_forced():
    env = MixtureEnv(Mixture({ECHO: 1, GUESS: 1}, env_kwargs={ECHO: {"word_length": 3}}))
    env.reset(seed=5)
    first = [env.reset() for _ in range(10)]
    env.reset(seed=5)
    assert [env.reset() for _ in range(10)] == first
    assert {info["env_id"] for _, info in first} == {ECHO, GUESS}
    obs, info = env.reset(seed=1, options={"env_id": ECHO})
    assert info["env_id"] == ECHO and len(env.current_env.unwrapped.word) == 3
    _, _, _, _, step_info = env.step("abc")
    assert step_info["env_id"] == ECHO
    with pytest.raises(
        InvalidArgument, match="'toy:PrimeCount-v0'\\}\\): that id is not in the mix"
    ):
        env.reset(options={"env_id": "toy:PrimeCount-v0"})
    env.close()
    env.close()  # twice is safe
    with pytest.raises(ClosedEnvError):
        env.reset()


def test_step_before_reset_raises_and_inner_envs_keep_their_stack():
    env = MixtureEnv({GUESS: 1}, wrappers=[Shout])
    with pytest.raises(ResetNeeded, match="before reset"):
        env.step("\\boxed{1}")
    obs, _ = env.reset(seed=0)
    assert obs == obs.upper()
    for _ in range(4):  # easy GuessTheNumber has a 4-turn limit from its spec
        _, _, terminated, truncated, _ = env.step("\\boxed{0}")
        if terminated or truncated:
            break
    assert truncated
    with pytest.raises(ResetNeeded):
        env.step("\\boxed{1}")
    env.close()


def test_check_env_passes_on_a_mixture_env():
    gem_core.check_env(MixtureEnv({ECHO: 1, GUESS: 2}), warn=False)


# --- make_vec with a mixture ------------------------------------------------------------
def _play(vec, steps):
    """Step with fixed actions; return the env id of every info (reset and steps)."""
    obs, infos = vec.reset(seed=0)
    trace = [[i["env_id"] for i in infos]]
    for _ in range(steps):
        obs, rewards, terminated, truncated, infos = vec.step(["\\boxed{5}"] * vec.num_envs)
        trace.append([i["env_id"] for i in infos])
    return trace


def test_make_vec_mixture_resamples_per_episode_on_autoreset(mode):
    with _vec(mode, {ECHO: 0.5, GUESS: 0.5}, 4) as vec:
        assert "Mixture(" in repr(vec)
        trace = _play(vec, 30)
    per_env = [{row[i] for row in trace} for i in range(4)]
    assert all(ids == {ECHO, GUESS} for ids in per_env), per_env  # every sub-env switched task
    with make_vec({ECHO: 0.5, GUESS: 0.5}, 4) as again:
        assert _play(again, 30) == trace  # same seed, same mix, sync or async


def test_same_step_autoreset_reports_the_finished_and_the_new_id(mode):
    with _vec(mode, {ECHO: 1, GUESS: 1}, 3, autoreset_mode=AutoresetMode.SAME_STEP) as vec:
        _, infos = vec.reset(seed=3)
        current = [i["env_id"] for i in infos]
        ended = 0
        for _ in range(20):
            _, _, terminated, truncated, infos = vec.step(["\\boxed{5}"] * 3)
            for k, info in enumerate(infos):
                if terminated[k] or truncated[k]:
                    assert info["final_info"]["env_id"] == current[k]
                    ended += 1
                current[k] = info["env_id"]
        assert ended >= 3


def test_make_vec_mixture_counts_follow_the_weights():
    pytest.importorskip(
        "reasoning_gym", reason="reasoning-gym is not installed (gem-core[reasoning])"
    )
    counts: Counter[str] = Counter()
    weights = {"rg:leg_counting": 3, "rg:basic_arithmetic": 1}
    with make_vec(weights, 4, seed=0, autoreset_mode=AutoresetMode.SAME_STEP) as vec:
        vec.reset()
        for _ in range(50):  # single-turn tasks: every step ends an episode and starts one
            _, _, terminated, _, infos = vec.step(["<answer>0</answer>"] * 4)
            assert terminated.all()
            counts.update(info["final_info"]["env_id"] for info in infos)
    assert sum(counts.values()) == 200
    assert abs(counts["rg:leg_counting"] / 200 - 0.75) < 0.1, counts


def test_a_mixture_object_carries_per_id_kwargs_into_workers(mode):
    mix = Mixture({ECHO: 1}, env_kwargs={ECHO: {"word_length": 2}})
    with _vec(mode, mix, 2, seed=0, wrappers=[Shout]) as vec:
        obs, infos = vec.reset()
        words = [o.rsplit(" ", 1)[-1] for o in obs]
        assert all(len(w) == 2 and w == w.upper() for w in words), obs
        assert [i["env_id"] for i in infos] == [ECHO, ECHO]


def test_mixture_factories_pickle_for_spawned_workers():
    mix = Mixture({ECHO: 1, GUESS: 3}, env_kwargs={ECHO: {"word_length": 3}})
    clone = pickle.loads(pickle.dumps(mix))
    assert (clone.ids, clone.probabilities, clone.env_kwargs) == (
        mix.ids,
        mix.probabilities,
        mix.env_kwargs,
    )
    factory = pickle.loads(pickle.dumps(functools.partial(MixtureEnv, mix)))
    assert [factory().reset(seed=s) for s in range(4)] == [
        MixtureEnv(mix).reset(seed=s) for s in range(4)
    ]
