"""The document-search tools over a corpus: BM25 `search` (via `bm25s`) and `read` by passage id.

One module for every place a solver searches: the doc-search harness that calibrates, the
trainer's environment and the exported verifiers package (copied there as it is), so a tool
result reads the same in all three. It imports only `bm25s`.
"""

from __future__ import annotations

import bm25s

HARNESS = "doc_search"  # the harness (and trainer environment) that searches the corpus
CORPUS_FILE = "corpus.parquet"  # the corpus beside an exported taskset's parts
RESULTS = 3
SNIPPET_CHARS = 240


class CorpusIndex:
    """BM25 over the corpus chunks, plus lookup by id."""

    def __init__(self, chunks: list[tuple[str, str]]) -> None:
        if not chunks:
            raise ValueError("the corpus has no chunks to search")
        self.ids = [chunk_id for chunk_id, _ in chunks]
        self.texts = dict(chunks)
        self.retriever = bm25s.BM25()
        tokens = bm25s.tokenize([text for _, text in chunks], stopwords="en", show_progress=False)
        self.searchable = bool(tokens.vocab)  # a corpus of stopwords alone has nothing to index
        if self.searchable:
            self.retriever.index(tokens, show_progress=False)

    def search(self, query: str, k: int = RESULTS) -> list[tuple[str, str]]:
        """(chunk id, snippet) of the best matches, best first; [] when nothing matches."""
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab or not self.searchable:
            return []
        found, scores = self.retriever.retrieve(
            tokens, k=min(k, len(self.ids)), show_progress=False
        )
        return [
            (self.ids[i], " ".join(self.texts[self.ids[i]].split())[:SNIPPET_CHARS])
            for i, score in zip(found[0], scores[0], strict=True)
            if score > 0
        ]

    def read(self, chunk_id: str) -> str | None:
        """A passage by id ("c1" or "[c1]", as the results show it)."""
        return self.texts.get(chunk_id.strip().strip("[]").strip())

    def search_result(self, query: str) -> str:
        """What the `search` tool tells the solver: the best passages' ids and snippets."""
        hits = self.search(query)
        if not hits:
            return f"No passage matches {query!r}. Try other keywords."
        return "Results:\n" + "\n".join(f"[{cid}] {snippet}" for cid, snippet in hits)

    def read_result(self, chunk_id: str) -> str:
        """What the `read` tool tells the solver: the passage, or that there is none."""
        text = self.read(chunk_id)
        if text is None:
            return f"There is no passage {chunk_id!r}. Use an id from the results."
        return f"Passage {chunk_id.strip()}:\n{text}"
