"""`EvalConfig`: the one list of eval settings; the manifest's ``config`` keeps its format."""

from __future__ import annotations

import asyncio
import json

import pytest

from gem_core.core import ObservationWrapper
from gem_core.errors import InvalidKwarg
from gem_core.eval import evaluate
from gem_core.eval.config import CONFIG_DEFAULTS, PINNED, EvalConfig
from gem_core.eval.runner import TextOnlyObservations
from gem_core.rl.rollout import ChatResult
from tests.testing_env import GenericTestEnv

ECHO = "toy:Echo-v0"
URL = "http://unused.invalid/v1"

# The manifest's ``config`` keys, in order, as every earlier run wrote them (resume reads them);
# new keys go at the end (request_seed: runs without it sent seeds).
MANIFEST_CONFIG_KEYS = [
    "env_ids", "model", "api", "episodes", "seed", "tokenizer", "wrappers", "tools", "max_tool_uses",
    "env_kwargs", "temperature", "top_p", "max_tokens", "max_turns", "max_context", "system_prompt",
    "extra_body", "user", "request_seed",
]


class Parrot:
    """A chat policy that answers every turn with the same word."""

    async def chat(self, messages, sampling):
        await asyncio.sleep(0)
        return ChatResult("apple", "stop", len(messages), 1)


def _kw(**extra):
    return {"api": "chat", "base_url": URL, "model": "m", "episodes": 2, "max_turns": 1, "progress": False,
            **extra}


def test_the_defaults_and_pinned_settings_are_the_manifest_config_fields():
    assert list(CONFIG_DEFAULTS) == MANIFEST_CONFIG_KEYS[2:]
    assert CONFIG_DEFAULTS["episodes"] == 10 and CONFIG_DEFAULTS["wrappers"] == []
    assert set(PINNED) == set(MANIFEST_CONFIG_KEYS) - {"episodes", "user"}
    config = EvalConfig(env_ids=ECHO, base_url=URL, model="m", wrappers=("history",))
    assert list(config.manifest_config()) == MANIFEST_CONFIG_KEYS
    assert config.manifest_config()["env_ids"] == [ECHO]
    assert config.manifest_config()["wrappers"] == ["history"]
    assert "sk-secret" not in repr(EvalConfig(env_ids=ECHO, base_url=URL, model="m", api_key="sk-secret"))


def test_the_manifest_on_disk_keeps_its_config_format(tmp_path):
    res = evaluate(ECHO, policy=Parrot(), out_dir=tmp_path / "run", **_kw(extra_body=None))
    on_disk = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert list(on_disk["config"]) == MANIFEST_CONFIG_KEYS
    assert on_disk["config"]["env_ids"] == [ECHO] and on_disk["config"]["extra_body"] == {}
    assert on_disk["config"] == res.manifest["config"]
    assert on_disk["endpoint"]["base_url"] == URL and on_disk["concurrency"] == 8


def test_evaluate_takes_an_eval_config_as_it_takes_keywords(tmp_path):
    by_kw = evaluate(ECHO, policy=Parrot(), out_dir=tmp_path / "kw", **_kw())
    config = EvalConfig(env_ids=ECHO, out_dir=tmp_path / "cfg", **_kw())
    by_config = evaluate(config, policy=Parrot())
    assert by_config.manifest["config"] == by_kw.manifest["config"]
    assert [(r["env_id"], r["index"], r["actions"], r["rewards"]) for r in by_config.records] == \
        [(r["env_id"], r["index"], r["actions"], r["rewards"]) for r in by_kw.records]
    # Keywords given with a config override its fields.
    more = evaluate(config, policy=Parrot(), episodes=3, out_dir=tmp_path / "more")
    assert more.manifest["config"]["episodes"] == 3 and len(more.records) == 3


def test_an_unknown_or_missing_setting_is_refused_naming_it():
    with pytest.raises(InvalidKwarg, match=r"evaluate\(\) got unexpected keyword argument\(s\) 'episode'; "
                                           r"did you mean 'episodes'\? The settings are the fields of "
                                           r"gem_core.eval.EvalConfig: env_ids, model, "):
        evaluate(ECHO, base_url=URL, model="m", episode=3)
    with pytest.raises(TypeError, match=r"evaluate\(\) needs base_url \(e.g. base_url="):
        evaluate(ECHO, model="m")


def test_the_text_only_adapter_is_an_observation_wrapper():
    env = TextOnlyObservations(GenericTestEnv(), "custom:Text")
    assert isinstance(env, ObservationWrapper)
    assert env.observation("plain text") == "plain text"
    assert env.observation({"text": "t", "images": []}) == {"text": "t", "images": []}
