"""Bad input gives a clear error, never silent training."""

from __future__ import annotations

import functools

import pytest

pytest.importorskip("trl", reason="gem-trl's tests need TRL installed (make test-trl builds its venv)")

from gem_core.errors import InvalidArgument, InvalidRow  # noqa: E402
from gem_core.rl.testing import TinyModelGenerator  # noqa: E402
from gem_core.testing.conformance import scenario_script  # noqa: E402

from .conftest import make_config, make_trainer, tiny_model_path  # noqa: E402

ROWS = [{"prompt": "play", "env_id": "game:GuessTheNumber-v0-easy", "seed": s} for s in (0, 0, 1, 1)]


def _scripted(**kwargs):
    from gem_trl import GemRollout

    return GemRollout(generate=TinyModelGenerator(tiny_model_path(), script=functools.partial(scenario_script, "guess")), **kwargs)


def test_a_dataset_without_env_id_is_refused_at_construction(tmp_path) -> None:
    import datasets

    bad = datasets.Dataset.from_dict({"prompt": ["play"] * 4, "seed": [0, 1, 2, 3]})
    with pytest.raises(InvalidRow, match=r"needs the columns prompt .* and env_id .* lacks \['env_id'\].*make_dataset"):
        make_trainer(tmp_path, dataset=bad)


def test_a_row_without_env_id_fails_its_rollout_clearly(tmp_path) -> None:
    trainer = make_trainer(tmp_path, rollout=_scripted(), num_generations=2)
    rows = [dict(r) for r in ROWS]
    rows[2]["env_id"] = None
    with pytest.raises(InvalidRow, match=r"env id in the row's 'env_id' column.*got None.*gem_trl.make_dataset"):
        trainer._generate_and_score_completions(rows)


def test_a_completion_count_mismatch_is_an_error(tmp_path) -> None:
    inner = _scripted()

    def doubled(prompts, trainer):  # the mistake TRL accepts: num_generations completions per entry
        out = inner(prompts, trainer)
        return {k: v + v if isinstance(v, list) else v for k, v in out.items()}

    trainer = make_trainer(tmp_path, rollout=doubled, num_generations=2)
    with pytest.raises(InvalidArgument, match=r"returned 8 entries of 'prompt_ids' for 4 prompts.*exactly one completion per prompt"):
        trainer._generate_and_score_completions([dict(r) for r in ROWS])


def test_misaligned_rollout_rows_are_an_error(tmp_path) -> None:
    inner = _scripted()

    def short_mask(prompts, trainer):
        out = inner(prompts, trainer)
        out["env_mask"][1] = out["env_mask"][1][:-1]
        return out

    trainer = make_trainer(tmp_path, rollout=short_mask, num_generations=2)
    with pytest.raises(InvalidArgument, match=r"completion 1 has \d+ ids but \d+ entries of 'env_mask'"):
        trainer._generate_and_score_completions([dict(r) for r in ROWS])


def test_a_rollout_without_per_turn_rewards_is_an_error(tmp_path) -> None:
    inner = _scripted()

    def no_rewards(prompts, trainer):
        out = inner(prompts, trainer)
        del out["gem_token_rewards"]
        return out

    trainer = make_trainer(tmp_path, rollout=no_rewards, num_generations=2)
    with pytest.raises(InvalidArgument, match=r"lacks \['gem_token_rewards'\]"):
        trainer._generate_and_score_completions([dict(r) for r in ROWS])


def test_reward_funcs_and_foreign_configs_are_refused(tmp_path) -> None:
    from gem_trl import GemGRPOTrainer, make_dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig

    model = AutoModelForCausalLM.from_pretrained(tiny_model_path(), local_files_only=True)
    data = make_dataset("game:GuessTheNumber-v0-easy", range(4))
    with pytest.raises(InvalidArgument, match="supplies its reward function"):
        GemGRPOTrainer(model, make_config(tmp_path), data, reward_funcs=[lambda **kw: [0.0]])
    with pytest.raises(InvalidArgument, match="needs args=GemGRPOConfig"):
        GemGRPOTrainer(model, GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[]), data)
    with pytest.raises(InvalidArgument, match=r"gamma must be in \[0, 1\], got 1.5"):
        make_config(tmp_path, gamma=1.5)
    with pytest.raises(InvalidArgument, match="truncated_response must be 'pass' or 'penalize'"):
        make_config(tmp_path, truncated_response="drop")


def test_gem_rollout_under_a_plain_grpo_trainer_says_what_to_use(tmp_path) -> None:
    from gem_trl import gem_episode_return, make_dataset
    from trl import GRPOTrainer

    trainer = GRPOTrainer(
        tiny_model_path(), reward_funcs=[gem_episode_return], args=make_config(tmp_path, num_generations=2),
        train_dataset=make_dataset("game:GuessTheNumber-v0-easy", range(4)), rollout_func=_scripted(),
    )  # fmt: skip
    with pytest.raises(InvalidArgument, match="train with gem_trl.GemGRPOTrainer"):
        trainer._generate_and_score_completions([dict(r) for r in ROWS])


def test_env_kwargs_from_the_command_line_are_json(tmp_path) -> None:
    assert make_config(tmp_path, env_kwargs='{"max_turns": 3}').env_kwargs == {"max_turns": 3}


def test_the_overridden_trl_method_is_checked_with_a_named_message(monkeypatch):
    """gem-trl overrides GRPOTrainer._generate_and_score_completions; a changed signature is named."""
    from gem_trl.trainer import check_trl_hooks
    from trl import GRPOTrainer

    check_trl_hooks()  # the installed TRL
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", lambda self, batch, extra: None)
    with pytest.raises(ImportError, match=r"TRL changed GRPOTrainer._generate_and_score_completions: .*tested with trl 1.16.x"):
        check_trl_hooks()
