"""``lexical-retention-v1``: the offline judges' answer to ``retention`` requests (knowledge retention in a
golden conversation), by what words can show: a value the user stated that the answer restates differently.

Every offline judge (``lexical-v1``, ``-v2``, ``-v3``; the aligned judge through its base) answers
``retention`` with :func:`retention_verdict`, versioned on its own (:data:`VERSION`, what
``prompt_version_for("retention")`` returns): a change here re-judges retention only, never the cached
verdicts of the other kinds, whose rules stay frozen.

The rule
--------
1. **The user's facts**: each value in the user's earlier messages, read by :func:`.quantities.read_values`
   (so "two weeks" and "14 days", "$40" and "40 dollars" are one value), with its *unit*:
   a plain number takes the word after it ("80 km" -> ``km``, "3 bikes" -> ``bike``; plurals and a few unit
   spellings folded: "kilometres" -> ``km``); a four-digit number from 1900 to 2100 is a ``year``; a date,
   a month, a weekday, a clock time, a duration, an amount of money or a percentage is its kind. A number
   with no word after it (or only "of", "and", ...) has no unit and is not a fact here.
2. **Updated facts**: a unit the turn's own question states again is left out (the user updated it:
   "actually it was 90 km"; an answer that follows the update contradicts nothing earlier).
3. **A contradiction**: a sentence of the answer that speaks to the user ("you", "your", ...) states a value
   of a user's unit, and *no* value of that unit anywhere in the answer is one of the user's values. Every
   earlier message that stated that unit is quoted, and the reason names both values
   ("the answer says 200 km where the user said 80 km").

What it catches: "I have ridden my bike 80 km" then "Since you rode 200 km, ..."; "I bought 3 bikes" then
"your 2 bikes"; "on March 3" then "since you bought it on March 5"; a year, a price, a duration the answer
misstates to the user.

What it cannot catch (a model judge can): a fact without a number ("I live in Lyon" then "in Paris, you
..."), negation ("I have used it" then "since you have not used it"), a paraphrased unit ("80 km" then
"50 miles", or "a distance of 200"), a value the answer states without addressing the user ("the bike was
ridden 200 km"), and a correction written in a turn before this one (the earlier values all count). A
value the answer states to the user for the same unit on purpose ("you may ride up to 100 km" after the
user's 80 km, with 80 km left out) is a false contradiction. Number words are English only.

This module never imports pytest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from .lexical_common import split_sentences
from .quantities import PLACEHOLDER, Value, read_values, same_value
from .types import RetentionRequest, RetentionVerdict

__all__ = ["VERSION", "Fact", "facts_of", "retention_verdict"]

#: The version of this rule, stamped on its verdicts and part of their cache key.
VERSION = "lexical-retention-v1"

_PLACEHOLDER_WORD = re.compile(rf"\b{PLACEHOLDER}(\d+)x\b(?:\s+([^\W\d_]+))?", re.UNICODE)
# "80km": a unit abbreviation written against its number is read as "80 km".
_GLUED_UNIT = re.compile(r"(\d)(km|kms|mi|kg|kgs|lb|lbs|m)\b", re.IGNORECASE)
_ADDRESSES_USER = re.compile(r"\b(?:you|your|yours|yourself|you've|you're|you'd|you'll)\b", re.IGNORECASE)
# Words after a number that are not its unit ("3 of them", "80 and more").
_NOT_UNITS = frozenset({"of", "and", "or", "to", "in", "on", "at", "for", "by", "from", "the", "a", "an", "my", "your", "i",
                        "you", "it", "is", "was", "are", "were", "times", "percent"})
# A few spellings of one unit (the rest is folded by _singular).
_UNIT_SPELLINGS = {
    "km": "km", "kms": "km", "kilometre": "km", "kilometres": "km", "kilometer": "km", "kilometers": "km",
    "mi": "mile", "miles": "mile", "mile": "mile",
    "kg": "kg", "kgs": "kg", "kilo": "kg", "kilos": "kg", "kilogram": "kg", "kilograms": "kg",
    "lb": "lb", "lbs": "lb",
    "m": "metre", "metre": "metre", "metres": "metre", "meter": "metre", "meters": "metre",
}


class Fact(NamedTuple):
    """A value with its unit, as written (``shown``: "80 km")."""

    unit: str
    value: Value
    shown: str


def _singular(word: str) -> str:
    word = word.lower()
    if word in _UNIT_SPELLINGS:
        return _UNIT_SPELLINGS[word]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _is_year(value: Value) -> bool:
    return value.kind == "number" and bool(re.fullmatch(r"(19|20)\d\d|2100", value.text.strip()))


def facts_of(text: str) -> list[Fact]:
    """The values of ``text`` that have a unit, in order (soft values such as "a month" in "$10 a month" are
    never facts: they are rates or manners of speaking more often than statements)."""
    marked, values = read_values(_GLUED_UNIT.sub(r"\1 \2", text))
    facts: list[Fact] = []
    for match in _PLACEHOLDER_WORD.finditer(marked):
        value = values[int(match.group(1))]
        if value.soft:
            continue
        if value.kind != "number":
            facts.append(Fact(value.kind, value, value.text))
        elif _is_year(value):
            facts.append(Fact("year", value, value.text))
        elif match.group(2) and match.group(2).lower() not in _NOT_UNITS and not match.group(2).startswith(PLACEHOLDER):
            facts.append(Fact(_singular(match.group(2)), value, f"{value.text} {match.group(2)}"))
    return facts


def _states(facts: Sequence[Fact], fact: Fact) -> bool:
    return any(other.unit == fact.unit and same_value(other.value, fact.value) for other in facts)


def retention_verdict(request: RetentionRequest) -> RetentionVerdict:
    """The earlier user messages whose values the answer restates to the user differently (see the module doc)."""
    updated = {fact.unit for fact in facts_of(request.question)}
    stated: dict[str, list[tuple[int, Fact]]] = {}  # unit -> (earlier message index, fact)
    for index, message in enumerate(request.earlier):
        for fact in facts_of(message):
            if fact.unit not in updated:
                stated.setdefault(fact.unit, []).append((index, fact))
    if not stated:
        return RetentionVerdict(contradicted=[], reason="no value with a unit in the user's earlier messages")
    answer_facts = facts_of(request.answer)
    to_user = [fact for sentence in split_sentences(request.answer) if _ADDRESSES_USER.search(sentence)
               for fact in facts_of(sentence)]
    quoted: list[int] = []
    reasons: list[str] = []
    for unit, user_facts in stated.items():
        differing = [fact for fact in to_user if fact.unit == unit]
        if not differing or any(_states(answer_facts, fact) for _, fact in user_facts):
            continue  # not restated to the user, or restated with the user's value
        quoted.extend(index for index, _ in user_facts if index not in quoted)
        said = ", ".join(dict.fromkeys(fact.shown for _, fact in user_facts))
        reasons.append(f"the answer says {differing[0].shown} where the user said {said}")
    if not quoted:
        return RetentionVerdict(contradicted=[], reason="the answer restates none of the user's values differently")
    return RetentionVerdict(contradicted=[request.earlier[index] for index in sorted(quoted)], reason="; ".join(reasons))
