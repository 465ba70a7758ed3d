r"""Math with images: `MathVisualEnv`, a math env whose observations carry text plus diagrams."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

from gem_core.data import SAMPLES_DIR, dataset_dir_name
from gem_core.envs.math import DEFAULT_INSTRUCTION, MathEnv
from gem_core.errors import DependencyNotInstalled, InvalidArgument

__all__ = ["MathVisualEnv", "IMAGE_FORMATS"]

IMAGE_FORMATS = ("png", "pil")
_DATA_URL_PREFIX = "data:image/"


class MathVisualEnv(MathEnv):
    r"""Answer a math question about a figure; the last ``\boxed{...}`` is graded.

    Everything but the observation is `MathEnv`'s: action, rewards, episode end, info,
    problem order and grading (math-verify in the shared grader pool).

    Observation: at reset a dict ``{"text": str, "images": list}``: ``text`` is the problem
        followed by ``instruction``; ``images`` are the row's images, as encoded image
        bytes (``image_format="png"``, the default: the file's bytes as stored, PNG for the
        shipped sample; picklable and comparable with ``==``) or as ``PIL.Image.Image``
        objects (``image_format="pil"``, needs Pillow). Observations after a step are text
        (the verdict), like `MathEnv`'s.
    Images in the data: each row's ``image_key`` column holds one image or a list of
        them, each a path (absolute, or relative to the local copy's directory / the
        shipped sample's directory), a ``data:image/...;base64,`` URL, raw bytes, a
        ``{"bytes": ..., "path": ...}`` dict (a `datasets` Image column read from
        Parquet) or a ``PIL.Image.Image`` (a `datasets` Image column).

    Arguments:
        image_key: the column holding the images (``"images"``).
        image_format: ``"png"`` (bytes) or ``"pil"``.
        Everything else: see `MathEnv`.

    Version history: v0 — the reference GEM's ``math:Geometry3K`` id, dataset and keys
        (the reference returns ``{"problem", "images"}``; we use ``"text"`` like every
        gem_core observation dict, which the history and tool wrappers understand).
    """

    metadata = {"category": "math", "modalities": ("text", "image")}

    def __init__(
        self,
        dataset_name: str,
        split: str = "train",
        question_key: str = "problem",
        answer_key: str = "answer",
        data_path: str | os.PathLike[str] | None = None,
        *,
        image_key: str = "images",
        image_format: str = "png",
        instruction: str | None = DEFAULT_INSTRUCTION,
        **math_kwargs: Any,
    ):
        if image_format not in IMAGE_FORMATS:
            raise InvalidArgument(
                f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}"
            )
        if image_format == "pil":
            try:
                import PIL.Image  # noqa: F401
            except ImportError as e:
                raise DependencyNotInstalled("PIL", "vision", "image_format='pil'") from e
        super().__init__(
            dataset_name, split, question_key, answer_key, data_path,
            instruction=instruction, **math_kwargs,
        )
        if image_key not in self.rows[0]:
            raise InvalidArgument(
                f"{self.env_id}: rows have no image column {image_key!r}; columns found: "
                f"{sorted(self.rows[0])}. Pass image_key=... naming the image column."
            )
        self.image_key = image_key
        self.image_format = image_format
        self._image_dirs = _image_dirs(dataset_name, data_path)

    def observation(self, text: str, row: dict[str, Any] | None = None) -> dict[str, Any]:
        images = row.get(self.image_key) if row is not None else None
        if images is None:
            images = []
        elif not isinstance(images, (list, tuple)):
            images = [images]
        return {"text": text, "images": [self._load(img) for img in images]}

    def _load(self, image: Any) -> Any:
        data = self._encoded(image)
        if self.image_format == "png":
            return data
        import PIL.Image

        img = PIL.Image.open(io.BytesIO(data))
        img.load()
        return img

    def _encoded(self, image: Any) -> bytes:
        if isinstance(image, (bytes, bytearray)):
            return bytes(image)
        if isinstance(image, dict):
            if image.get("bytes"):
                return bytes(image["bytes"])
            if image.get("path"):
                return self._read(str(image["path"]))
        if isinstance(image, str):
            if image.startswith(_DATA_URL_PREFIX):
                return base64.b64decode(image.split(",", 1)[1])
            return self._read(image)
        if type(image).__module__.startswith("PIL."):
            buf = io.BytesIO()
            image.save(buf, format="PNG")
            return buf.getvalue()
        raise InvalidArgument(
            f"{self.env_id}: cannot read an image of type {type(image).__name__} from column "
            f"{self.image_key!r}; expected a path, a data URL, bytes, a {{'bytes', 'path'}} dict "
            "or a PIL image"
        )

    def _read(self, path: str) -> bytes:
        p = Path(path).expanduser()
        candidates = [p] if p.is_absolute() else [d / p for d in self._image_dirs]
        for c in candidates:
            if c.is_file():
                return c.read_bytes()
        raise FileNotFoundError(
            f"{self.env_id}: image {path!r} not found (looked in "
            f"{', '.join(str(c.parent) for c in candidates) or 'nowhere'}); relative image paths "
            "are resolved against the directory of the data file"
        )


def _image_dirs(dataset: str, data_path: Any) -> list[Path]:
    """Where relative image paths may live, in the order `gem_core.data.load_rows` resolves."""
    dirs: list[Path] = []
    if data_path is not None and str(data_path) != "sample":
        p = Path(data_path).expanduser().resolve()
        dirs.append(p if p.is_dir() else p.parent)
    gem_dir = os.environ.get("GEM_DATA_DIR")
    if gem_dir:
        dirs.append(Path(gem_dir).expanduser() / dataset_dir_name(dataset))
    dirs.append(SAMPLES_DIR / dataset_dir_name(dataset))
    return dirs
