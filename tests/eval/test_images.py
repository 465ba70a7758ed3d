"""`gem eval` with image observations: image parts in chat mode, summaries in records, completions refused."""

from __future__ import annotations

import base64
import json
import re

import pytest

import gem_core
from gem_core.cli import main
from gem_core.data import SAMPLES_DIR
from gem_core.errors import InvalidArgument
from gem_core.eval.runner import TextOnlyObservations
from tests.eval.conftest import message_text
from tests.testing_env import GenericTestEnv

GEO = "eval:Geometry3K"
SAMPLE = SAMPLES_DIR / "axon-rl__geometry3k"
PNG_SIG = b"\x89PNG\r\n\x1a\n"
BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{200,}={0,2}")


def _rows() -> list[dict]:
    return [json.loads(x) for x in (SAMPLE / "test.jsonl").read_text().splitlines() if x.strip()]


def test_cli_chat_sends_image_parts_scores_answers_and_records_no_image_data(server, tmp_path, capsys):
    rows = _rows()
    seed, episodes = 3, 3
    probe = gem_core.make(GEO, data_path="sample")
    wrong_text = probe.reset(seed=seed + 1)[0]["text"]  # episode 1 gets a wrong answer
    probe.close()

    def reply(messages):
        (user,) = [m for m in messages if m["role"] == "user"]
        text = message_text(user)
        (row,) = [r for r in rows if text.startswith(r["problem"] + "\n")]
        return "\\boxed{" + ("-1" if text == wrong_text else row["answer"]) + "}"

    server.chat_reply = reply
    out = tmp_path / "geo"
    rc = main(["eval", GEO, "--api", "chat", "--base-url", server.base_url, "--model", "tiny",
               "--env-kwargs", '{"data_path": "sample"}', "--episodes", str(episodes),
               "--seed", str(seed), "--concurrency", "2", "--out", str(out), "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    assert len(server.requests) == episodes

    # Every request carries the problem text, then the row's figure as a base64 PNG part.
    for body in server.requests:
        (user,) = body["messages"]
        text_part, *image_parts = user["content"]
        assert text_part["type"] == "text"
        (row,) = [r for r in rows if text_part["text"].startswith(r["problem"] + "\n")]
        assert [p["type"] for p in image_parts] == ["image_url"] * len(row["images"])
        for part, path in zip(image_parts, row["images"], strict=True):
            head, _, payload = part["image_url"]["url"].partition(",")
            assert head == "data:image/png;base64"
            data = base64.b64decode(payload, validate=True)
            assert data.startswith(PNG_SIG) and data == (SAMPLE / path).read_bytes()

    # Scored: the right answers succeed, the wrong one does not.
    raw = (out / "episodes.jsonl").read_text()
    recs = sorted((json.loads(x) for x in raw.splitlines()), key=lambda r: r["index"])
    assert [r["success"] for r in recs] == [True, False, True]
    assert [r["return"] for r in recs] == [1.0, 0.0, 1.0]
    # Records: the text and an image summary, never image data.
    assert "base64" not in raw and not BASE64_RUN.search(raw) and len(raw) < 8000
    for r in recs:
        (obs,) = r["observations"]
        (row,) = [x for x in rows if obs.startswith(x["problem"] + "\n")]
        (images,) = r["observation_images"]
        assert images == [{"mime": "image/png", "bytes": (SAMPLE / p).stat().st_size,
                           "width": images[0]["width"], "height": images[0]["height"]}
                          for p in row["images"]]
        assert images[0]["width"] > 0 and images[0]["height"] > 0
        assert r["images_sent"] == 1 and r["image_bytes_sent"] == images[0]["bytes"]
    assert "base64" not in (out / "manifest.json").read_text()


def test_completions_mode_refuses_image_envs_before_contacting_anything(tmp_path, capsys):
    rc = main(["eval", GEO, "--env-kwargs", '{"data_path": "sample"}', "--base-url",
               "http://127.0.0.1:9/v1", "--model", "tiny", "--out", str(tmp_path / "x"),
               "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err
    assert f"{GEO}: its observations carry images" in err and "Use --api chat" in err
    assert not (tmp_path / "x").exists()


def test_completions_mode_guard_refuses_undeclared_images():
    png = PNG_SIG + b"\x00" * 16

    def reset(env, seed, options):
        return {"text": "t", "images": [png]}, {}

    env = TextOnlyObservations(GenericTestEnv(reset), "custom:Env")
    with pytest.raises(InvalidArgument, match=r"custom:Env: an observation carries 1 image\(s\).*"
                                              r"Use --api chat"):
        env.reset(seed=0)
    text_env = TextOnlyObservations(GenericTestEnv(), "custom:Text")
    assert text_env.reset(seed=0)[0].startswith("start ")  # text passes through
    assert text_env.step("a")[0] == "obs 1"
