"""Versioned judge prompts: one file per request kind, ``<version>/<kind>.md``.

File format (kept deliberately simple, so a prompt is reviewed as text):

* UTF-8 text. Everything before the first line that holds only ``---`` is the
  **system** prompt; everything after it is the **user template**. Surrounding
  blank lines are stripped from both parts.
* The first line of the system prompt is the marker ``Judge task: <version>/<kind>``.
  :func:`load_prompt` checks it against the file's place, so a copied file cannot
  silently carry the wrong kind; test doubles read it to tell the kinds apart.
* The user template is filled with :meth:`str.format`: ``{name}`` placeholders are
  replaced by the fields of :func:`prompt_fields`; a literal brace in the template
  is written doubled (``{{`` / ``}}``). The system part is used verbatim.
* Retrieved content, answers and questions are DATA: the templates wrap each in its
  own tag (``<passage>``, ``<answer>``, ...) and the system prompt tells the model
  never to follow instructions found inside them. Before filling, :func:`escape_data`
  defuses any of those tags inside the data itself (``</passage>`` becomes
  ``&lt;/passage>``), so a document cannot close its own tag and talk to the judge
  from outside it. Braces inside data need no escaping: ``str.format`` does not
  re-read substituted values.

A prompt version is immutable once verdicts were cached under it (the cache key
includes the version): to change a prompt, add ``crucible-v2/`` and bump
:data:`PROMPT_VERSION`.

This module never imports pytest or the Anthropic SDK.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

PROMPT_VERSION = "crucible-v1"

#: Tags the templates use to delimit data; escaped when they occur inside data.
DATA_TAGS = (
    "answer",
    "assertion",
    "assertions",
    "chunk",
    "claim",
    "claims",
    "context",
    "earlier",
    "facets",
    "passage",
    "question",
    "reference",
    "text",
    "topic",
    "user_message",
)
_DATA_TAG_RE = re.compile(r"<(\s*/?\s*)(" + "|".join(DATA_TAGS) + r")\b", re.IGNORECASE)
_SEPARATOR_RE = re.compile(r"^---[ \t]*$", re.MULTILINE)
_MARKER_RE = re.compile(r"^Judge task: (?P<version>[\w.-]+)/(?P<kind>\w+)[ \t]*$")

__all__ = [
    "DATA_TAGS",
    "PROMPT_VERSION",
    "STABLE_FIELDS",
    "PromptParts",
    "available_kinds",
    "escape_data",
    "load_prompt",
    "prompt_fields",
    "render_parts",
    "render_prompt",
    "rubric_scale_text",
]

#: Placeholders of a kind's user template that are the same for every request of that kind and setting (a
#: rubric's own text): the template up to the paragraph of its first other placeholder is the message's stable
#: head, which a model judge sends as a block of its own (the prompt cache's prefix). Kinds not named: no head.
STABLE_FIELDS: dict[str, tuple[str, ...]] = {"rubric": ("name", "criteria", "steps", "scale")}
_PLACEHOLDER_RE = re.compile(r"\{\{|\}\}|\{(\w+)\}")


def available_kinds(version: str = PROMPT_VERSION) -> list[str]:
    """The request kinds that have a prompt file under ``version`` (sorted)."""
    root = resources.files(__name__).joinpath(version)
    if not root.is_dir():
        return []
    return sorted(entry.name[: -len(".md")] for entry in root.iterdir() if entry.name.endswith(".md"))


@cache
def load_prompt(version: str, kind: str) -> tuple[str, str]:
    """``(system, user_template)`` of prompt ``version`` for request ``kind``."""
    if not re.fullmatch(r"[\w.-]+", version) or not re.fullmatch(r"\w+", kind):
        raise ValueError(f"invalid prompt version or kind: {version!r}/{kind!r}")
    path = resources.files(__name__).joinpath(version).joinpath(f"{kind}.md")
    if not path.is_file():
        known = available_kinds(version)
        hint = f"kinds available in {version}: {', '.join(known)}" if known else f"no prompt version {version!r} is installed"
        raise FileNotFoundError(f"no judge prompt {version}/{kind}.md; {hint}")
    text = path.read_text(encoding="utf-8")
    parts = _SEPARATOR_RE.split(text, maxsplit=1)
    if len(parts) != 2:
        raise ValueError(f"judge prompt {version}/{kind}.md has no '---' line between the system part and the user template")
    system, user_template = parts[0].strip(), parts[1].strip()
    marker = _MARKER_RE.match(system.splitlines()[0] if system else "")
    if marker is None or (marker["version"], marker["kind"]) != (version, kind):
        raise ValueError(f"judge prompt {version}/{kind}.md must start with the line 'Judge task: {version}/{kind}'")
    return system, user_template


def escape_data(text: str) -> str:
    """Defuse the prompt's own delimiter tags inside ``text`` (everything else is kept)."""
    return _DATA_TAG_RE.sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)


def _numbered(tag: str, items: Any) -> str:
    lines = [f'<{tag} index="{i}">\n{escape_data(str(item))}\n</{tag}>' for i, item in enumerate(items, start=1)]
    return "\n".join(lines) if lines else "(none)"


def rubric_scale_text(request: Any) -> str:
    """The scale of a rubric request in words, as its prompt states it."""
    if request.pass_fail:
        return "pass/fail: 1 if the answer meets the criteria, 0 if it does not"
    return (
        f"an integer from {request.scale_min} (does not meet the criteria at all) "
        f"to {request.scale_max} (fully meets them)"
    )


def prompt_fields(request: Any) -> dict[str, str]:
    """The placeholder values for ``request`` (a :class:`~pytest_crucible.judge.types.JudgeRequest`).

    Per kind: claims ``question, text``; entailment ``passages, claims, claim_count``;
    questions ``answer, n``; usefulness ``question, reference, chunk``; relevance
    ``question, chunk``; correctness ``question, answer, reference, assertions,
    answerable, false_premise``; rubric ``name, criteria, steps, scale, question,
    reference, answer``; retention ``earlier (the user's earlier messages, as numbered
    ``<user_message>`` tags), earlier_count, question, answer``; generate ``question_type, type_instructions, passages (with
    their chunk ids), passage_count, topics, variant``; answer_check ``question,
    passages``. List fields of data are rendered as numbered tags
    (``<passage index="1">``), all data is passed through :func:`escape_data`. The
    rubric's own text (the evaluator's instructions, not data) is written without tags,
    its steps as a numbered list and its scale in words; it is escaped too, so no
    rubric can open or close one of the data tags.
    """
    kind = request.kind
    if kind == "claims":
        return {"question": escape_data(request.question), "text": escape_data(request.text)}
    if kind == "entailment":
        return {
            "passages": _numbered("passage", request.context),
            "claims": _numbered("claim", request.claims),
            "claim_count": str(len(request.claims)),
        }
    if kind == "questions":
        return {"answer": escape_data(request.answer), "n": str(request.n)}
    if kind == "usefulness":
        return {
            "question": escape_data(request.question),
            "reference": escape_data(request.reference),
            "chunk": escape_data(request.chunk),
        }
    if kind == "relevance":
        return {"question": escape_data(request.question), "chunk": escape_data(request.chunk)}
    if kind == "correctness":
        return {
            "question": escape_data(request.question),
            "answer": escape_data(request.answer),
            "reference": escape_data(request.reference) if request.reference else "(no reference answer given)",
            "assertions": _numbered("assertion", request.assertions),
            "answerable": "yes" if request.answerable else "no",
            "false_premise": "yes" if request.false_premise else "no",
        }
    if kind == "rubric":
        steps = [f"{i}. {escape_data(step)}" for i, step in enumerate(request.steps, start=1)]
        return {
            "name": escape_data(request.name),
            "criteria": escape_data(request.criteria),
            "steps": "\n".join(steps) if steps else "(none)",
            "scale": rubric_scale_text(request),
            "question": escape_data(request.question),
            "reference": escape_data(request.reference) if request.reference else "(no reference answer given)",
            "answer": escape_data(request.answer),
        }
    if kind == "retention":
        return {
            "earlier": _numbered("user_message", request.earlier),
            "earlier_count": str(len(request.earlier)),
            "question": escape_data(request.question),
            "answer": escape_data(request.answer),
        }
    if kind == "generate":
        return {
            "question_type": request.question_type,
            "type_instructions": GENERATE_TYPE_INSTRUCTIONS[request.question_type],
            "passages": _passages_with_ids(request.passages, request.passage_ids),
            "passage_count": str(len(request.passages)),
            "topics": _numbered("topic", request.topics),
            "variant": (
                f"This is variation {request.variant}: ask about a different fact of the passages than the most obvious "
                "question would." if request.variant else "(first question from these passages)"
            ),
        }
    if kind == "answer_check":
        return {
            "question": escape_data(request.question),
            "passages": _numbered("passage", request.passages),
        }
    raise ValueError(f"no prompt fields for request kind {kind!r}")


#: What each generated question type asks of the writer (part of the generate-v1 prompt, so fixed text).
GENERATE_TYPE_INSTRUCTIONS: dict[str, str] = {
    "simple": "A simple question: one fact that passage 1 states. The reference answers it in one or two sentences.",
    "multi_hop": "A multi-hop question: answering it needs one fact from passage 1 AND one fact from passage 2 "
                 "(neither passage alone is enough). The reference combines both facts.",
    "comparison": "A comparison question: it compares something described in passage 1 with something described in "
                  "passage 2 (which is larger, earlier, cheaper, how they differ). The reference states both sides "
                  "and the outcome.",
    "false_premise": "A false-premise question: it takes a fact of passage 1 for granted but gets it wrong (alter a "
                     "number, a name, a condition). Put the wrong version in altered_fact. The reference points out "
                     "the mistaken premise and gives the correct fact from the passage.",
    "unanswerable": "An unanswerable question: one a reader of these documents would plausibly ask, close to the "
                    "topic of the passage, but that neither the passage nor any listed topic answers. Set answerable "
                    "to false; the reference says the documents do not answer it; give no assertions.",
}


def _passages_with_ids(passages: Any, ids: Any) -> str:
    """Source passages as ``<passage index="1" id="doc#p2">`` tags (the ids escaped like the data)."""
    lines = []
    for index, (text, chunk_id) in enumerate(zip(passages, ids), start=1):
        shown_id = escape_data(str(chunk_id)).replace('"', "&quot;")
        lines.append(f'<passage index="{index}" id="{shown_id}">\n{escape_data(str(text))}\n</passage>')
    return "\n".join(lines) if lines else "(none)"


@dataclass(frozen=True)
class PromptParts:
    """One request's prompt in the parts a model judge sends: ``system``; the user message's ``stable`` head
    (the same for every request of the kind and setting, "" when it has none: :data:`STABLE_FIELDS`) and its
    ``item`` part. ``stable + item`` is the user message, character for character."""

    system: str
    stable: str
    item: str

    @property
    def user(self) -> str:
        return self.stable + self.item


@cache
def _stable_cut(version: str, kind: str) -> int:
    """Where the stable head of ``kind``'s user template ends: at the blank line before the paragraph of its
    first placeholder that is not a stable field (0: no head)."""
    stable = STABLE_FIELDS.get(kind)
    if not stable:
        return 0
    template = load_prompt(version, kind)[1]
    for match in _PLACEHOLDER_RE.finditer(template):
        if match.group(1) and match.group(1) not in stable:
            blank = template.rfind("\n\n", 0, match.start())
            return blank + 2 if blank >= 0 else 0
    return len(template)


def render_parts(request: Any, version: str = PROMPT_VERSION) -> PromptParts:
    """The prompt of one request under ``version``, split into its stable prefix and its per-item part."""
    system, template = load_prompt(version, request.kind)
    fields = prompt_fields(request)
    cut = _stable_cut(version, request.kind)
    return PromptParts(system, template[:cut].format(**fields), template[cut:].format(**fields))


def render_prompt(request: Any, version: str = PROMPT_VERSION) -> tuple[str, str]:
    """``(system, user)`` text for one request under prompt ``version``."""
    parts = render_parts(request, version)
    return parts.system, parts.user
