"""Intent clustering: production requests grouped by meaning, each group named.

Requests are embedded at ingestion; here they are clustered by average-link agglomerative
clustering on cosine distance (scikit-learn), which needs no number of clusters up front: two
groups merge while their mean distance is under `cluster_distance`. Each cluster is named by the
generator model from its most central requests; a name that fails the checks is replaced by the
cluster's most distinctive words, and the fallback is recorded. The distribution (size and share
per intent) is what a taskset is sampled against, to match production or to over-sample rare
intents.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from data.lake import seed_for
from data.llm import LLMClient, LLMError
from data.prompts import load_prompt

LABEL_PROMPT = load_prompt(__file__, "intent_label")
EXAMPLES = 5  # central requests shown to the labeller and kept with the cluster
EXAMPLE_CHARS = 240
MAX_LABEL_WORDS = 8
_WORD = re.compile(r"[a-z][a-z']{2,}")
_PLACEHOLDER = re.compile(r"\[[A-Z][A-Z0-9_]*\]")


class IntentLabel(BaseModel):
    model_config = ConfigDict(extra="ignore")
    label: str = Field(min_length=1, max_length=80)


@dataclass(frozen=True)
class Cluster:
    """The members of one cluster (indexes into the clustered requests), most central first."""

    members: list[int]


def cluster_requests(vectors: np.ndarray, distance: float) -> list[Cluster]:
    """Clusters of unit-length request embeddings, largest first (ties: first member)."""
    if len(vectors) == 0:
        return []
    if len(vectors) == 1:
        return [Cluster([0])]
    from sklearn.cluster import AgglomerativeClustering  # 1.2 s to import: only when clustering

    labels = AgglomerativeClustering(
        n_clusters=None, distance_threshold=distance, metric="cosine", linkage="average"
    ).fit_predict(vectors)
    clusters = []
    for label in sorted(set(labels.tolist())):
        members = np.flatnonzero(labels == label)
        centre = vectors[members].mean(axis=0)
        order = np.argsort(-(vectors[members] @ centre), kind="stable")
        clusters.append(Cluster([int(members[i]) for i in order]))
    return sorted(clusters, key=lambda c: (-len(c.members), min(c.members)))


def keyword_label(requests: list[str], others: list[str], words: int = 3) -> str:
    """The words most frequent in `requests` relative to `others` (a fallback name)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    inside = Counter(w for r in requests for w in _words(r) - ENGLISH_STOP_WORDS)
    outside = Counter(w for r in others for w in _words(r))
    scored = sorted(
        inside, key=lambda w: (-inside[w] / len(requests) + outside[w] / max(1, len(others)), w)
    )
    return " ".join(scored[:words]) or "misc"


def _words(text: str) -> set[str]:
    return set(_WORD.findall(_PLACEHOLDER.sub(" ", text).lower()))


def check_label(label: str) -> str | None:
    """Why a label is unusable, or None."""
    words = label.split()
    if not words:
        return "empty"
    if len(words) > MAX_LABEL_WORDS:
        return f"{len(words)} words"
    if "{" in label or "\n" in label or label[0] in "([" or "json" in label.lower():
        return "not a plain name"
    return None


async def label_cluster(
    requests: list[str], others: list[str], llm: LLMClient, clustering: str
) -> tuple[str, str]:
    """The cluster's name and how it was made (`model`, or `keywords: <why>`)."""
    shown = "\n".join(f"- {' '.join(r.split())[:EXAMPLE_CHARS]}" for r in requests[:EXAMPLES])
    _, seed = seed_for("intent", clustering, *requests[:EXAMPLES])
    try:
        reply = await llm.structured(
            "generator",
            [{"role": "user", "content": LABEL_PROMPT.render(requests=shown)}],
            IntentLabel,
            temperature=0.0,
            max_tokens=40,
            seed=seed,
        )
    except LLMError as error:
        if error.reason != "invalid_structured_output":
            raise
        return keyword_label(requests, others), f"keywords: {error.reason}"
    label = " ".join(reply.label.strip().strip(".\"'").split())
    problem = check_label(label)
    if problem is not None:
        return keyword_label(requests, others), f"keywords: label {problem}"
    return label.lower(), "model"
