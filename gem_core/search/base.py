"""What every search backend returns (`Passage`), the backend protocol and its error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gem_core.errors import SearchBackendError

__all__ = ["Passage", "Retriever", "SearchBackendError", "split_contents"]


@dataclass(frozen=True, slots=True)
class Passage:
    """One retrieved passage.

    Attributes:
        id: the document id from the corpus.
        title: the passage title (may be empty).
        text: the passage body.
        score: the backend's relevance score, higher is better (``None`` if not given).
    """

    id: str
    title: str
    text: str
    score: float | None = None


@runtime_checkable
class Retriever(Protocol):
    """A search backend: `gem_core.search.SearchIndex` or `gem_core.search.HTTPRetriever`."""

    def search(self, query: str, topk: int) -> list[Passage]:
        """The ``topk`` best passages for ``query``, best first; raises `SearchBackendError`."""
        ...

    def close(self) -> None:
        """Release connections. Safe to call more than once."""
        ...


def split_contents(contents: str) -> tuple[str, str]:
    """Split a Search-R1 style ``"title\\ntext"`` string into ``(title, text)``.

    The title line loses one pair of surrounding double quotes (Search-R1's Wikipedia
    corpus writes ``"Aaron"\\nAaron is ...``).
    """
    title, _, text = contents.partition("\n")
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text.strip()
