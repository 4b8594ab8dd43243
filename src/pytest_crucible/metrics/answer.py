"""Answer-quality metrics for one golden item, computed from judge verdicts.

These are pure functions: the judge (a model behind an API, or the offline
:class:`~pytest_crucible.judge.lexical.LexicalJudge`) produces per-claim and
per-chunk verdicts, and the functions below turn them into one number.  Each
follows the metric of the same name in the ragas project, whose documentation
defines it; the formulas were re-derived from that documentation and no ragas
code is used:

* faithfulness --
  https://docs.ragas.io/en/stable/concepts/metrics/available_metrics/faithfulness/
* response relevancy --
  https://docs.ragas.io/en/stable/concepts/metrics/available_metrics/answer_relevance/
* context precision --
  https://docs.ragas.io/en/stable/concepts/metrics/available_metrics/context_precision/
* context recall --
  https://docs.ragas.io/en/stable/concepts/metrics/available_metrics/context_recall/
* noise sensitivity --
  https://docs.ragas.io/en/stable/concepts/metrics/available_metrics/noise_sensitivity/
  (ragas took this metric from AWS's RAGChecker, Ru et al. 2024).

Formulas
--------
**Faithfulness** = (answer claims that can be inferred from the retrieved
context) / (answer claims).  Higher is better.

**Response relevancy** = (1/N) * sum_i cos(E(g_i), E(q)) * [not all g_i are
noncommittal], where q is the golden question, g_1..g_N (ragas: N = 3) are
questions generated from the answer alone, E is an embedding and the judge
flags each generation as noncommittal ("I don't know", evasive or vague).
Higher is better.

**Context precision** (ragas "with reference") is the average precision of the
per-chunk usefulness verdicts v_1..v_K in rank order::

    sum_k (precision@k * v_k) / (number of useful chunks among the K)

where precision@k = (useful chunks in the top k) / k and K is the number of
chunks retrieved.  The denominator is the number of *useful retrieved* chunks,
not K and not the number of useful chunks in the corpus: a list whose useful
chunks all come first scores 1.0 however many useless ones follow, e.g.
[1, 0, 1] -> (1/1 + 2/3) / 2 = 0.8333.  Higher is better.

**Context recall** = (reference sentences/claims attributable to the retrieved
context) / (reference sentences/claims).  Higher is better.

**Noise sensitivity** (lower is better).  Each answer claim j is *incorrect*
when the reference does not support it.  A retrieved chunk is *relevant* when
it supports at least one reference claim.  Then:

* relevant mode = share of answer claims that are incorrect AND entailed by at
  least one relevant chunk (the generator was misled by noise inside useful
  evidence);
* irrelevant mode = share of answer claims that are incorrect AND entailed by
  at least one irrelevant chunk AND by no relevant chunk (the generator picked
  its error up from retrieval noise).

The ragas page prints only "incorrect claims / claims"; the attribution
conditions above are the ones its prose states (each claim is checked for
correctness against the reference and for attribution to the relevant, or
irrelevant, retrieved context), made explicit.  The irrelevant mode also
requires that no relevant chunk entails the claim, so the two modes never count
the same claim (an error that relevant evidence also "supports" is blamed on
the relevant chunks) and relevant + irrelevant <= share of incorrect claims.

Our deviations (all deliberate, all documented)
-----------------------------------------------
* **Never NaN.**  Where ragas yields NaN (nothing to divide by), we return
  ``None`` -- "undefined", which the caller records as a missing value, never
  as 0 and never imputed: faithfulness and noise sensitivity with no answer
  claims, context precision with no retrieved chunk, context recall with no
  reference claim.
* **Abstentions are not scored here.**  An answer the pipeline marked as
  abstained (or that the judge finds noncommittal) is *not* scored by
  faithfulness, response relevancy or noise sensitivity -- the abstention layer
  counts it (abstain rate, truthfulness).  So "I don't know" never earns a
  perfect faithfulness of 1.0 for claiming nothing, and never an undefined
  value that silently shrinks the sample either.  (The functions themselves do
  not know about abstention: the caller does not call them for such answers.)
* **Context precision with no useful chunk is exactly 0.0.**  ragas adds a tiny
  epsilon to the denominator so 0/0 comes out as 0; we return 0.0 directly.
  With no chunk at all it is ``None``.
* **Response relevancy** clips each cosine into [0, 1] (a negative cosine --
  possible with signed embeddings -- counts as 0, "unrelated"), so the score
  stays in [0, 1], where ragas documents that it may go below 0.  A cosine with
  a zero vector is 0.  With no generated question the score is 0.0 (ragas:
  NaN).  The noncommittal rule zeroes the score only when *all* generations are
  noncommittal (ragas's code has switched between "any" and "all" over time;
  see explodinggradients/ragas issue #767 and PRs #2327 and #2343); with some
  noncommittal generations the score is the plain mean cosine over all of
  them.
* Context recall and faithfulness take claims as the unit; ragas's context
  recall speaks of reference "claims" or sentences interchangeably, and the
  lexical judge uses sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

__all__ = ["context_precision", "context_recall", "faithfulness", "noise_sensitivity", "response_relevancy"]


def _bools(values: Sequence[bool], name: str) -> np.ndarray:
    array = np.asarray(list(values), dtype=bool)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of booleans")
    return array


def faithfulness(supported: Sequence[bool]) -> float | None:
    """Supported answer claims / answer claims (ragas faithfulness).

    ``supported[j]`` is the entailment verdict of answer claim ``j`` against the
    retrieved context.  ``None`` when the answer has no claim (undefined; ragas
    gives NaN).  Not called for abstained answers (see the module docstring).
    """
    flags = _bools(supported, "supported")
    if flags.size == 0:
        return None
    return float(flags.sum()) / float(flags.size)


def response_relevancy(
    question_vector: Sequence[float] | np.ndarray,
    generated_vectors: Sequence[Sequence[float]] | np.ndarray,
    noncommittal: Sequence[bool],
) -> float:
    """Mean cosine between the question and the questions generated from the answer.

    ``generated_vectors`` has one row per generated question and
    ``noncommittal`` one flag per generation.  Each cosine is clipped into
    [0, 1] (a zero vector has cosine 0).  The score is 0.0 when *every*
    generation is noncommittal (ragas's rule: mean cosine x not-all-noncommittal)
    and 0.0 when nothing was generated; otherwise the mean over all
    generations, noncommittal or not.
    """
    query = np.asarray(question_vector, dtype=np.float64).ravel()
    rows = np.asarray(generated_vectors, dtype=np.float64)
    flags = _bools(noncommittal, "noncommittal")
    if rows.size == 0:
        if flags.size != 0:
            raise ValueError(f"{flags.size} noncommittal flags for 0 generated questions")
        return 0.0
    if rows.ndim == 1:
        rows = rows.reshape(1, -1)
    if rows.ndim != 2 or rows.shape[1] != query.shape[0]:
        raise ValueError(f"generated vectors of shape {rows.shape} do not match a question vector of size {query.shape[0]}")
    if flags.size != rows.shape[0]:
        raise ValueError(f"{flags.size} noncommittal flags for {rows.shape[0]} generated questions")
    if bool(flags.all()):
        return 0.0
    query_norm = float(np.linalg.norm(query))
    if query_norm == 0.0:
        return 0.0
    row_norms = np.linalg.norm(rows, axis=1)
    safe = np.where(row_norms > 0.0, row_norms, 1.0)
    cosines = np.where(row_norms > 0.0, rows @ query / (safe * query_norm), 0.0)
    return float(np.clip(cosines, 0.0, 1.0).mean())


def context_precision(useful: Sequence[bool]) -> float | None:
    """ragas context precision: average precision of the usefulness verdicts in rank order.

    ``useful[k]`` says whether the chunk at rank ``k + 1`` was useful for
    arriving at the reference.  Score = sum_k (precision@k x v_k) / (number of
    useful chunks in the list) -- the denominator counts useful *retrieved*
    chunks, not K.  0.0 when no chunk is useful (ragas reaches ~0 through an
    epsilon in the denominator; we return 0.0 exactly); ``None`` when nothing
    was retrieved.
    """
    flags = _bools(useful, "useful")
    if flags.size == 0:
        return None
    hits = int(flags.sum())
    if hits == 0:
        return 0.0
    ranks = np.arange(1, flags.size + 1, dtype=np.float64)
    precision_at_k = np.cumsum(flags, dtype=np.float64) / ranks
    return float((precision_at_k * flags).sum() / hits)


def context_recall(attributed: Sequence[bool]) -> float | None:
    """Reference sentences attributable to the retrieved context / reference sentences.

    ``attributed[i]`` is the entailment verdict of reference sentence (claim)
    ``i`` against the retrieved context.  ``None`` when the reference has no
    sentence (or there is no reference).
    """
    flags = _bools(attributed, "attributed")
    if flags.size == 0:
        return None
    return float(flags.sum()) / float(flags.size)


def noise_sensitivity(
    answer_claim_correct: Sequence[bool],
    claim_supported_by_chunk: Sequence[Sequence[bool]],
    chunk_relevant: Sequence[bool],
    mode: Literal["relevant", "irrelevant"] = "relevant",
) -> float | None:
    """ragas noise sensitivity (lower is better).

    ``answer_claim_correct[j]``: answer claim ``j`` is supported by the reference.
    ``claim_supported_by_chunk[c][j]``: answer claim ``j`` is entailed by retrieved
    chunk ``c``.  ``chunk_relevant[c]``: chunk ``c`` supports at least one
    reference claim (the caller decides that from its own verdicts).

    * ``mode="relevant"``: share of answer claims that are incorrect and
      entailed by at least one relevant chunk;
    * ``mode="irrelevant"``: share of answer claims that are incorrect, entailed
      by at least one irrelevant chunk and by no relevant chunk.

    ``None`` when the answer has no claim.  With no chunk at all no claim is
    entailed by anything and the score is 0.0.
    """
    if mode not in ("relevant", "irrelevant"):
        raise ValueError(f"mode must be 'relevant' or 'irrelevant', not {mode!r}")
    correct = _bools(answer_claim_correct, "answer_claim_correct")
    relevant = _bools(chunk_relevant, "chunk_relevant")
    rows = [list(row) for row in claim_supported_by_chunk]
    if len(rows) != relevant.size:
        raise ValueError(f"{len(rows)} rows of claim support for {relevant.size} chunk relevance flags")
    for index, row in enumerate(rows):
        if len(row) != correct.size:
            raise ValueError(f"chunk {index} has {len(row)} claim verdicts for {correct.size} answer claims")
    if correct.size == 0:
        return None
    support = np.asarray(rows, dtype=bool).reshape(len(rows), correct.size)
    by_relevant = support[relevant].any(axis=0)
    by_irrelevant = support[~relevant].any(axis=0)
    incorrect = ~correct
    if mode == "relevant":
        flagged = incorrect & by_relevant
    else:
        flagged = incorrect & by_irrelevant & ~by_relevant
    return float(flagged.sum()) / float(correct.size)
