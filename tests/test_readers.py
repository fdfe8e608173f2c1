import os
from pathlib import Path

import pytest

from data.documents import (
    Document,
    ReadLimits,
    Rejected,
    chunk_text,
    discover,
    normalise,
    read_document,
    split_sentences,
)

MAX = 1_000_000
LIMITS = ReadLimits(MAX, 60, 2048)


def read(path: Path, limits: ReadLimits = LIMITS) -> Document | Rejected:
    return read_document(path, limits)


def test_markdown_is_normalised_and_titled(tmp_path):
    path = tmp_path / "a.md"
    path.write_text("# Orvanne  Bridge\r\n\r\n\r\n\r\nIt **opened** in   1887.\n")
    doc = read(path)
    assert isinstance(doc, Document)
    assert doc.title == "Orvanne Bridge"
    assert doc.text == "Orvanne Bridge\n\nIt opened in 1887."


def test_html_keeps_visible_text_only(tmp_path):
    path = tmp_path / "p.html"
    path.write_text(
        "<html><head><title>Museum</title><style>p{}</style></head><body>"
        "<h1>Museum of Tides</h1><script>var x = 1;</script><p>Opened in 1902.</p></body></html>"
    )
    doc = read(path)
    assert isinstance(doc, Document)
    assert doc.title == "Museum"
    assert "var x" not in doc.text and "p{}" not in doc.text
    assert doc.text == "Museum of Tides\n\nOpened in 1902."


def test_deeply_nested_html_does_not_recurse(tmp_path):
    path = tmp_path / "deep.html"
    path.write_text("<div>" * 50_000 + "Deep fact." + "</div>" * 50_000)
    doc = read(path)
    assert isinstance(doc, Document) and doc.text == "Deep fact."


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.md", b"", "empty"),
        ("blank.txt", b"  \n\t\n   ", "empty"),
        ("binary.txt", b"\x89PNG\x00\x00\x01", "binary"),
        ("latin1.md", "caf\xe9 cr\xe8me".encode("latin-1"), "undecodable"),
        ("image.png", b"not really", "unsupported_format"),
    ],
)
def test_bad_files_are_rejected_with_a_reason(tmp_path, name, content, reason):
    path = tmp_path / name
    path.write_bytes(content)
    result = read(path)
    assert isinstance(result, Rejected)
    assert result.reason == reason


def test_special_files_and_links(tmp_path):
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    broken = tmp_path / "broken.md"
    broken.symlink_to(tmp_path / "nowhere.md")
    loop = tmp_path / "loop.md"
    loop.symlink_to(loop)
    assert read(fifo).reason == "not_a_regular_file"
    assert read(broken).reason == "broken_symlink"
    assert read(loop).reason == "symlink_loop"


def test_too_large_is_rejected_without_reading(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("x" * 2000)
    assert read(path, ReadLimits(1000, 60, 2048)).reason == "too_large"


def test_discover_walks_folders_and_globs(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.md").write_text("a")
    (tmp_path / "sub" / "b.txt").write_text("b")
    assert list(discover([str(tmp_path)])) == [tmp_path / "a.md", tmp_path / "sub" / "b.txt"]
    assert list(discover([str(tmp_path / "**" / "*.txt")])) == [tmp_path / "sub" / "b.txt"]


def test_chunks_cover_paragraphs_with_offsets():
    text = normalise("\n\n".join(f"Paragraph {i}. " + "Word. " * 30 for i in range(6)))
    spans = chunk_text(text, max_chars=400, min_chars=80)
    assert len(spans) > 1
    for span in spans:
        assert text[span.start : span.end] == span.text
        assert len(span.text) <= 400
    assert chunk_text(text, 400, 80) == spans  # deterministic


def test_overlong_paragraph_splits_by_sentence():
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    spans = chunk_text(text, max_chars=200, min_chars=50)
    assert all(len(s.text) <= 200 for s in spans)
    assert all(s.text.endswith(".") for s in spans)


def test_split_sentences():
    assert split_sentences("It opened in 1887. It has 3 arches! Why? Yes.") == [
        "It opened in 1887.",
        "It has 3 arches!",
        "Why?",
        "Yes.",
    ]


def test_near_duplicates_compare_only_against_kept_vectors():
    import numpy as np

    from data.llm import DIMENSIONS, near_duplicates

    def unit(*xy):
        v = np.zeros(DIMENSIONS, dtype=np.float32)
        v[: len(xy)] = xy
        return v / np.linalg.norm(v)

    known = np.stack([unit(1.0, 0.0)])  # K
    a, b = unit(0.96, 0.28), unit(0.85, 0.53)  # A ~ K (0.96); B ~ A (0.96) but B ~ K 0.85
    matches = near_duplicates(np.stack([a, b]), known, threshold=0.95)
    assert matches[0] is not None and matches[0][0] == 0  # A duplicates K
    assert matches[1] is None  # B is only close to A, which was dropped: B is kept


def test_near_duplicates_in_blocks_give_the_row_by_row_answer():
    import numpy as np

    from data.llm import DIMENSIONS, near_duplicates

    rng = np.random.default_rng(7)

    def units(n):
        v = rng.normal(size=(n, DIMENSIONS)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    originals, known = units(300), units(40)
    copies = originals[rng.integers(0, 300, 150)] + 0.05 * units(150)
    copies /= np.linalg.norm(copies, axis=1, keepdims=True)
    of_known = known[:20] + 0.05 * units(20)
    of_known /= np.linalg.norm(of_known, axis=1, keepdims=True)
    vectors = np.concatenate([originals, copies, of_known])[rng.permutation(470)]
    row_by_row = near_duplicates(vectors, known, 0.9, block=1)
    assert sum(m is not None for m in row_by_row) >= 160  # the planted copies are found
    for block in (7, 64, 256):
        blocked = near_duplicates(vectors, known, 0.9, block=block)
        assert [m and m[0] for m in blocked] == [m and m[0] for m in row_by_row]
        assert all(
            abs(a[1] - b[1]) < 1e-5 for a, b in zip(blocked, row_by_row, strict=True) if a and b
        )
