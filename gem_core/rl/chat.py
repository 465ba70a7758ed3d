"""Chat formatting: observations to chat messages (images as content parts) and `ChatFormatter` (to token ids)."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from gem_core.core import observation_text
from gem_core.errors import InvalidArgument, TemplateRewriteWarning

__all__ = [
    "ChatFormatter",
    "TemplateRewriteWarning",
    "chat_messages",
    "chat_content",
    "image_data_url",
]


#: Leading bytes of the encoded image formats `image_data_url` sends as they are.
_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _image_mime(data: bytes) -> str | None:
    for signature, mime in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _encode_image(image: Any) -> tuple[str, dict[str, Any]]:
    """``(data URL, summary)`` of one observation image (see `image_data_url`)."""
    if type(image).__module__.startswith("PIL.") and hasattr(image, "save"):
        import io

        buf = io.BytesIO()
        try:
            image.save(buf, format="PNG")
        except Exception as exc:
            raise InvalidArgument(
                f"cannot encode a PIL image (mode {getattr(image, 'mode', '?')!r}) as PNG: "
                f"{type(exc).__name__}: {exc}; convert it first (e.g. image.convert('RGB'))"
            ) from None
        image = buf.getvalue()
    if isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
        mime = _image_mime(data)
        if mime is None:
            raise InvalidArgument(
                f"observation image of {len(data)} bytes starting {data[:8]!r} is not PNG, JPEG, "
                "GIF or WebP data; return encoded image bytes (e.g. the PNG file's bytes) or a "
                "PIL image from the env"
            )
        summary: dict[str, Any] = {"mime": mime, "bytes": len(data), "width": None, "height": None}
        if mime == "image/png" and len(data) >= 24 and data[12:16] == b"IHDR":
            summary["width"] = int.from_bytes(data[16:20], "big")
            summary["height"] = int.from_bytes(data[20:24], "big")
        return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}", summary
    if isinstance(image, str) and image.startswith("data:image/") and ";base64," in image:
        head, _, payload = image.partition(",")
        return image, {
            "mime": head[len("data:") :].split(";")[0],
            "bytes": len(payload) * 3 // 4 - payload[-2:].count("="),
            "width": None,
            "height": None,
        }
    raise InvalidArgument(
        f"cannot send an observation image of type {type(image).__name__} to a chat model: "
        "expected encoded image bytes (PNG, JPEG, GIF, WebP), a PIL.Image.Image or a "
        "'data:image/...;base64,' URL (for MathVisualEnv pass image_format='png' or 'pil')"
    )


def image_data_url(image: Any) -> str:
    """The ``data:`` URL of one observation image, for an ``image_url`` content part.

    Encoded bytes are sent as they are, with the MIME type their signature names
    (PNG, JPEG, GIF or WebP); a ``PIL.Image.Image`` is encoded to PNG; a
    ``data:image/...;base64,`` URL passes through.

    Raises:
        InvalidArgument: any other type (a path, an array), or bytes of another format.
    """
    return _encode_image(image)[0]


def _content_and_images(
    observation: Any,
) -> tuple[str | list[dict[str, Any]], list[dict[str, Any]]]:
    """``(message content, one summary per image)`` of an observation."""
    if isinstance(observation, list):  # content parts, already built
        return observation, []
    if not isinstance(observation, Mapping):
        return observation_text(observation), []
    text = observation_text(observation)
    images = observation.get("images")
    if images is None or (isinstance(images, (list, tuple)) and not images):
        return text, []
    if not isinstance(images, (list, tuple)):
        images = [images]
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    summaries = []
    for image in images:
        url, summary = _encode_image(image)
        parts.append({"type": "image_url", "image_url": {"url": url}})
        summaries.append(summary)
    return parts, summaries


def chat_content(observation: Any) -> str | list[dict[str, Any]]:
    """The ``content`` of the ``user`` message for one observation.

    A text observation (a ``str``, or a dict whose ``images`` are absent or empty) is
    its text, as a plain string. A dict ``{"text": str, "images": [...]}`` with images
    becomes OpenAI-style content parts: ``{"type": "text", "text": ...}`` then one
    ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`` per
    image, in order (see `image_data_url` for the image types accepted). A list is
    taken as content parts already built and returned as it is.

    Raises:
        InvalidArgument: an image of a type `image_data_url` cannot send.
    """
    return _content_and_images(observation)[0]


def chat_messages(
    observations: Sequence[Any], responses: Sequence[str], *, system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """The chat of an episode: optional system message, then alternating user/assistant messages.

    Each observation is a ``user`` message (its content is `chat_content` of it: the
    text, or content parts when it carries images) and each response an ``assistant``
    message; ``responses`` has as many entries as ``observations``, or one fewer (the
    chat then ends with a user message, ready for the next response).
    """
    if not (len(responses) == len(observations) or len(responses) == len(observations) - 1):
        raise InvalidArgument(
            f"need as many responses as observations (or one fewer), got "
            f"{len(responses)} and {len(observations)}"
        )
    msgs: list[dict[str, Any]] = []
    if system_prompt is not None:
        msgs.append({"role": "system", "content": system_prompt})
    for i, obs in enumerate(observations):
        msgs.append({"role": "user", "content": obs if isinstance(obs, str) else chat_content(obs)})
        if i < len(responses):
            msgs.append({"role": "assistant", "content": responses[i]})
    return msgs


class ChatFormatter:
    """Turns observations and responses into token ids with the tokenizer's chat template.

    Each observation becomes a ``user`` message and each response an ``assistant``
    message (preceded by an optional ``system`` message). Rendering uses
    ``tokenizer.apply_chat_template(..., tokenize=False)``; text is tokenized with
    ``add_special_tokens=False`` (the template itself writes any BOS).

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template.
        system_prompt: text of a leading ``system`` message, or ``None``.
        max_context: the longest sequence (prompt plus ``max_new_tokens``) a turn may
            need; a turn that would exceed it ends the episode (``end_reason="context"``).
        chat_template: a template overriding the tokenizer's.
        stop_token_ids: ids that end a response; default the tokenizer's EOS id.
        template_kwargs: extra keyword arguments for every ``apply_chat_template`` call,
            i.e. variables of the template (e.g. ``{"enable_thinking": False}``, or a
            trainer's ``apply_chat_template_kwargs``); copied. They may not set what the
            formatter sets itself (`ChatFormatter.RESERVED_TEMPLATE_KWARGS`).
    """

    #: The ``apply_chat_template`` arguments the formatter sets (``template_kwargs`` may not).
    RESERVED_TEMPLATE_KWARGS = (
        "conversation",
        "tokenize",
        "add_generation_prompt",
        "chat_template",
    )

    def __init__(
        self,
        tokenizer: Any,
        *,
        system_prompt: str | None = None,
        max_context: int = 4096,
        chat_template: str | None = None,
        stop_token_ids: Sequence[int] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ):
        if isinstance(max_context, bool) or not isinstance(max_context, int) or max_context < 2:
            raise InvalidArgument(f"max_context must be an int >= 2, got {max_context!r}")
        if chat_template is None and not getattr(tokenizer, "chat_template", None):
            raise InvalidArgument(
                f"{type(tokenizer).__name__} has no chat template; pass chat_template=... "
                "(e.g. gem_core.rl.testing.CHATML_TEMPLATE)"
            )
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.max_context = max_context
        self.chat_template = chat_template
        if stop_token_ids is None:
            eos = getattr(tokenizer, "eos_token_id", None)
            stop_token_ids = [] if eos is None else [eos]
        self.stop_token_ids: tuple[int, ...] = tuple(int(t) for t in stop_token_ids)
        self.template_kwargs: dict[str, Any] = self._check_template_kwargs(template_kwargs)

    @classmethod
    def _check_template_kwargs(cls, kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
        if kwargs is None:
            return {}
        if not isinstance(kwargs, Mapping):
            raise InvalidArgument(
                f"template_kwargs must be a mapping of str keys, got {type(kwargs).__name__}; "
                "pass e.g. template_kwargs={'enable_thinking': False}"
            )
        for key in kwargs:
            if not isinstance(key, str):
                raise InvalidArgument(
                    f"template_kwargs must be a mapping of str keys, got a key {key!r}"
                )
            if key == "chat_template":
                raise InvalidArgument(
                    "template_kwargs may not set 'chat_template'; pass chat_template=... to "
                    "ChatFormatter instead"
                )
            if key in cls.RESERVED_TEMPLATE_KWARGS:
                raise InvalidArgument(
                    f"template_kwargs may not set {key!r}: ChatFormatter sets it itself "
                    f"(reserved: {', '.join(cls.RESERVED_TEMPLATE_KWARGS)}); drop it"
                )
        return dict(kwargs)

    def messages(
        self, observations: Sequence[str], responses: Sequence[str]
    ) -> list[dict[str, str]]:
        """The chat: optional system message, then alternating user/assistant messages."""
        return chat_messages(observations, responses, system_prompt=self.system_prompt)

    def render(self, messages: Sequence[Mapping[str, str]], *, add_generation_prompt: bool) -> str:
        """The chat template's text for ``messages`` (``template_kwargs`` passed along)."""
        kwargs: dict[str, Any] = dict(self.template_kwargs)
        if self.chat_template is not None:
            kwargs["chat_template"] = self.chat_template
        return self.tokenizer.apply_chat_template(
            list(messages), tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token text such as ``<|im_start|>`` included)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        """Text of ``ids``."""
        return self.tokenizer.decode(
            list(ids), skip_special_tokens=skip_special_tokens, clean_up_tokenization_spaces=False
        )


