"""Retrieval metrics for one query: recall@k, P@k, MRR, nDCG@k and hit@k.

These are the numbers pytest-crucible records for every golden-set item, so
every convention is written down here.  Each formula follows the measure of
the same name in NIST's trec_eval (https://github.com/usnistgov/trec_eval),
and ``pytest_crucible.qrels.trec_eval`` reuses these exact functions to reproduce
trec_eval's own reference outputs to the last printed digit.  The reference
files used by the test suite come from trec_eval; we acknowledge the National
Institute of Standards and Technology (NIST) as their source.  No trec_eval
code is used here: the formulas were re-derived from its documentation and
checked against its published outputs.

Inputs
------
``ranking``
    A sequence of ids in rank order; the first element has rank 1.
``qrels``
    A mapping ``id -> integer grade`` (the relevance judgments).  An id that
    is absent from ``qrels`` is *unjudged* and treated as non-relevant with
    grade 0.  Negative grades (trec_eval uses -1 for "in the pool but not
    judged") are never relevant and earn no gain.  The order in which
    ``qrels`` was built never matters.
``k``
    The cutoff, an integer >= 1.
``relevance_level``
    The minimum grade for a document to count as *relevant* (trec_eval's
    ``-l``, default 1).  A document is relevant when it is judged with a grade
    ``>= relevance_level`` (and ``>= 0``, as in trec_eval).

Conventions
-----------
* **Duplicates in a ranking**: only the first occurrence of an id counts.
  Later occurrences still occupy their rank position but are non-relevant
  and earn no gain, so retrieving one relevant document three times cannot
  inflate any metric (and nDCG can never exceed 1).  trec_eval itself rejects
  duplicate documents in a run; ``pytest_crucible.qrels.trec_eval`` does the same.
* **recall@k** = (relevant ids in the top k) / (relevant ids in ``qrels``),
  as trec_eval ``recall_k``.  It is 0.0 when ``qrels`` has no relevant id
  (trec_eval's value; :func:`retrieval_metrics` reports such a query as
  undefined instead).
* **P@k** = (relevant ids in the top k) / k, as trec_eval ``P_k``: the
  denominator is always k, even when fewer than k ids were retrieved.  A
  system that returns 2 ids, both relevant, scores P@10 = 0.2.
* **MRR** (reciprocal rank) = 1 / (rank of the first relevant id) over the
  *whole* ranking, not cut at k, as trec_eval ``recip_rank``; 0.0 when no
  relevant id was retrieved.
* **hit@k** = 1.0 if any relevant id is in the top k, else 0.0 (trec_eval
  calls this ``success_k``).
* **nDCG@k**, as trec_eval ``ndcg_cut_k``:

  - gain of a document = its grade when the grade is > 0, else 0;
  - discount: the document at rank r contributes ``gain / log2(r + 1)``
    (rank 1 is undiscounted, rank 2 is divided by log2(3), ...);
  - DCG@k sums the contributions of the top k ranks;
  - the ideal DCG@k is the DCG@k of *all* judged documents with a positive
    grade sorted by grade, highest first -- whether or not they were
    retrieved;
  - nDCG@k = DCG@k / ideal DCG@k, and 0.0 when the ideal DCG is 0.

  **nDCG ignores relevance_level**: trec_eval's ``-l`` changes which
  documents are "relevant" for P, recall and MRR, but nDCG still uses every
  positive grade as gain, both in the ranking and in the ideal ranking.  With
  ``-l 2`` a grade-1 document still earns 1 unit of gain.  This is what
  trec_eval prints (checked against its ``-l 2`` reference output), so the
  parameter is accepted only so that every metric has the same signature.

Golden-set provenance
---------------------
:func:`provenance_qrels` turns a golden item's citations into qrels: a
``required`` citation has grade 3, an ``acceptable`` one grade 1 (so with the
default relevance level both are relevant, and nDCG rewards putting required
evidence first).  A citation that names a chunk is judged at chunk
granularity (unit ``"chunk:<chunk_id>"``); otherwise the whole document is
(unit ``"doc:<doc_id>"``).

:func:`ranking_units` maps a retriever's output, a list of
``(chunk_id, doc_id)`` pairs, onto those units: a retrieved chunk counts for
its own chunk unit when that chunk is judged, else for its document's unit
when the document is judged, else it is an unjudged chunk.  A unit that was
already credited earlier in the ranking is replaced by a unique unjudged key,
so a relevant document retrieved as three chunks counts once (at the rank of
its first chunk) and the later chunks count as non-relevant.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = [
    "GRADE_ACCEPTABLE",
    "GRADE_REQUIRED",
    "NDCG_CUTOFF",
    "RETRIEVAL_METRICS",
    "citation_grade",
    "hit_at_k",
    "ndcg_at_k",
    "precision_at_k",
    "provenance_qrels",
    "ranking_units",
    "recall_at_k",
    "reciprocal_rank",
    "retrieval_metrics",
]

#: An id of a ranking and its qrels (a chunk id, a doc id, a judged unit): any hashable, the same in both.
Id = TypeVar("Id", bound=Hashable)

#: Keys of the dict returned by :func:`retrieval_metrics`, in report order.
RETRIEVAL_METRICS = ("recallAtK", "precisionAtK", "mrr", "ndcgAt10", "hitAtK")

#: nDCG in :func:`retrieval_metrics` is always cut at 10 (the conventional
#: nDCG@10), whatever k the other metrics use.
NDCG_CUTOFF = 10

#: Grades given to golden-set citations by :func:`citation_grade` (and so by
#: :func:`provenance_qrels` and the store's provenance ledger rows).
GRADE_REQUIRED = 3
GRADE_ACCEPTABLE = 1
_MODE_GRADES = {"required": GRADE_REQUIRED, "acceptable": GRADE_ACCEPTABLE}


def citation_grade(mode: Any) -> int:
    """The grade a golden citation of this ``mode`` gives its unit: the one place of that rule.

    ``"required"`` (also when ``mode`` is None, the default) is :data:`GRADE_REQUIRED`,
    ``"acceptable"`` :data:`GRADE_ACCEPTABLE`; an Enum member counts as its value.
    Any other mode is a ValueError.
    """
    mode = getattr(mode, "value", mode)  # tolerate Enum members
    if mode is None:
        mode = "required"
    if mode not in _MODE_GRADES:
        raise ValueError(f"mode must be 'required' or 'acceptable', got {mode!r}")
    return _MODE_GRADES[mode]


# --------------------------------------------------------------------------
# helpers


def _check_k(k: int) -> None:
    # bool is an int subclass; True as a cutoff is certainly a bug.
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"cutoff k must be an integer >= 1, got {k!r}")


def _is_relevant(grade: int | None, relevance_level: int) -> bool:
    # Unjudged (None) and negative grades are never relevant, as in trec_eval,
    # even if someone passes relevance_level <= 0.
    return grade is not None and grade >= 0 and grade >= relevance_level


def _grades(ranking: Iterable[Id], qrels: Mapping[Id, int]) -> list[int | None]:
    """Grade of each ranked id, in rank order; None = unjudged or a repeat.

    A repeated id is mapped to None so that only its first occurrence counts.
    """
    seen: set[Id] = set()
    grades: list[int | None] = []
    for doc in ranking:
        if doc in seen:
            grades.append(None)
        else:
            seen.add(doc)
            grades.append(qrels.get(doc))
    return grades


def _num_relevant(qrels: Mapping[Any, int], relevance_level: int) -> int:
    return sum(1 for grade in qrels.values() if _is_relevant(grade, relevance_level))


def _relevant_in_top(
    ranking: Sequence[Id], qrels: Mapping[Id, int], k: int, relevance_level: int
) -> int:
    return sum(
        1 for grade in _grades(ranking[:k], qrels) if _is_relevant(grade, relevance_level)
    )


def _dcg(gains: Iterable[float]) -> float:
    # Summed in rank order, one term per rank, so the floating-point result is
    # the same as trec_eval's (it adds the same terms in the same order).
    total = 0.0
    for rank, gain in enumerate(gains, start=1):
        if gain > 0:
            total += gain / math.log2(rank + 1)
    return total


# --------------------------------------------------------------------------
# per-query metrics


def recall_at_k(
    ranking: Sequence[Id], qrels: Mapping[Id, int], k: int, relevance_level: int = 1
) -> float:
    """Fraction of the relevant ids that appear in the top ``k`` (trec_eval ``recall_k``).

    Returns 0.0 when ``qrels`` holds no relevant id, as trec_eval does.
    """
    _check_k(k)
    num_rel = _num_relevant(qrels, relevance_level)
    if num_rel == 0:
        return 0.0
    return _relevant_in_top(ranking, qrels, k, relevance_level) / num_rel


def precision_at_k(
    ranking: Sequence[Id], qrels: Mapping[Id, int], k: int, relevance_level: int = 1
) -> float:
    """Relevant ids in the top ``k``, divided by ``k`` (trec_eval ``P_k``).

    The denominator is ``k`` even when fewer than ``k`` ids were retrieved.
    """
    _check_k(k)
    return _relevant_in_top(ranking, qrels, k, relevance_level) / k


def reciprocal_rank(
    ranking: Sequence[Id], qrels: Mapping[Id, int], relevance_level: int = 1
) -> float:
    """1 / rank of the first relevant id in the whole ranking (trec_eval ``recip_rank``).

    Not cut at any k; 0.0 when no relevant id was retrieved.
    """
    for rank, grade in enumerate(_grades(ranking, qrels), start=1):
        if _is_relevant(grade, relevance_level):
            return 1.0 / rank
    return 0.0


def ndcg_at_k(
    ranking: Sequence[Id], qrels: Mapping[Id, int], k: int, relevance_level: int = 1
) -> float:
    """Graded nDCG cut at ``k`` (trec_eval ``ndcg_cut_k``).

    Gain = grade (grades <= 0 and unjudged ids earn nothing), discount
    ``log2(rank + 1)``, ideal DCG from all judged ids with a positive grade.
    ``relevance_level`` has no effect: trec_eval's nDCG uses every positive
    grade as gain whatever ``-l`` says (see the module docstring).
    """
    _check_k(k)
    del relevance_level  # accepted for a uniform signature; see docstring
    gains = [g if g is not None and g > 0 else 0 for g in _grades(ranking[:k], qrels)]
    ideal = sorted((grade for grade in qrels.values() if grade > 0), reverse=True)[:k]
    ideal_dcg = _dcg(ideal)
    if ideal_dcg <= 0.0:
        return 0.0
    return _dcg(gains) / ideal_dcg


def hit_at_k(
    ranking: Sequence[Id], qrels: Mapping[Id, int], k: int, relevance_level: int = 1
) -> float:
    """1.0 if any relevant id is in the top ``k``, else 0.0 (trec_eval ``success_k``)."""
    _check_k(k)
    return 1.0 if _relevant_in_top(ranking, qrels, k, relevance_level) > 0 else 0.0


def retrieval_metrics(
    ranking: Sequence[Id], qrels: Mapping[Id, int], k: int, relevance_level: int = 1
) -> dict[str, float]:
    """All five metrics for one query, keyed by :data:`RETRIEVAL_METRICS`.

    ``ndcgAt10`` is always cut at 10; the other "@k" metrics use ``k``.
    Returns ``{}`` when ``qrels`` has no relevant id (no grade >=
    ``relevance_level``): recall is then 0/0, and a query that nothing could
    answer says nothing about the retriever, so it is reported as undefined
    rather than as a score of 0.  (trec_eval instead scores such a query 0 on
    P, recall and MRR and averages it in; ``pytest_crucible.qrels.trec_eval``
    reproduces that when imitating trec_eval.)
    """
    _check_k(k)
    # The five from one pass over the ranking's grades (this runs once per golden item): the same
    # counts, terms and order as the one-metric functions above, so the same floats
    # (tests/test_fast_paths.py pins it). _is_relevant is spelled out inline: it is called per rank.
    floor = max(relevance_level, 0)
    num_rel = sum(1 for grade in qrels.values() if grade is not None and grade >= floor)
    if num_rel == 0:
        return {}
    grades = _grades(ranking, qrels)
    relevant = [grade is not None and grade >= floor for grade in grades]
    in_top = sum(relevant[:k])
    first = relevant.index(True) + 1 if True in relevant else None
    ideal_dcg = _dcg(sorted((grade for grade in qrels.values() if grade > 0), reverse=True)[:NDCG_CUTOFF])
    gains = [g if g is not None and g > 0 else 0 for g in grades[:NDCG_CUTOFF]]
    return {
        "recallAtK": in_top / num_rel,
        "precisionAtK": in_top / k,
        "mrr": 1.0 / first if first is not None else 0.0,
        "ndcgAt10": _dcg(gains) / ideal_dcg if ideal_dcg > 0.0 else 0.0,
        "hitAtK": 1.0 if in_top > 0 else 0.0,
    }


# --------------------------------------------------------------------------
# golden-set provenance -> qrels / ranking units


def _field(citation: Any, snake: str, camel: str) -> Any:
    """Read a field from a dict (snake_case or camelCase key) or an object."""
    if type(citation) is dict or isinstance(citation, Mapping):  # a plain dict first: the ABC check is slow
        value = citation.get(snake)
        return citation.get(camel) if value is None else value
    value = getattr(citation, snake, None)
    return getattr(citation, camel, None) if value is None else value


def _present(value: Any) -> bool:
    # Ids are nearly always str: compared as they are, not converted (this runs for every retrieved chunk).
    return value is not None and (value != "" if type(value) is str else str(value) != "")


def provenance_qrels(citations: Iterable[Any]) -> dict[str, int]:
    """Qrels for one golden item, built from its citations.

    Each citation is an object (e.g. the pydantic ``Citation`` model, with
    snake_case attributes ``doc_id``, ``chunk_id``, ``mode``) or a dict with
    snake_case or camelCase keys (``doc_id``/``docId``,
    ``chunk_id``/``chunkId``, ``mode``).  ``mode`` is ``"required"`` (grade
    3, the default when absent) or ``"acceptable"`` (grade 1).  The unit key
    is ``"chunk:<chunk_id>"`` when a chunk id is given, else
    ``"doc:<doc_id>"``.  When two citations map to the same key the higher
    grade wins.
    """
    qrels: dict[str, int] = {}
    for position, citation in enumerate(citations, start=1):
        doc_id = _field(citation, "doc_id", "docId")
        chunk_id = _field(citation, "chunk_id", "chunkId")
        try:
            grade = citation_grade(_field(citation, "mode", "mode"))
        except ValueError as exc:
            raise ValueError(f"citation {position}: {exc}") from None
        if _present(chunk_id):
            key = f"chunk:{chunk_id}"
        elif _present(doc_id):
            key = f"doc:{doc_id}"
        else:
            raise ValueError(
                f"citation {position}: needs a doc_id (docId) or a chunk_id (chunkId)"
            )
        qrels[key] = max(qrels.get(key, grade), grade)
    return qrels


def ranking_units(
    retrieved: Iterable[tuple[Any, Any]], qrels: Mapping[str, int]
) -> list[str]:
    """The judged unit each retrieved ``(chunk_id, doc_id)`` pair counts for.

    Position by position: ``"chunk:<chunk_id>"`` if that key is in ``qrels``,
    elif ``"doc:<doc_id>"`` is in ``qrels``, else ``"chunk:<chunk_id>"``
    (an unjudged chunk).  A unit that already appeared earlier in the ranking
    becomes ``"dup:<rank>:<chunk_id>"`` (rank counted from 1), a key that is
    never in ``qrels`` and is unique, so each judged unit is credited once:
    at the rank of its first retrieved chunk.
    """
    units: list[str] = []
    credited: set[str] = set()
    for rank, (chunk_id, doc_id) in enumerate(retrieved, start=1):
        chunk_key = f"chunk:{chunk_id}" if _present(chunk_id) else None
        doc_key = f"doc:{doc_id}" if _present(doc_id) else None
        if chunk_key is not None and chunk_key in qrels:
            unit = chunk_key
        elif doc_key is not None and doc_key in qrels:
            unit = doc_key
        elif chunk_key is not None:
            unit = chunk_key
        elif doc_key is not None:
            unit = doc_key  # no chunk id at all: the document is the unit
        else:
            raise ValueError(f"retrieved item at rank {rank} has neither a chunk id nor a doc id")
        if unit in credited:
            unit = f"dup:{rank}:{chunk_id if _present(chunk_id) else doc_id}"
        credited.add(unit)
        units.append(unit)
    return units
