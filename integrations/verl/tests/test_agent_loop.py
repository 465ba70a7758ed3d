"""The ``gem_agent`` loop inside verl's real ``AgentLoopWorker``, served by a tiny real model."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("verl", reason="gem-verl's tests need verl installed (make test-verl builds its venv)")

import torch  # noqa: E402
from gem_verl.agent_loop import GemAgentLoopOutput  # noqa: E402
from gem_verl.testing import TinyModelClient, conformance_script  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402

from gem_core.errors import InvalidArgument  # noqa: E402
from gem_core.testing.conformance import (  # noqa: E402
    SCENARIO,
    assert_matches_reference,
    per_turn_values,
    turn_spans,
)

from .conftest import PROMPT_LENGTH, RESPONSE_LENGTH, compose_config  # noqa: E402
from .conftest import make_loop as _loop  # noqa: E402


def _rows(seeds, env_id=SCENARIO.env_id) -> DataProto:
    """Dataset rows as verl's RLHFDataset yields them (env id and seed columns)."""
    n = len(seeds)
    placeholder = [{"role": "user", "content": f"{env_id}"}]
    non_tensor = {
        "raw_prompt": np.array([placeholder] * n + [None], dtype=object)[:n],
        "env_id": np.array([env_id] * n, dtype=object),
        "seed": np.array(list(seeds), dtype=np.int64),
        "agent_name": np.array(["gem_agent"] * n, dtype=object),
        "index": np.arange(n),
        "extra_info": np.array([{"index": i} for i in range(n)], dtype=object),
        "data_source": np.array([f"gem:{env_id}"] * n, dtype=object),
    }
    batch = TensorDict({"dummy_tensor": torch.zeros(n, 1, dtype=torch.uint8)}, batch_size=n)
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


@pytest.fixture(scope="module")
def scripted_client(verl_config, tiny_model_path):
    return TinyModelClient(verl_config, tiny_model_path, script=conformance_script)


@pytest.fixture(scope="module")
def worker_output(verl_config, scripted_client):
    worker = AgentLoopWorker(verl_config, scripted_client)
    return asyncio.run(worker.generate_sequences(_rows(SCENARIO.seeds)))


def _sampling(**extra):
    return {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True, **extra}


def test_worker_dataproto_tokens_and_masks_are_exact(worker_output, reference):
    data = worker_output
    assert data.batch["responses"].shape == (len(SCENARIO.seeds), RESPONSE_LENGTH)
    assert data.batch["prompts"].shape == (len(SCENARIO.seeds), PROMPT_LENGTH)
    for i in range(len(SCENARIO.seeds)):
        p = reference.packed(i)
        m, k = len(p["response_ids"]), len(p["prompt_ids"])
        assert data.batch["responses"][i, :m].tolist() == p["response_ids"]
        assert data.batch["response_mask"][i, :m].tolist() == p["response_mask"]
        assert not data.batch["response_mask"][i, m:].any()
        assert data.batch["prompts"][i, -k:].tolist() == p["prompt_ids"]
        assert data.batch["attention_mask"][i].sum().item() == k + m
        # Generated tokens carry the tiny model's log-probs, env tokens none.
        lp = data.batch["rollout_log_probs"][i, :m]
        mask = data.batch["response_mask"][i, :m].bool()
        assert (lp[mask] < 0).all() and not lp[~mask].any()


def test_worker_dataproto_rewards_and_metrics(worker_output, reference):
    data = worker_output
    nt = data.non_tensor_batch
    for i, ep in enumerate(reference.episodes):
        np.testing.assert_allclose(nt["turn_scores"][i], reference.rewards[i], atol=1e-12)
        assert nt["success"][i] == float(ep.success)
        assert nt["num_turns"][i] == ep.num_turns
        assert nt["__num_turns__"][i] == 2 * ep.num_turns
        # verl's legacy worker keeps only the scalar reward_score (the episode return) on
        # the last response token; the per-turn rewards ride in turn_scores (see README).
        m = len(reference.packed(i)["response_ids"])
        rm = data.batch["rm_scores"][i]
        assert rm[m - 1].item() == pytest.approx(ep.episode_return, abs=1e-6)
        assert rm.sum().item() == pytest.approx(ep.episode_return, abs=1e-6)
    assert "success" in data.meta_info["reward_extra_keys"]


def test_v1_output_puts_per_turn_rewards_in_rm_scores_and_rebn_matches(
    verl_config, scripted_client, tokenizer, reference
):
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    loop = _loop(verl_config, scripted_client, tokenizer)
    rows = _rows(SCENARIO.seeds)
    fields = []
    for i in range(len(rows)):
        kwargs = {k: v[i] for k, v in rows.non_tensor_batch.items() if k != "agent_name"}
        out = asyncio.run(loop.run(_sampling(), **kwargs))
        assert isinstance(out, GemAgentLoopOutput)
        fields.append(out.as_dict())  # what AgentLoopWorkerTQ stores in TransferQueue
    for i, f in enumerate(fields):
        p = reference.packed(i)
        assert f["responses"].tolist() == p["response_ids"]
        assert f["response_mask"].tolist() == p["response_mask"]
        np.testing.assert_allclose(f["rm_scores"].numpy(), p["token_rewards"], atol=1e-7)
        assert "token_rewards" not in f
    # The v1 trainer's advantage step: rm_scores -> token_level_rewards -> estimator.
    n, width = len(fields), max(len(f["responses"]) for f in fields)
    mask = torch.zeros(n, width, dtype=torch.int64)
    scores = torch.zeros(n, width)
    for i, f in enumerate(fields):
        mask[i, : len(f["response_mask"])] = f["response_mask"]
        scores[i, : len(f["rm_scores"])] = f["rm_scores"]
    data = DataProto(
        batch=TensorDict({"response_mask": mask, "token_level_rewards": scores}, batch_size=n),
        non_tensor_batch={"uid": np.array([f"u{i}" for i in range(n)], dtype=object)},
    )
    data = compute_advantage_for_multi_trajectories(
        data,
        batch_keys=[f"u{i}_0_0" for i in range(n)],
        adv_estimator="rebn",
        gamma=verl_config.algorithm.gamma,
        config=verl_config.algorithm,
    )
    got = [per_turn_values(data.batch["advantages"][i], mask[i]) for i in range(n)]
    assert_matches_reference(got, reference)


def test_free_generation_is_token_exact_and_within_budget(verl_config, tiny_model_path, tokenizer):
    """Greedy tiny-model generation; the server must see exactly the stored tokens."""
    client = TinyModelClient(verl_config, tiny_model_path)
    loop = _loop(
        verl_config,
        client,
        tokenizer,
        max_tokens_per_turn=24,
        env_kwargs={"format_error": "retry"},  # keep going on unparsable guesses
    )
    rows = _rows([3])
    kwargs = {k: v[0] for k, v in rows.non_tensor_batch.items() if k != "agent_name"}
    out = asyncio.run(loop.run(_sampling(), **kwargs))
    spans = turn_spans(out.response_mask)
    assert len(spans) >= 2, "expected a multi-turn episode"
    assert len(spans) == len(client.generator.requests)
    seq = out.prompt_ids + out.response_ids
    for (s, e), req in zip(spans, client.generator.requests, strict=True):
        start = len(out.prompt_ids) + s
        assert req["prompt_ids"] == seq[:start]  # prompted with exactly the stored tokens
        assert out.response_ids[s:e] == req["token_ids"]
        assert e - s <= 24 and req["max_tokens"] <= 24
    assert len(out.response_ids) <= RESPONSE_LENGTH
    np.testing.assert_allclose(sum(out.token_rewards), out.reward_score, atol=1e-9)
    assert out.extra_fields["reward_extra_info"]["num_turns"] == len(spans)


def test_response_budget_ends_the_episode(tiny_model_path, tokenizer):
    config = compose_config(tiny_model_path, "actor_rollout_ref.rollout.response_length=60")
    client = TinyModelClient(config, tiny_model_path)
    loop = _loop(config, client, tokenizer, max_tokens_per_turn=16, env_kwargs={"format_error": "retry"})
    rows = _rows([3])
    kwargs = {k: v[0] for k, v in rows.non_tensor_batch.items() if k != "agent_name"}
    out = asyncio.run(loop.run(_sampling(), **kwargs))
    assert len(out.response_ids) <= 60
    # The last request was capped at what was left of the budget.
    last = client.generator.requests[-1]
    left = len(out.prompt_ids) + 60 - len(last["prompt_ids"])
    assert last["max_tokens"] == min(16, left)


def test_row_without_env_id_is_a_clear_error(verl_config, scripted_client, tokenizer):
    loop = _loop(verl_config, scripted_client, tokenizer)
    with pytest.raises(InvalidArgument, match="needs the env id in the row's 'env_id' column"):
        asyncio.run(loop.run(_sampling(), raw_prompt=[], extra_info={}))


def test_env_id_and_seed_may_come_from_extra_info(verl_config, scripted_client, tokenizer, reference):
    loop = _loop(verl_config, scripted_client, tokenizer)
    out = asyncio.run(
        loop.run(_sampling(), raw_prompt=[], extra_info={"env_id": SCENARIO.env_id, "seed": SCENARIO.seeds[2]})
    )
    assert out.response_ids == reference.packed(2)["response_ids"]


def test_first_prompt_longer_than_prompt_length_is_a_clear_error(tiny_model_path, tokenizer):
    config = compose_config(tiny_model_path, "actor_rollout_ref.rollout.prompt_length=16")
    loop = _loop(config, TinyModelClient(config, tiny_model_path, script=conformance_script), tokenizer)
    with pytest.raises(RuntimeError, match=r"more than actor_rollout_ref.rollout.prompt_length=16; raise data.max_prompt_length"):
        asyncio.run(loop.run(_sampling(), env_id=SCENARIO.env_id, seed=0, raw_prompt=[]))


def test_legacy_trainer_with_rebn_warns_once(tiny_model_path, tokenizer, monkeypatch):
    import gem_verl.advantage as advantage

    monkeypatch.setattr(advantage, "_legacy_warned", False)
    legacy = compose_config(tiny_model_path, "trainer.use_v1=False")
    client = TinyModelClient(legacy, tiny_model_path, script=conformance_script)
    with pytest.warns(RuntimeWarning, match=r"rebn on verl's legacy trainer \(trainer.use_v1=False\).*set trainer.use_v1=True"):
        _loop(legacy, client, tokenizer)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _loop(legacy, client, tokenizer)  # once per process
        monkeypatch.setattr(advantage, "_legacy_warned", False)
        _loop(compose_config(tiny_model_path), client, tokenizer)  # v1: no warning
        _loop(compose_config(tiny_model_path, "trainer.use_v1=False", "algorithm.adv_estimator=grpo"), client, tokenizer)
