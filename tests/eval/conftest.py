"""Fixtures for the eval tests: the tiny offline model behind a local OpenAI-compatible server."""

from __future__ import annotations

import pytest

# The server is gem_core.testing's; the eval tests import it (and message_text) from here.
from gem_core.testing.openai_server import FakeOpenAIServer as CompletionsServer
from gem_core.testing.openai_server import message_text  # noqa: F401 - for the tests


@pytest.fixture(scope="session")
def tiny():
    """``(policy, tokenizer_dir)``: the tiny model as a `TransformersPolicy`, and its directory."""
    torch = pytest.importorskip("torch", reason="the eval tests need gem-core[rl] (torch)")
    pytest.importorskip("transformers", reason="the eval tests need gem-core[rl] (transformers)")
    import gem_core.rl as rl
    from gem_core.rl.testing import build_tiny_model, load_tiny_model

    torch.set_num_threads(1)
    model, tokenizer = load_tiny_model()
    return rl.TransformersPolicy(model, tokenizer), str(build_tiny_model())


@pytest.fixture
def server(tiny):
    srv = CompletionsServer(tiny[0])
    yield srv
    srv.close()
