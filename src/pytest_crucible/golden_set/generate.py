"""`crucible golden generate`: draft golden items written from a corpus, then filtered.

The steps (pure: the caller owns the database, the judge and the files):

1. **Plan** (:func:`plan_generation`): N items split over the question types by a mix
   (:func:`parse_mix`, counts by largest remainder), source chunks chosen deterministically from
   the seed (chunks ordered by ``sha256(seed, chunk id)``; no unseeded randomness). multi_hop and
   comparison take a pair: the anchor and the chunk of *another* document sharing the most content
   words with it (same document only when the corpus has one). An unanswerable question gets the
   corpus's topics (its document titles) and one passage as its neighbourhood.
2. **Generate**: every ``generate`` request goes through :class:`~pytest_crucible.judge.engine.JudgeEngine`
   in one ``run`` call (one Message Batch in batch mode); cached verdicts cost nothing.
3. **Filter**, each drop counted:

   * *invalid*: the verdict does not make an item (blank question, no reference or assertions for an
     answerable type, answerable flag contrary to the type, no altered fact for a false premise), or
     the item fails :class:`~pytest_crucible.golden_set.schema.GoldenItem` validation;
   * *verbatim*: the question copies its source: it shares a run of :data:`VERBATIM_RUN` consecutive
     words with a source chunk, or a run covering :data:`VERBATIM_SHARE` of its own words;
   * *duplicate*: its content words (lower-cased, lightly stemmed, stop words out) have a Jaccard
     similarity of at least :data:`DUPLICATE_JACCARD` with a question kept before it or with a question
     of the golden files given as ``against``;
   * *answer not found again*: a second request (``answer_check``, all in one ``run`` call) answers
     the question from the cited chunks only, without seeing the reference. An answerable item is
     kept when the passages answer it and that answer agrees with the reference, decided locally
     (:func:`answers_agree`: the overlap coefficient of their content words is at least
     :data:`AGREE_OVERLAP`, and when both state numbers they share one). An unanswerable item is
     checked against its neighbourhood plus the corpus chunks that share most words with the
     question, and is kept only when the answer is "not found".

4. The kept items are golden file lines: status ``draft``, tag ``generated``, citations of the
   source chunks (none for unanswerable), ``metadata.generatedBy`` with the model, prompt version,
   source chunks and the generated question type.

This module never imports pytest and runs no SQL.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..judge.types import AnswerCheckRequest, AnswerCheckVerdict, GenerateQuestionRequest, GenerateQuestionVerdict, JudgeFailure
from .corpus import Chunk

if TYPE_CHECKING:
    from ..judge.engine import JudgeEngine

__all__ = [
    "DEFAULT_MIX",
    "GENERATION_TYPES",
    "DuplicateFilter",
    "GenerateError",
    "GenerateReport",
    "PlannedItem",
    "answers_agree",
    "chunking_note",
    "default_against",
    "estimate_requests",
    "finish_drafts",
    "generate_items",
    "is_verbatim",
    "items_jsonl",
    "parse_mix",
    "plan_counts",
    "plan_generation",
    "questions_of_golden_files",
]

GENERATION_TYPES: tuple[str, ...] = ("simple", "multi_hop", "comparison", "false_premise", "unanswerable")
PAIR_TYPES = ("multi_hop", "comparison")
DEFAULT_MIX: dict[str, float] = {"simple": 0.5, "multi_hop": 0.2, "comparison": 0.1, "false_premise": 0.1, "unanswerable": 0.1}
MIX_TOLERANCE = 0.01

VERBATIM_RUN = 8  # consecutive words shared with a source chunk
VERBATIM_SHARE = 0.8  # ... or this share of the question's words in one shared run (questions of 5+ words)
DUPLICATE_JACCARD = 0.8
AGREE_OVERLAP = 0.5
MIN_SOURCE_WORDS = 12  # chunks shorter than this are used only when no chunk is longer
MAX_TOPICS = 40
CHECK_NEIGHBOURS = 3  # corpus chunks an unanswerable question is checked against, besides its neighbourhood

_WORD_RE = re.compile(r"\w+", re.UNICODE)
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)?")
_STOP = frozenset(["a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours"])


class GenerateError(Exception):
    """Bad generation input (the mix, the plan). ``str()`` is the user-facing message, with a HINT line."""


# -- words ----------------------------------------------------------------------------------------
def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return [w.lower() for w in _WORD_RE.findall(text)]


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """Words that carry content: stop words out, light plural stemming."""
    return {_stem(w) for w in words(text) if w not in _STOP}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


# -- the mix and the plan ---------------------------------------------------------------------------
def parse_mix(text: str | None) -> dict[str, float]:
    """``simple=0.5,multi_hop=0.2,...`` -> weights (types left out weigh 0); the weights sum to 1 within
    :data:`MIX_TOLERANCE`. None: :data:`DEFAULT_MIX`."""
    if text is None:
        return dict(DEFAULT_MIX)
    hint = f"HINT: e.g. --mix {','.join(f'{k}={v:g}' for k, v in DEFAULT_MIX.items())} (types: {', '.join(GENERATION_TYPES)})"
    mix: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            raise GenerateError(f"--mix: {part!r} is not TYPE=WEIGHT\n{hint}")
        if name not in GENERATION_TYPES:
            raise GenerateError(f"--mix: unknown question type {name!r}\n{hint}")
        if name in mix:
            raise GenerateError(f"--mix: {name} is given twice\n{hint}")
        try:
            weight = float(value)
        except ValueError:
            raise GenerateError(f"--mix: the weight of {name} is not a number: {value.strip()!r}\n{hint}") from None
        if not math.isfinite(weight) or weight < 0:
            raise GenerateError(f"--mix: the weight of {name} must be a number from 0 to 1, got {value.strip()}\n{hint}")
        mix[name] = weight
    total = sum(mix.values())
    if abs(total - 1.0) > MIX_TOLERANCE:
        raise GenerateError(f"--mix: the weights sum to {total:g}, not 1\n{hint}")
    return {name: mix.get(name, 0.0) for name in GENERATION_TYPES}


def plan_counts(n: int, mix: Mapping[str, float]) -> dict[str, int]:
    """How many items of each type: ``n * weight`` rounded by largest remainder (ties: the mix's type order)."""
    total = sum(mix.values()) or 1.0
    exact = {name: n * mix.get(name, 0.0) / total for name in GENERATION_TYPES}
    counts = {name: math.floor(value) for name, value in exact.items()}
    left = n - sum(counts.values())
    by_remainder = sorted(GENERATION_TYPES, key=lambda name: (-(exact[name] - counts[name]), GENERATION_TYPES.index(name)))
    for name in by_remainder[:left]:
        counts[name] += 1
    return counts


@dataclass(frozen=True)
class PlannedItem:
    question_type: str
    sources: tuple[Chunk, ...]
    request: GenerateQuestionRequest


def _rank(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}\x00{key}".encode()).hexdigest()


def _topics(chunks: Sequence[Chunk]) -> tuple[str, ...]:
    """What the corpus covers: per document its first heading (else its id), sorted, at most MAX_TOPICS."""
    titles: dict[str, str] = {}
    for chunk in chunks:
        if chunk.doc_id not in titles:
            heading = chunk.metadata.get("heading") or chunk.metadata.get("title")
            titles[chunk.doc_id] = f"{heading} ({chunk.doc_id})" if isinstance(heading, str) and heading.strip() else chunk.doc_id
    return tuple(sorted(titles.values())[:MAX_TOPICS])


def plan_generation(chunks: Sequence[Chunk], n: int, mix: Mapping[str, float], *, seed: int) -> tuple[list[PlannedItem], list[str]]:
    """The requests for ``n`` items, and notes on what the corpus could not give (pair types on one chunk)."""
    if n < 1:
        raise GenerateError("--n must be at least 1\nHINT: e.g. --n 20")
    if not chunks:
        raise GenerateError("the corpus has no chunk\nHINT: point --corpus at a folder of .md/.txt files or a .jsonl of chunks")
    counts = plan_counts(n, mix)
    notes: list[str] = []
    if len(chunks) < 2 and any(counts[t] for t in PAIR_TYPES):
        moved = sum(counts[t] for t in PAIR_TYPES)
        notes.append(f"{moved} multi_hop/comparison item(s) planned as simple: the corpus has a single chunk")
        counts["simple"] += moved
        for t in PAIR_TYPES:
            counts[t] = 0
    eligible = [c for c in chunks if len(words(c.text)) >= MIN_SOURCE_WORDS] or list(chunks)
    order = sorted(eligible, key=lambda c: _rank(seed, c.chunk_id))
    vocab = {c.chunk_id: content_words(c.text) for c in chunks}
    topics = _topics(chunks)
    cursor = 0
    used: Counter[tuple[str, tuple[str, ...]]] = Counter()
    plan: list[PlannedItem] = []

    def next_anchor() -> Chunk:
        nonlocal cursor
        chunk = order[cursor % len(order)]
        cursor += 1
        return chunk

    for question_type in GENERATION_TYPES:
        for _ in range(counts[question_type]):
            anchor = next_anchor()
            if question_type in PAIR_TYPES:
                partner = _partner(anchor, chunks, vocab, used, question_type, seed)
                sources: tuple[Chunk, ...] = (anchor, partner)
            else:
                sources = (anchor,)
            ids = tuple(c.chunk_id for c in sources)
            variant = used[(question_type, tuple(sorted(ids)))]
            used[(question_type, tuple(sorted(ids)))] += 1
            request = GenerateQuestionRequest(
                question_type=question_type,  # type: ignore[arg-type]
                passages=tuple(c.text for c in sources),
                passage_ids=ids,
                topics=topics if question_type == "unanswerable" else (),
                variant=variant,
            )
            plan.append(PlannedItem(question_type, sources, request))
    return plan, notes


def _partner(anchor: Chunk, chunks: Sequence[Chunk], vocab: Mapping[str, set[str]], used: Counter, question_type: str,
             seed: int) -> Chunk:
    """The second chunk of a pair: least used with the anchor, of another document, sharing the most words."""
    def score(other: Chunk) -> tuple:
        pair = tuple(sorted((anchor.chunk_id, other.chunk_id)))
        return (used[(question_type, pair)], other.doc_id == anchor.doc_id,
                -_jaccard(vocab[anchor.chunk_id], vocab[other.chunk_id]), _rank(seed, anchor.chunk_id + "\x00" + other.chunk_id))

    return min((c for c in chunks if c.chunk_id != anchor.chunk_id), key=score)


# -- the estimate -----------------------------------------------------------------------------------
#: A typical generated question, standing in for the unknown questions in the cost estimate of the answer checks.
_PLACEHOLDER_QUESTION = "How long does the warranty on the replacement battery last when it was bought through a dealer?"


def estimate_requests(plan: Sequence[PlannedItem], chunks: Sequence[Chunk]) -> list[AnswerCheckRequest]:
    """Stand-ins for the answer checks ``plan`` will send (questions unknown yet), for a cost estimate."""
    longest = sorted(chunks, key=lambda c: -len(c.text))[:CHECK_NEIGHBOURS]
    checks = []
    for planned in plan:
        passages = tuple(c.text for c in planned.sources)
        if planned.question_type == "unanswerable":
            passages += tuple(c.text for c in longest)
        checks.append(AnswerCheckRequest(question=_PLACEHOLDER_QUESTION, passages=passages))
    return checks


# -- filters ----------------------------------------------------------------------------------------
def _longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    best = 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            if x == y:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best = current[j]
        previous = current
    return best


def is_verbatim(question: str, sources: Iterable[str]) -> bool:
    """True when the question copies a source: a shared run of VERBATIM_RUN words, or of VERBATIM_SHARE of its words."""
    q = words(question)
    if not q:
        return False
    for text in sources:
        run = _longest_common_run(q, words(text))
        if run >= VERBATIM_RUN or (len(q) >= 5 and run >= VERBATIM_SHARE * len(q)):
            return True
    return False


class DuplicateFilter:
    """Near-duplicate questions: content-word Jaccard >= DUPLICATE_JACCARD with one seen before."""

    def __init__(self, existing: Iterable[str] = ()) -> None:
        self._seen: list[tuple[set[str], str]] = []
        for question in existing:
            self.add(question)

    @staticmethod
    def _key(question: str) -> tuple[set[str], str]:
        return content_words(question), " ".join(words(question))

    def is_duplicate(self, question: str) -> bool:
        vocab, flat = self._key(question)
        return any(flat == seen_flat or (vocab and seen_vocab and _jaccard(vocab, seen_vocab) >= DUPLICATE_JACCARD)
                   for seen_vocab, seen_flat in self._seen)

    def add(self, question: str) -> None:
        self._seen.append(self._key(question))


def answers_agree(answer: str, reference: str) -> bool:
    """Whether an answer found in the passages agrees with the reference (see the module docstring)."""
    a, r = content_words(answer), content_words(reference)
    if not a or not r:
        return False
    numbers_a, numbers_r = set(_NUMBER_RE.findall(answer)), set(_NUMBER_RE.findall(reference))
    if numbers_a and numbers_r and not numbers_a & numbers_r:
        return False
    return len(a & r) / min(len(a), len(r)) >= AGREE_OVERLAP


def _not_found(answer: str) -> bool:
    return not answer.strip() or answer.strip().strip(".").lower() in ("not found", "none", "n/a")


# -- generation -------------------------------------------------------------------------------------
DROP_REASONS = ("verbatim", "duplicate", "answer_check", "invalid", "failed")


@dataclass
class GenerateReport:
    planned: int
    items: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)  # judge failures, one message each
    notes: list[str] = field(default_factory=list)
    drops: list[tuple[str, str]] = field(default_factory=list)  # (reason, question or plan label), for --verbose output

    def summary(self) -> str:
        d = self.dropped
        line = (f"generated {self.planned} items: kept {len(self.items)}; dropped: verbatim {d['verbatim']}, "
                f"duplicate {d['duplicate']}, answer not found again {d['answer_check']}, invalid {d['invalid']}")
        return line + (f", judge failed {d['failed']}" if d["failed"] else "")

    def drop(self, reason: str, what: str) -> None:
        self.dropped[reason] += 1
        self.drops.append((reason, what))


def _item_from_verdict(planned: PlannedItem, verdict: GenerateQuestionVerdict) -> dict[str, Any] | str:
    """The golden item dict of one verdict, or why it cannot be one."""
    question, reference = verdict.question.strip(), verdict.reference.strip()
    assertions = [text.strip() for text in verdict.assertions if text.strip()]
    unanswerable = planned.question_type == "unanswerable"
    if not question:
        return "blank question"
    if unanswerable == verdict.answerable:
        return f"answerable={json.dumps(verdict.answerable)} for a {planned.question_type} question"
    if not unanswerable and (not reference or not assertions):
        return "no reference or no assertion"
    if planned.question_type == "false_premise" and not verdict.altered_fact.strip():
        return "a false-premise question without its altered fact"
    source_ids = [c.chunk_id for c in planned.sources]
    generated_by: dict[str, Any] = {"model": verdict.judge_model, "promptVersion": verdict.prompt_version,
                                    "sourceChunks": source_ids, "questionType": planned.question_type}
    if planned.question_type == "false_premise":
        generated_by["alteredFact"] = verdict.altered_fact.strip()
    digest = hashlib.sha256(("\x00".join([question, planned.question_type, *source_ids])).encode("utf-8")).hexdigest()
    item: dict[str, Any] = {
        "id": f"gen-{digest[:10]}",
        "question": question,
        "status": "draft",
        "assertions": [{"text": text, "kind": "must"} for text in assertions] if not unanswerable else [],
        "citations": [] if unanswerable else [{"docId": c.doc_id, "chunkId": c.chunk_id} for c in planned.sources],
        "reference": reference or None,
        "answerable": not unanswerable,
        "questionType": "simple" if unanswerable else planned.question_type,
        "tags": ["generated", "unanswerable"] if unanswerable else ["generated"],
        "metadata": {"generatedBy": generated_by},
    }
    if not unanswerable:
        item["cluster"] = planned.sources[0].doc_id  # items written from one document move together
    if item["reference"] is None:
        del item["reference"]
    return item


def _validate(item: dict[str, Any]) -> str | None:
    from pydantic import ValidationError

    from .schema import GoldenItem

    try:
        GoldenItem.model_validate(item)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
    return None


def _check_passages(planned: PlannedItem, question: str, chunks: Sequence[Chunk]) -> tuple[str, ...]:
    """What an answer check reads: the cited chunks; for an unanswerable question its neighbourhood and
    the chunks sharing the most content words with the question."""
    texts = [c.text for c in planned.sources]
    if planned.question_type == "unanswerable":
        wanted = content_words(question)
        ranked = sorted(range(len(chunks)), key=lambda i: (-len(wanted & content_words(chunks[i].text)), i))
        seen = {c.chunk_id for c in planned.sources}
        for index in ranked:
            if len(texts) >= len(planned.sources) + CHECK_NEIGHBOURS:
                break
            if chunks[index].chunk_id not in seen:
                seen.add(chunks[index].chunk_id)
                texts.append(chunks[index].text)
    return tuple(texts)


def generate_items(chunks: Sequence[Chunk], plan: Sequence[PlannedItem], engine: JudgeEngine, *,
                   existing_questions: Iterable[str] = (), notes: Sequence[str] = ()) -> GenerateReport:
    """Generate, filter and build the items of ``plan`` (two engine runs: the questions, then the answer checks)."""
    report = GenerateReport(planned=len(plan), notes=list(notes))
    verdicts = engine.run([planned.request for planned in plan])
    duplicates = DuplicateFilter(existing_questions)
    candidates: list[tuple[PlannedItem, dict[str, Any]]] = []
    for planned, verdict in zip(plan, verdicts):
        label = f"{planned.question_type} from {', '.join(c.chunk_id for c in planned.sources)}"
        if isinstance(verdict, JudgeFailure):
            report.failures.append(verdict.message)
            report.drop("failed", label)
            continue
        item = _item_from_verdict(planned, verdict)  # type: ignore[arg-type]
        problem = item if isinstance(item, str) else _validate(item)
        if problem is not None:
            report.drop("invalid", f"{label}: {problem}")
            continue
        assert isinstance(item, dict)
        if is_verbatim(item["question"], (c.text for c in planned.sources)):
            report.drop("verbatim", item["question"])
            continue
        if duplicates.is_duplicate(item["question"]):
            report.drop("duplicate", item["question"])
            continue
        duplicates.add(item["question"])
        candidates.append((planned, item))
    checks = [AnswerCheckRequest(question=item["question"], passages=_check_passages(planned, item["question"], chunks))
              for planned, item in candidates]
    answers = engine.run(checks) if checks else []
    for (planned, item), answer in zip(candidates, answers):
        if isinstance(answer, JudgeFailure):
            report.failures.append(answer.message)
            report.drop("failed", item["question"])
            continue
        assert isinstance(answer, AnswerCheckVerdict)  # the engine's verdict for an answer-check request
        found = answer.found and not _not_found(answer.answer)
        if planned.question_type == "unanswerable":
            keep = not found
        else:
            keep = found and answers_agree(answer.answer, item.get("reference", ""))
        if not keep:
            report.drop("answer_check", item["question"])
            continue
        report.items.append(item)
    return report


def finish_drafts(drafts: Sequence[Mapping[str, Any]], existing_questions: Iterable[str] = ()) -> GenerateReport:
    """Drafts made elsewhere (the offline lexical generator): validated and de-duplicated like generated ones."""
    report = GenerateReport(planned=len(drafts))
    duplicates = DuplicateFilter(existing_questions)
    for draft in drafts:
        item = dict(draft)
        problem = _validate(item)
        if problem is not None:
            report.drop("invalid", f"{item.get('id', '?')}: {problem}")
            continue
        if duplicates.is_duplicate(str(item["question"])):
            report.drop("duplicate", str(item["question"]))
            continue
        duplicates.add(str(item["question"]))
        report.items.append(item)
    return report


# -- golden files -----------------------------------------------------------------------------------
_SKIP_DIRS = {"node_modules", "__pycache__", "site-packages", "venv"}


def default_against(root: Path, *, skip: str | Path | None = None) -> list[Path]:
    """Every ``golden_*.jsonl`` and ``*.golden.jsonl`` below ``root`` (hidden and virtualenv folders
    skipped), except ``skip`` (the output file), sorted."""
    skip_path = Path(skip).resolve() if skip not in (None, "-") else None
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in files:
            if name.endswith(".jsonl") and (name.startswith("golden_") or name.endswith(".golden.jsonl")):
                path = Path(folder, name)
                if skip_path is None or path.resolve() != skip_path:
                    found.append(path)
    return sorted(found)


def questions_of_golden_files(paths: Iterable[str | Path]) -> list[str]:
    """The questions of every item of these golden files (raises GoldenFileError on a bad file)."""
    from .schema import load_golden_file

    return [item.question for path in paths for item in load_golden_file(path)]


def items_jsonl(items: Iterable[Mapping[str, Any]]) -> str:
    """Golden file text: one item per line, keys in the order given."""
    return "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)


# -- whose chunks the citations name ----------------------------------------------------------------
def chunking_note(corpus: str | Path, chunks: Sequence[Chunk]) -> str | None:
    """The line `golden generate` prints when it split the corpus into passages itself (a folder, or one
    Markdown or text file): the citations then name crucible's chunks (``<doc>#p1``, ...), which a pipeline
    with its own chunking may number alike for other text. None for a ``.jsonl`` corpus, the pipeline's own chunks."""
    path = Path(corpus)
    if not chunks or (path.suffix.lower() == ".jsonl" and not path.is_dir()):
        return None
    return (f"note: the citations follow crucible's chunking of {corpus} (ids like {chunks[0].chunk_id}: split at "
            "headings and blank lines, short paragraphs merged), not your pipeline's, so an id your retriever also "
            "uses may name other text; to cite your pipeline's own chunks, give --corpus a .jsonl of them "
            "(chunk_id, doc_id, text on each line)")
