"""Input defences: a scanner that refuses prompt injection before anything is answered.

The scanner looks at the question and at the documents retrieval returned (a
poisoned knowledge-base page arrives this way). It is made of independent,
named layers, each a plain-Python heuristic for one family of attacks:

* ``instructionPatterns`` - the question tries to steer the assistant itself:
  override phrasing ("ignore all previous instructions", "your rules no longer
  apply", "system override"), role-play and jailbreak set-ups ("you are now
  ...", "pretend you are ...", "developer mode enabled") and prompt-leak
  requests ("print your system prompt", "repeat everything above").
* ``personalData`` - the question asks for other people's personal data
  (customer contact details, staff salaries, someone else's GPS tracks): a
  request verb, a kind of personal data and a third party or a bulk quantifier
  together. Asking about one's own data ("a copy of my data") is fine.
* ``obfuscation`` - the payload is hidden: invisible characters, homoglyphs,
  full-width letters, leetspeak, spaced-out letters, reversed text, base64 /
  hex / percent-encoded blobs, rot13. The layer undoes these and re-runs the other
  rule sets on the decoded text; it fires only when decoding revealed a match
  the plain text did not have, so it never takes credit for a plain attack.
* ``documentScan`` - a retrieved (or planted) document addresses the
  assistant instead of the reader: "note to the AI assistant", "if you are a
  language model", chat-template role markers ("[system]", "<|im_start|>"),
  output control ("respond only with ..."), requests to collect credentials,
  sign-in links to foreign domains.

Each layer is independent: the plain-text layers deliberately do not undo
obfuscation (that is the obfuscation layer's job), so switching one layer off
in the config shows exactly what it contributes. Layers run in the order above
and the first one that fires names the block.

Switching a layer off::

    {"guardrails": {"layers": {"documentScan": false}}}

Every layer defaults to on. The scanner reads the switch of every layer on
every call, so a run config that names a layer is always seen as read.

These are heuristics: they miss attacks phrased in ways they do not know (a
poisoned page that states false facts without addressing the assistant, an
exfiltration request without a request verb) and can refuse a clean question
that happens to use an attack's words. The adversarial golden set measures
both rates.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

# A document as the scanner sees it: (where it came from, its text).
Document = tuple[str, str]
# One rule set: (rule name, compiled pattern).
Rules = tuple[tuple[str, "re.Pattern[str]"], ...]


@dataclass(frozen=True)
class Verdict:
    """Why the scanner refused: the layer that fired, its reason and where it looked."""

    layer: str
    reason: str
    source: str  # "question" or the id of the document (chunk) that fired

    def to_dict(self) -> dict[str, str]:
        return {"layer": self.layer, "reason": self.reason, "source": self.source}


@dataclass(frozen=True)
class Layer:
    """A named defence layer. ``scan`` returns (source, reason) when it fires, else None."""

    name: str
    family: str
    scan: Callable[[str, Sequence[Document]], tuple[str, str] | None]


# -- normalisation -------------------------------------------------------------

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00b4": "'", "`": "'"})


def light_normalise(text: str) -> str:
    """Lower case, straight quotes, single spaces. No attempt to undo obfuscation."""
    return " ".join(text.translate(_QUOTES).lower().split())


def _compile(rules: dict[str, str]) -> Rules:
    return tuple((name, re.compile(pattern)) for name, pattern in rules.items())


def _first_match(rules: Rules, text: str) -> tuple[str, str] | None:
    for name, pattern in rules:
        match = pattern.search(text)
        if match:
            return name, match.group(0)
    return None


def _quote(snippet: str, limit: int = 60) -> str:
    snippet = " ".join(snippet.split())
    return repr(snippet if len(snippet) <= limit else snippet[: limit - 3] + "...")


# -- rule sets -------------------------------------------------------------------

# What an assistant is steered by. Deliberately not "policy" or "message": customers
# legitimately ask to set aside a returns policy or an earlier message of their own.
_STEERING = r"(instructions?|rules|guidelines|directives|prompts?|system prompt|programming|guardrails|restrictions|constraints|safety filters?|filters)"
_BEFORE = r"(previous|prior|earlier|above|preceding|original|initial|existing|old|former|all|any|your|these|those|every)"

INSTRUCTION_RULES: Rules = _compile({
    # override
    "override": rf"\b(ignore|disregard|forget|override|bypass|overrule|drop|discard)\b(\s+\w+){{0,3}}?\s+{_BEFORE}\b(\s+\w+){{0,2}}?\s+{_STEERING}\b",
    "forget everything": r"\b(forget|ignore|disregard)\s+(everything|anything|all)\s+(you|that|above|before|i|we)\b",
    "assistant's setup": r"\b(you were|you've been|you have been)\s+(given|told|instructed|programmed|trained|configured)\b",
    "rules no longer apply": rf"\b{_STEERING}\b[^.?!]{{0,30}}\b(no longer|don't|do not|does not|doesn't)\s+apply\b",
    "new instructions": r"\b(new|updated|revised|real|actual|secret|additional)\s+(instructions?|directives?|system prompt|orders)\s*(from|:|are|follow)",
    "from now on": r"\bfrom now on\b[^.?!]{0,25}\b(you|reply|respond|answer|act|approve|always|only|say|ignore)\b",
    "override mode": r"\b(system|admin|administrator|root|security|safety|content|policy)\s+override\b|\b(maintenance|debug|admin|god|sudo|root)\s+mode\s+(is\s+)?(enabled|on|activated|active)\b",
    "task reframed": r"\byour\s+(actual|real|true|new|only|next|main)\s+(task|job|goal|instructions?|purpose|role|mission)\b|\b(previous|last|above|earlier|first)\s+(message|instructions?|prompt|conversation)\s+(was|were)\s+(only\s+|just\s+)?(a\s+test|fake|a\s+joke|wrong|void|cancelled|outdated)\b|\bstop\s+(being|acting\s+as|pretending\s+to\s+be)\s+(an?\s+|the\s+)?\w+",
    "claimed authority": r"\b(i\s+am|i'm)\s+(your|the|an?)\s+(developer|creator|admin|administrator|owner|operator|programmer|trainer)\b|\b(has|have)\s+(authori[sz]ed|permitted|cleared|allowed)\s+(me|you)\s+to\b|\b(safety|security|content)\s+(checks?|filters?|rules|guardrails|restrictions|mode)\s+(are|is)\s+(now\s+)?(off|disabled|lifted|suspended|removed)\b",
    "foreign-language override": r"\b(negeer|vergeet)\s+(alle\s+)?(vorige|eerdere|bovenstaande)?\s*(instructies|regels|opdrachten)\b|\b(ignoriere|vergiss)\s+(alle\s+)?(vorherigen|bisherigen|obigen)?\s*(anweisungen|regeln|instruktionen)\b|\b(ignorez|ignore|oubliez)\s+(toutes\s+)?(les\s+)?(instructions|consignes|r\u00e8gles)\s+(pr\u00e9c\u00e9dentes|ant\u00e9rieures)\b|\bignora\s+(todas\s+)?(las\s+)?instrucciones\b",
    "decode and obey": r"\b(decode|decrypt|translate|reverse|unscramble)\b[^.?!]{0,40}\b(do|follow|execute|obey|carry out|run)\b[^.?!]{0,15}\b(it|what|instructions?|them|this)\b",
    # role-play and jailbreak
    "you are now": r"\byou(\s+are|'re)\s+now\b|\bfrom now on,?\s+you(\s+are|'re)\b",
    "pretend you are": r"\b(pretend|imagine|suppose)\s+(that\s+)?(you\s+are|you're|you\s+were|to\s+be)\b",
    "act as": r"(^|[.!?:;]\s*|\byou\s+(will|must|should|to|can)\s+|\bplease\s+|\bnow\s+)(act|behave|speak|talk)\s+as\s+(an?|my|the)\b|\b(act|behave|respond|answer|reply|speak|talk)\s+as\s+(if|though)\s+you\b",
    "role-play": r"\brole[- ]?play(ing)?\b|\blet'?s\s+play\s+a\s+game\b",
    "unrestricted persona": r"\byou\s+are\s+(now\s+)?dan\b|\bdan\s+(mode|always|can\s+do\s+anything)\b|\b(do\s+anything\s+now|jailbroken|jailbreak)\b|\b(no|without|zero|free\s+of|ignoring)\s+([\w-]+'s\s+|your\s+|any\s+|the\s+)?(content\s+)?(restrictions|rules|filters|policies|censorship|ethics|guardrails|limitations)\b|\b(unrestricted|unfiltered|uncensored|jailbroken|evil)\s+(ai|assistant|model|chatbot|bot|version|mode|persona)\b|\bif\s+you\s+were\s+(an?\s+)?(\w+\s+)?(ai|assistant|language\s+model|chatbot|bot|human)\b|\b(doesn't|does not|don't|do not)\s+care\s+about\s+(the\s+)?(rules|policies|law|restrictions)\b",
    "never refuses": r"\b(never|won't|will not|cannot|can't)\s+(refuse|decline|say\s+no)\b|\balways\s+(says?|answers?|replies)\s+(yes|with yes)\b",
    "mode switch": r"\b(enable|activate|enter|switch\s+(on|to)|turn\s+on|you\s+are\s+(now\s+)?in)\s+(developer|dev|debug|jailbreak|unrestricted|god|admin|sudo)\s+mode\b|\b(developer|dev|jailbreak|unrestricted|god)\s+mode\s+(is\s+)?(enabled|on|activated|active)\b",
    "grandma exploit": r"\b(late|dead|deceased|dear)\s+(grandmother|grandma|granny|grandfather|grandpa)\b[^.?!]{0,80}\bused\s+to\s+(read|tell|recite|say)\b",
    # prompt leak
    "system prompt": r"\b(system|hidden|secret|developer|pre)[- ]?(prompt|message)\b|\bprompt\s+template\b|\b(hidden|secret)\s+(instructions|configuration|rules)\b|\byour\s+(initial|original|first|real)\s+(instructions|prompt|rules)\b",
    "reveal setup": r"\b(print|reveal|show|repeat|output|display|paste|dump|leak|list|recite|spell out|tell me|give me|write out|copy)\b[^.?!]{0,30}\b(your|the assistant's|the bot's)\s+(\w+\s+)?(prompt|instructions|guidelines|rules|configuration|setup|directives)\b",
    "repeat above": r"\b(repeat|print|output|copy|show|reproduce)\b[^.?!]{0,25}\b(everything|all|anything|the text|what(ever)? (is|was) written)\s+(written\s+)?(above|before)\b|\babove\s+this\s+(line|message)\b",
    "your own restrictions": r"\b(did|does|do)\s+[\w-]+\s+(give|tell|instruct|teach|program|train)\s+you\b|\b(you're|you\s+are)\s+not\s+(allowed|permitted|supposed)\s+to\s+(say|talk|discuss|tell|answer|mention|reveal)\b|\bwhat\s+(are|were)\s+you\s+(told|instructed|programmed|trained)\b",
    "text before this": r"\b(text|words|message|content|everything|anything)\s+(you\s+(received|got|were\s+sent|saw|were\s+shown)|(that\s+)?(came|comes|is|was)\s+before\s+(my|this|the\s+user's)\s+(message|question))\b|\b(first|opening)\s+(word|line|sentence)s?\s+of\s+(your|the)\s+(prompt|instructions|context)\b",
    "instructions that steer you": r"\b(instructions?|rules|guidelines|prompt)\s+(that|which)\s+(tell|told|instruct|guide|govern|control)\s+you\b|\bare you following\b",
    "verbatim": r"\b(verbatim|word for word|word-for-word)\b",
})

_PII = (r"(e-?mail\s+address(es)?|emails?|phone\s+numbers?|mobile\s+numbers?|telephone\s+numbers?|home\s+address(es)?|"
        r"postal\s+address(es)?|addresses|date\s+of\s+birth|dates\s+of\s+birth|birthdays?|bank\s+details|ibans?|"
        r"account\s+numbers?|card\s+(numbers?|details)|credit\s+cards?|salar(y|ies)|pay\s+slips?|payslips?|passwords?|"
        r"mfa\s+codes?|gps\s+(tracks?|data|history|locations?)|location\s+(data|history)|locations?|whereabouts|trackers?|"
        r"ride\s+data|trip\s+history|contact\s+details|personal\s+(data|details|information)|medical\s+\w+|"
        r"sick(ness)?\s+(notes?|records?)|health\s+data|id\s+(copies|scans|documents)|passport|ratings?|performance\s+ratings?|disciplinary\s+\w+)")
_PEOPLE = r"(customers?|clients?|employees?|staff|colleagues?|riders?|owners?|users?|buyers?|members?|people|persons?|drivers?|managers?|subscribers?)"
_REQUEST = (r"\b(list|give|send|show|share|export|dump|download|print|provide|pull|look\s+up|find|tell\s+me|get\s+me|"
            r"email\s+me|forward|compile|extract|what\s+is|what's|what\s+are|where\s+is|where's|where\s+does|where\s+do|which|who|whose)\b")
_THIRD_PARTY = re.compile(
    rf"\b(all|every|each|other|another|any|the\s+other)\s+(\w+\s+){{0,3}}?{_PEOPLE}\b"
    rf"|\b(which|what|whose)\s+(\w+\s+)?{_PEOPLE}\b"
    r"|\b(his|her)\b"
    r"|\b(neighbou?r|ex|ex-partner|ex-wife|ex-husband|wife|husband|girlfriend|boyfriend|boss|stranger|someone(\s+else)?|somebody)('s)?\b"
    rf"|\b(a|this|that|the)\s+(\w+\s+)?{_PEOPLE}'s\b"
    # a named person's data: "joost de ridder's home address" (not "my ride's gps track")
    r"|\b(?!(?:my|our|your|the|a|an|this|that|me|i)\b)[a-z]+\s+(de\s+|van\s+|von\s+)?(?!(?:my|our|your)\b)[a-z]+'s\s+(\w+\s+)?" + _PII
)
_PII_RE = re.compile(rf"\b{_PII}\b")
_REQUEST_RE = re.compile(_REQUEST)
_FIRST_PERSON_PII = re.compile(rf"\b(my|me|mine|i|our)\b(\s+[\w']+){{0,2}}?\s+{_PII}\b|\b{_PII}\b[^.?!]{{0,25}}\babout\s+me\b")


def _personal_data_request(text: str) -> str | None:
    """A request for third-party personal data in lightly normalised text, or None."""
    third = _THIRD_PARTY.search(text)
    pii = _PII_RE.search(text)
    request = _REQUEST_RE.search(text)
    if not (third and pii and request):
        return None
    # "my bank details", "the data you hold about me": the asker's own data.
    if _FIRST_PERSON_PII.search(text) and not re.search(r"\b(all|every|each|other|another)\b", third.group(0)):
        return None
    return f"asks for personal data ({pii.group(0)!r}) of {third.group(0).strip()!r}"


_ASSISTANT = r"(ai|a\.i\.|assistant|chat\s?bot|bot|language\s+model|llm|model|gpt|copilot|virtual\s+agent|agent)"
_ALLOWED_DOMAINS = ("northwind-cycleworks.example",)

DOCUMENT_RULES: Rules = _compile({
    "override": r"\b(ignore|disregard|forget|override|bypass|discard)\b(\s+\w+){0,3}?\s+(all|any|the|every|other|previous|prior|earlier|above|remaining|your)\b(\s+\w+){0,2}?\s+(instructions?|rules|guidelines|prompts?|documents?|sources?|context|pages?|articles?|search\s+results|information)\b",
    "addressed to the assistant": rf"\b(note|message|instructions?|attention|notice|reminder)\s+(to|for)\s+(the\s+|any\s+|all\s+)?{_ASSISTANT}s?\b|\bif\s+you\s+are\s+an?\s+(\w+\s+)?{_ASSISTANT}\b|\b{_ASSISTANT}s?\b[^.?!]{{0,40}}\b(reading|processing|summari[sz]ing|answering|responding|using)\s+(from\s+|with\s+)?this\s+(page|document|article|text|content|file)\b|\b(when|while)\s+(answering|responding|replying|summari[sz]ing|processing|reading|quoting)\s+(from\s+|with\s+)?this\s+(page|document|article|text|content|file)\b",
    "assistant told what to do": rf"\b{_ASSISTANT}s?\s*[:,]\s*(please\s+)?(do\s+not|don't|never|always|you\s+must|respond|reply|answer|say|tell|ignore|include|add)\b|\b(the\s+)?{_ASSISTANT}s?\s+(must|should|shall|is\s+required\s+to|will\s+now|has\s+to)\s+(not\s+)?(say|tell|answer|respond|reply|ignore|include|add|mention|state|claim|recommend)\b",
    "role marker": r"(^|\s)\[(system|inst|/inst|assistant|sys)\]|<\|?(system|im_start|im_end|endoftext|assistant)\|?>|<\s*/?\s*system\s*>|#{2,}\s*(system|instruction|new instructions)|\bbegin\s+(system|hidden)?\s*(prompt|instructions)\b|(^|[.!?]\s+)(system|assistant)\s*:",
    "you are now": r"\byou(\s+are|'re)\s+now\b|\bfrom\s+now\s+on,?\s+(you|reply|respond|answer)\b",
    "output control": r"\b(respond|reply|answer)\s+(only\s+)?with\b|\b(in|to|for|at\s+the\s+end\s+of)\s+(your|every|each|any|all)\s+(answers?|responses?|replies|questions?)\b|\bwhenever\s+you\s+(answer|respond|reply)\b|\bdo\s+not\s+(mention|reveal|disclose|say|cite)\b|\b(the|your|every|each|any)\s+([\w-]+\s+)?(answers?|responses?|replies|output)\s+(must|should|shall|has\s+to|needs\s+to)\s+(include|contain|mention|say|state|start|end|add|ask|quote)\b",
    "collect credentials": r"\b(ask|request|tell|get|have|collect|obtain)\s+(for\s+)?(the\s+)?(user|customer|caller|reader|visitor|them)('s)?\b[^.?!]{0,50}\b(passwords?|passcodes?|pin|mfa|2fa|one-time|verification\s+codes?|card\s+numbers?|cvv|cvc|bank\s+details|login|credentials)\b",
})
_URL = re.compile(r"\b(?:https?://|www\.)([a-z0-9.-]+)")
_SIGN_IN = re.compile(r"\b(sign|log)\s*-?\s*(in|on)\b|\bverify\s+(your|their)\s+(account|identity|details)\b|\benter\s+(your|their)\s+(password|details|card)\b")


def _foreign_sign_in_link(text: str) -> str | None:
    for match in _URL.finditer(text):
        domain = match.group(1).rstrip(".")
        if not any(domain == d or domain.endswith("." + d) for d in _ALLOWED_DOMAINS) and _SIGN_IN.search(text):
            return f"sign-in link to a foreign domain ({domain})"
    return None


# -- plain-text detectors (shared with the obfuscation layer's re-scan) ----------

def detect_instruction(text: str) -> str | None:
    hit = _first_match(INSTRUCTION_RULES, text)
    return None if hit is None else f"{hit[0]}: {_quote(hit[1])}"


def detect_personal_data(text: str) -> str | None:
    return _personal_data_request(text)


def detect_document_injection(text: str) -> str | None:
    hit = _first_match(DOCUMENT_RULES, text)
    if hit is not None:
        return f"{hit[0]}: {_quote(hit[1])}"
    return _foreign_sign_in_link(text)


# -- obfuscation -----------------------------------------------------------------

# Invisible characters used to split words apart (Unicode category Cf covers ZWSP,
# ZWJ, soft hyphen, bidi controls and tag characters).
def _strip_invisible(text: str) -> str:
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


# Latin look-alikes from Cyrillic and Greek.
_HOMOGLYPHS = str.maketrans({
    "\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y", "\u0445": "x",
    "\u0456": "i", "\u0458": "j", "\u0455": "s", "\u04bb": "h", "\u0501": "d", "\u051b": "q", "\u051d": "w",
    "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u041a": "K", "\u041c": "M", "\u041d": "H", "\u041e": "O",
    "\u0420": "P", "\u0421": "C", "\u0422": "T", "\u0425": "X", "\u0406": "I", "\u0408": "J", "\u0405": "S",
    "\u03bf": "o", "\u03b1": "a", "\u03b5": "e", "\u03b9": "i", "\u03ba": "k", "\u03bd": "v", "\u03c1": "p",
    "\u03c4": "t", "\u03c5": "u", "\u03c7": "x", "\u039f": "O", "\u0391": "A", "\u0392": "B", "\u0395": "E",
    "\u0397": "H", "\u0399": "I", "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u03a1": "P", "\u03a4": "T",
    "\u03a7": "X", "\u0396": "Z",
})
_LEET_I = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "@": "a", "$": "s", "!": "i", "|": "l"})
_LEET_L = str.maketrans({"0": "o", "1": "l", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "@": "a", "$": "s", "!": "i", "|": "l"})
_LEET_TOKEN = re.compile(r"\S*[a-z]\S*")
_SPACED_RUN = re.compile(r"(?<![\w])(?:[a-z0-9] ){2,}[a-z0-9](?![\w])")
_DOTTED_RUN = re.compile(r"\b(?:[a-z0-9][.\-_*/]){3,}[a-z0-9]\b")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX = re.compile(r"\b(?:[0-9a-fA-F]{2}[\s:]?){12,}\b")
_PERCENT = re.compile(r"(?:%[0-9a-fA-F]{2}){4,}")
_HTML_COMMENT = re.compile(r"<!--(.*?)-->", re.S)


def _readable(raw: bytes) -> str | None:
    """The bytes as text when they look like natural language, else None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(1 for ch in text if ch.isprintable() or ch in "\n\t")
    letters = sum(1 for ch in text if ch.isalpha())
    if not text or printable / len(text) < 0.95 or letters / len(text) < 0.6 or " " not in text.strip():
        return None
    return text


def _decode_blobs(text: str) -> list[tuple[str, str]]:
    """(technique, decoded text) for every encoded blob that decodes to readable text."""
    found: list[tuple[str, str]] = []
    for match in _BASE64.finditer(text):
        blob = match.group(0)
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                raw = decode(blob + "=" * (-len(blob) % 4))
            except (binascii.Error, ValueError):
                continue
            readable = _readable(raw)
            if readable:
                found.append(("base64", readable))
                break
    for match in _HEX.finditer(text):
        try:
            readable = _readable(bytes.fromhex(re.sub(r"[\s:]", "", match.group(0))))
        except ValueError:
            readable = None
        if readable:
            found.append(("hex", readable))
    for match in _PERCENT.finditer(text):
        readable = _readable(unquote(match.group(0)).encode("utf-8", "surrogatepass"))
        if readable:
            found.append(("percent-encoding", readable))
    if re.search(r"\brot[- ]?13\b", text, re.I):
        found.append(("rot13", codecs.decode(text, "rot13")))
    return found


def _join_spaced(text: str) -> str:
    # "i g n o r e   a l l" -> "ignore all": single spaces join letters, wider gaps separate words.
    def join(match: re.Match[str]) -> str:
        return match.group(0).replace(" ", "")

    squeezed = re.sub(r" {2,}", " \u0000 ", text)  # mark word gaps so they survive the join
    joined = _SPACED_RUN.sub(join, squeezed)
    joined = _DOTTED_RUN.sub(lambda m: re.sub(r"[.\-_*/]", "", m.group(0)), joined)
    return " ".join(joined.replace("\u0000", " ").split())


def deobfuscated_variants(text: str) -> list[tuple[str, str]]:
    """(technique, lightly normalised text) for each way of undoing obfuscation that changed the text."""
    variants: list[tuple[str, str]] = []
    plain = light_normalise(text)

    def add(technique: str, candidate: str) -> None:
        normalised = light_normalise(candidate)
        if normalised != plain and all(normalised != v for _, v in variants):
            variants.append((technique, normalised))

    # Character level, cumulative: compatibility forms, invisible characters, homoglyphs.
    chars = unicodedata.normalize("NFKC", text)
    techniques = ["compatibility characters"] if chars != text else []
    stripped = _strip_invisible(chars)
    if stripped != chars:
        techniques.append("invisible characters")
    folded = stripped.translate(_HOMOGLYPHS)
    if folded != stripped:
        techniques.append("homoglyphs")
    if techniques:
        add(" + ".join(techniques), folded)
    base = light_normalise(folded)
    # Word level, on top of the character-level clean-up. Letter spacing needs the
    # original gaps (a wide gap separates words), so it works before spaces are collapsed.
    spaced = _join_spaced(folded.translate(_QUOTES).lower())
    if spaced != base:
        add("spaced-out letters", spaced)
    for table in (_LEET_I, _LEET_L):
        leet = _LEET_TOKEN.sub(lambda m, table=table: m.group(0).translate(table) if re.search(r"[0-9@$!|]", m.group(0)) else m.group(0), base)
        if leet != base:
            add("leetspeak", leet)
    # Mirror writing: the whole text reversed, and each word reversed in place.
    add("reversed text", base[::-1])
    add("reversed words", " ".join(word[::-1] for word in base.split()))
    # Encoded blobs (on the original text: base64 is case-sensitive), hidden HTML comments.
    for technique, decoded in _decode_blobs(text):
        add(technique, decoded)
    for comment in _HTML_COMMENT.findall(text):
        for technique, decoded in _decode_blobs(comment):
            add(f"{technique} in an HTML comment", decoded)
    return variants


_RESCANS: tuple[tuple[str, Callable[[str], str | None]], ...] = (
    ("instruction", detect_instruction),
    ("personal data", detect_personal_data),
    ("document injection", detect_document_injection),
)


@lru_cache(maxsize=4096)
def detect_obfuscated(text: str) -> str | None:
    """A hidden payload: some rule set matches the decoded text but not the plain text."""
    plain = light_normalise(text)
    variants = deobfuscated_variants(text)
    if not variants:
        return None
    already = {name for name, detect in _RESCANS if detect(plain)}
    for technique, decoded in variants:
        for name, detect in _RESCANS:
            if name in already:
                continue
            found = detect(decoded)
            if found:
                return f"{name} payload hidden by {technique} ({found})"
    return None


# -- layers ----------------------------------------------------------------------

@lru_cache(maxsize=4096)
def _document_verdict(text: str) -> str | None:
    return detect_document_injection(light_normalise(text))


def _scan_instruction(question: str, documents: Sequence[Document]) -> tuple[str, str] | None:
    found = detect_instruction(light_normalise(question))
    return None if found is None else ("question", found)


def _scan_personal_data(question: str, documents: Sequence[Document]) -> tuple[str, str] | None:
    found = detect_personal_data(light_normalise(question))
    return None if found is None else ("question", found)


def _scan_obfuscation(question: str, documents: Sequence[Document]) -> tuple[str, str] | None:
    for source, text in (("question", question), *documents):
        found = detect_obfuscated(text)
        if found:
            return source, found
    return None


def _scan_documents(question: str, documents: Sequence[Document]) -> tuple[str, str] | None:
    for source, text in documents:
        found = _document_verdict(text)
        if found:
            return source, found
    return None


LAYERS: tuple[Layer, ...] = (
    Layer("instructionPatterns", "instruction override, role-play / jailbreak and prompt-leak phrasing in the question", _scan_instruction),
    Layer("personalData", "requests for other people's personal data in the question", _scan_personal_data),
    Layer("obfuscation", "payloads hidden by encoding, invisible characters, homoglyphs, leetspeak or spacing", _scan_obfuscation),
    Layer("documentScan", "instructions addressed to the assistant inside retrieved or planted documents", _scan_documents),
)
LAYER_NAMES: tuple[str, ...] = tuple(layer.name for layer in LAYERS)


class InputScanner:
    """Runs the enabled layers in order; the first that fires blocks the question."""

    def __init__(self, layers: Sequence[Layer] = LAYERS) -> None:
        self.layers = tuple(layers)

    def enabled(self, config: Mapping[str, Any] | None) -> dict[str, bool]:
        """Which layers are on: ``guardrails.layers.<name>`` (default true), every key read."""
        guardrails = (config or {}).get("guardrails") or {}
        switches = guardrails.get("layers") or {}
        return {layer.name: bool(switches.get(layer.name, True)) for layer in self.layers}

    def scan(
        self,
        question: str,
        documents: Sequence[Document] = (),
        *,
        config: Mapping[str, Any] | None = None,
    ) -> Verdict | None:
        enabled = self.enabled(config)
        for layer in self.layers:
            if not enabled[layer.name]:
                continue
            found = layer.scan(question, documents)
            if found is not None:
                source, reason = found
                return Verdict(layer.name, reason, source)
        return None
