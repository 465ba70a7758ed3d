"""Math with images: observation type, image sources, the shipped diagrams and grading."""

from __future__ import annotations

import base64
import json
import pickle

import pytest

pytest.importorskip("math_verify", reason="math envs need math-verify (gem-core[math])")

from gem_core import make  # noqa: E402
from gem_core.data import SAMPLES_DIR  # noqa: E402
from gem_core.envs.math_visual import MathVisualEnv  # noqa: E402
from gem_core.errors import InvalidArgument  # noqa: E402
from gem_core.registration import registry  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SAMPLE = SAMPLES_DIR / "axon-rl__geometry3k"


def test_ids_follow_the_reference() -> None:
    train, test = registry["math:Geometry3K"], registry["eval:Geometry3K"]
    assert train.kwargs["dataset_name"] == test.kwargs["dataset_name"] == "axon-rl/geometry3k"
    assert (train.kwargs["split"], test.kwargs["split"]) == ("train", "test")
    assert train.kwargs["image_key"] == "images"


# check_env on every math-with-images id (on the shipped sample) is tests/test_checker.py::
# test_check_env_all_registered, which runs it on every registered id.


def test_observation_is_text_plus_png_bytes_and_picklable() -> None:
    env = make("math:Geometry3K", data_path="sample")
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"text", "images"}
    assert "Please reason step by step" in obs["text"]
    assert len(obs["images"]) == 1 and obs["images"][0].startswith(PNG_MAGIC)
    assert pickle.loads(pickle.dumps(obs)) == obs
    assert env.reset(seed=0)[0] == obs


def test_pil_images_on_request() -> None:
    PIL = pytest.importorskip("PIL.Image")
    env = make("eval:Geometry3K", data_path="sample", image_format="pil")
    obs, _ = env.reset(options={"index": 0})
    (img,) = obs["images"]
    assert isinstance(img, PIL.Image) and img.size[0] > 50


def test_the_sample_is_small_and_every_diagram_is_answered_by_its_answer() -> None:
    size = sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file())
    assert size < 2_000_000
    for env_id in ("math:Geometry3K", "eval:Geometry3K"):
        env = make(env_id, data_path="sample")
        rows = env.unwrapped.rows
        assert len(rows) >= 10
        for i, row in enumerate(rows):
            obs, _ = env.reset(options={"index": i})
            assert obs["images"][0] == (SAMPLE / row["images"][0]).read_bytes()
            _, reward, terminated, _, info = env.step(f"\\boxed{{{row['answer']}}}")
            assert (reward, terminated, info["success"]) == (1.0, True, True), row


def test_wrong_and_unboxed_answers() -> None:
    env = make("math:Geometry3K", data_path="sample", format_penalty=-0.2)
    env.reset(seed=2)
    obs, reward, terminated, _, info = env.step("\\boxed{-12345}")
    assert (obs, reward, terminated, info["success"]) == ("Incorrect.", 0.0, True, False)
    env.reset(seed=2)
    assert env.step(None)[1] == -0.2


def test_image_sources_data_urls_bytes_dicts_and_relative_paths(tmp_path) -> None:
    png = (SAMPLE / "images" / "train_000.png").read_bytes()
    (tmp_path / "figs").mkdir()
    (tmp_path / "figs" / "a.png").write_bytes(png)
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    rows = [
        {"problem": "p0", "answer": "1", "images": ["figs/a.png"]},
        {"problem": "p1", "answer": "1", "images": [url, {"bytes": None, "path": str(tmp_path / "figs" / "a.png")}]},
        {"problem": "p2", "answer": "1", "images": "figs/a.png"},
        {"problem": "p3", "answer": "1", "images": None},
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = MathVisualEnv("org/figs", data_path=path)
    assert env.reset(options={"index": 0})[0]["images"] == [png]
    assert env.reset(options={"index": 1})[0]["images"] == [png, png]
    assert env.reset(options={"index": 2})[0]["images"] == [png]
    assert env.reset(options={"index": 3})[0] == {"text": env.problem, "images": []}
    env.rows = [{"problem": "p", "answer": "1", "images": [b"raw", {"bytes": b"raw2"}]}]
    assert env.reset(options={"index": 0})[0]["images"] == [b"raw", b"raw2"]


def test_a_missing_image_file_names_it_and_where_it_looked(tmp_path) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"problem": "p", "answer": "1", "images": ["nope.png"]}) + "\n")
    env = MathVisualEnv("org/missing", data_path=path, env_id="math:Mine")
    with pytest.raises(FileNotFoundError, match=r"math:Mine: image 'nope.png' not found \(looked in "):
        env.reset()


def test_bad_arguments(tmp_path) -> None:
    with pytest.raises(InvalidArgument, match=r"image_format must be one of \('png', 'pil'\), got 'jpeg'"):
        MathVisualEnv("axon-rl/geometry3k", data_path="sample", image_format="jpeg")
    with pytest.raises(InvalidArgument, match="rows have no image column 'figure'"):
        MathVisualEnv("axon-rl/geometry3k", data_path="sample", image_key="figure")
    env = MathVisualEnv("axon-rl/geometry3k", data_path="sample")
    env.rows = [{"problem": "p", "answer": "1", "images": [3.5]}]
    with pytest.raises(InvalidArgument, match="cannot read an image of type float"):
        env.reset()


def test_tool_wrapper_appends_instructions_to_the_text() -> None:
    from gem_core.tools import PythonCodeTool, ToolEnvWrapper

    env = ToolEnvWrapper(make("math:Geometry3K", data_path="sample"), [PythonCodeTool()])
    try:
        obs, _ = env.reset(seed=0)
        assert "<python>" in obs["text"] and obs["images"][0].startswith(PNG_MAGIC)
    finally:
        env.close()
