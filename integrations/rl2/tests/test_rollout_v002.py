"""rl-square 0.0.2's real rollout worker with our env file: rewards, ReBN on its tensors, bad rows."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest

RL2 = pytest.importorskip("RL2", reason="gem-rl2's tests need rl-square (make test-rl2 builds its venv)")

import torch  # noqa: E402
from gem_rl2.testing import SGLangStandIn  # noqa: E402

from gem_core.errors import InvalidArgument, InvalidRow  # noqa: E402
from gem_core.rl import turn_spans  # noqa: E402
from gem_core.testing.conformance import (  # noqa: E402
    SCENARIO,
    assert_matches_reference,
    per_turn_values,
    scenario_script,
)

from .rl2_v002 import data_list, make_rollout, play, rl2_config  # noqa: E402
from .test_adapter_suite_v002 import _setup, play_scenario  # noqa: E402


@pytest.fixture(scope="module")
def guess():
    """The conformance scenario through RL2's ``Rollout.__call__``, with the reference."""
    tensor_dict, cu_seqs, server = play_scenario(SCENARIO)
    return tensor_dict, cu_seqs, server, SCENARIO.run_reference(_setup()[1])


def test_per_turn_rewards_equal_the_reference(guess):
    tensor_dict, cu_seqs, _, reference = guess
    assert cu_seqs.tolist() == list(range(len(SCENARIO.seeds) + 1)), "one packed sequence per episode"
    for i, want in enumerate(reference.rewards):
        mask, rewards = tensor_dict["action_mask"][i], tensor_dict["rewards"][i]
        got = [float(rewards[s:e].sum()) for s, e in turn_spans(mask)]
        assert got == pytest.approx(want.tolist(), abs=1e-6), f"seed {SCENARIO.seeds[i]}: turn rewards {got} != {want}"


def test_wrapped_compute_advantages_on_rl2_tensors_equals_reference(guess):
    """RL2's own tensor_dict and cu_seqs into the wrapped compute_advantages (0.0.2 call)."""
    import RL2.trainer.ppo as ppo

    tensor_dict, cu_seqs, _, reference = guess
    td = {k: v.clone() for k, v in tensor_dict.items()}
    config = rl2_config(_setup()[0])
    ppo.compute_advantages(config.adv, td, cu_seqs, 1)  # step positional, as 0.0.2's trainer passes it
    values = [per_turn_values(td["advantages"][i], td["action_mask"][i]) for i in range(len(reference.rewards))]
    assert_matches_reference(values, reference)
    assert not td["advantages"][td["action_mask"] == 0].abs().max() > 0, "env tokens got advantages"


def test_sampling_params_keep_the_stop_token(guess):
    """gem_rl2.train's hook sets skip_special_tokens=false / no_stop_trim=true before RL2 reads them."""
    _, _, server, _ = guess
    sampling = server.requests[0]["sampling_params"]
    assert sampling["skip_special_tokens"] is False and sampling["no_stop_trim"] is True, sampling
    assert sampling["max_new_tokens"] == SCENARIO.max_new_tokens


def test_row_without_env_id_names_the_row(tmp_path):
    path, tokenizer = _setup()
    config = rl2_config(path)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"extra_info": {"seed": 7, "note": "no env here"}}) + "\n")
    with SGLangStandIn(path, script=functools.partial(scenario_script, "guess")) as server:
        rollout = make_rollout(config, server.url)
        with pytest.raises(InvalidRow, match=r"has no env id.*'seed': 7.*'note': 'no env here'"):
            play(rollout, data_list(config, tokenizer, str(rows)))
        assert not server.requests, "a bad row must fail before any generate call"


def test_reinforce_still_runs_rl2s_own_code():
    """Other estimators go to RL2's compute_advantages (one value per trajectory)."""
    import RL2.trainer.ppo as ppo
    from gem_rl2.train import install

    install()
    mask = torch.tensor([[0, 1, 1, 0, 1], [0, 1, 0, 0, 0]])
    rewards = torch.tensor([[0, 0, 0.5, 0, 1.0], [0, 2.0, 0, 0, 0]])
    td = {"states": torch.zeros(2, 5, dtype=torch.long), "action_mask": mask, "rewards": rewards}
    config = rl2_config(_setup()[0], "adv.estimator=reinforce", "adv.responses_per_prompt=2")
    ppo.compute_advantages(config.adv, td, torch.arange(3), 1)
    assert torch.allclose(td["advantages"][0][mask[0] == 1], torch.tensor(-0.25))
    assert torch.allclose(td["advantages"][1][1], torch.tensor(0.25))


def test_env_file_without_tokenizer_says_how_to_launch():
    """Loaded by plain RL2 (no gem_rl2.train, no GEM_RL2_TOKENIZER): a clear error at reset."""
    code = (
        "import asyncio, importlib.util, gem_rl2.env as m\n"
        "spec = importlib.util.spec_from_file_location('custom_module', m.__file__)\n"
        "env = importlib.util.module_from_spec(spec); spec.loader.exec_module(env)\n"
        "asyncio.run(env.reset({'env_id': 'game:GuessTheNumber-v0-easy', 'seed': 0}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GEM_RL2_TOKENIZER"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and "python -m gem_rl2.train" in proc.stderr, proc.stderr[-800:]
    assert InvalidArgument.__name__ in proc.stderr


def test_rl2_max_turns_ends_the_episode_and_frees_it(tmp_path):
    """rollout.max_turns below the env's limit: the kit's episode ends at RL2's last step."""
    from gem_rl2 import rollout as gem_rollout

    path, tokenizer = _setup()
    config = rl2_config(path, "rollout.max_turns=2")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"extra_info": {"env_id": "game:GuessTheNumber-v0-easy", "seed": 5, "max_turns": 8}}) + "\n")
    with SGLangStandIn(path, script=functools.partial(scenario_script, "guess")) as server:
        rollout = make_rollout(config, server.url)
        tensor_dict, cu_seqs = play(rollout, data_list(config, tokenizer, str(rows)))
        assert len(server.requests) == 2
    turns = turn_spans(tensor_dict["action_mask"][0])
    assert len(turns) == 2, f"expected 2 turns (rollout.max_turns=2), got {turns}"
    assert not gem_rollout._SESSIONS, f"sessions left behind: {list(gem_rollout._SESSIONS)}"
