"""What the document families' hooks read from the lake: a task's passages and what its
variants draw on (`Material`: its source's title, its evidence chunk's text and the chunks
nearest that chunk by embedding). The document families load these themselves
(`Family.load_for_verify`, `Family.load_for_variants`); no generic stage reads a chunk for
them, nor for any other family.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from data.lake import Chunk, Task
from families.base import Services
from generators.doc_qa_variants import Material, Neighbour

__all__ = ["Material", "Neighbour", "chunk_texts", "evidence_passages", "materials", "neighbours"]

_NEIGHBOURS_SQL = """
WITH cosines AS (
    SELECT e.chunk_id AS of, n.chunk_id,
           list_cosine_similarity(e.embedding, n.embedding) AS similarity
    FROM chunks e JOIN chunks n
      ON n.chunk_id <> e.chunk_id AND len(n.embedding) = len(e.embedding)
    WHERE list_contains(?, e.chunk_id)
), ranked AS (
    SELECT * FROM cosines WHERE NOT isnan(similarity)
    QUALIFY row_number() OVER (PARTITION BY of ORDER BY similarity DESC, chunk_id) <= ?
)
SELECT r.of, n.*, s.path AS source_path
FROM ranked r JOIN chunks n USING (chunk_id) LEFT JOIN sources s ON s.source_id = n.source_id
ORDER BY r.of, r.similarity DESC, r.chunk_id
"""


def chunk_texts(services: Services, chunk_ids: Iterable[str]) -> dict[str, str]:
    """The text of each of `chunk_ids` the lake holds, by chunk id."""
    rows = services.lake.rows(
        "SELECT chunk_id, text FROM chunks WHERE list_contains(?, chunk_id)",
        [sorted(set(chunk_ids))],
    )
    return {row["chunk_id"]: row["text"] for row in rows}


def evidence_passages(services: Services, tasks: Iterable[Task]) -> dict[str, str]:
    """Each task's passage: the text of its evidence chunks that the lake holds, joined (what
    the open-book judges read; empty where none is left)."""
    tasks = list(tasks)
    texts = chunk_texts(services, (e.chunk_id for t in tasks for e in t.evidence))
    return {
        task.task_id: "\n\n".join(texts[e.chunk_id] for e in task.evidence if e.chunk_id in texts)
        for task in tasks
    }


def neighbours(services: Services, chunk_ids: Iterable[str]) -> dict[str, list[Neighbour]]:
    """The chunks nearest each of `chunk_ids` by embedding, nearest first, at most
    `repair.neighbours` each."""
    found: dict[str, list[Neighbour]] = {}
    params = [sorted(set(chunk_ids)), services.config.repair.neighbours]
    for row in services.lake.rows(_NEIGHBOURS_SQL, params):
        found.setdefault(row["of"], []).append(
            Neighbour(Chunk.from_row(row), row["source_path"] or "")
        )
    return found


def materials(services: Services, tasks: Iterable[Task]) -> dict[str, Material]:
    """What each task's variants draw on: its source's title, its evidence chunk's text and
    the chunks nearest that chunk by embedding."""
    tasks = list(tasks)
    source_ids = sorted({s.source_id for t in tasks for s in t.source[:1]})
    titles = {
        r["source_id"]: r["title"] or Path(r["path"]).stem
        for r in services.lake.rows(
            "SELECT source_id, title, path FROM sources WHERE list_contains(?, source_id)",
            [source_ids],
        )
    }
    chunk_ids = sorted({e.chunk_id for t in tasks for e in t.evidence[:1]})
    passages = chunk_texts(services, chunk_ids)
    near = neighbours(services, chunk_ids)
    return {
        task.task_id: Material(
            title=next((titles.get(s.source_id, "") for s in task.source[:1]), ""),
            passage=next((passages.get(e.chunk_id, "") for e in task.evidence[:1]), ""),
            neighbours=[n for e in task.evidence[:1] for n in near.get(e.chunk_id, [])],
        )
        for task in tasks
    }
