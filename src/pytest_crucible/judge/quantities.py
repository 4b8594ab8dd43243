"""Values written many ways, read into one canonical form (the ``lexical-v2`` judge's reader).

"$40", "40 dollars" and "forty dollars" are one value; so are "two weeks" and "14 days",
"7 pm" and "19:00", "half" and "50%", "Sept. 1" and "1 September". :func:`read_values` finds
such *values* in a text and returns the text with each value replaced by a placeholder token,
plus the values themselves. Each :class:`Value` has a ``kind`` and a set of equivalent
``keys``; two values are the same when their key sets meet (:func:`same_value`).

Kinds and keys
--------------
* ``time`` -- a clock time, 24-hour ``HH:MM``: "19:00", "7 pm", "7:00 p.m.", "seven in the
  evening", "half past eight", "noon". A bare "H:MM" is read as written (24-hour clock).
* ``duration`` -- a number with a unit of time, in minutes (``m1440`` for a day) and, for months
  and years, in months (``mo12``): "14 days", "14-day", "two weeks", "a fortnight", "24 hours'",
  "a day", "an hour". "a/an <unit>" is a *soft* value: it can match, it is never required (in
  "$10 a month" the "a month" is a rate, not a claim about one month).
* ``money`` -- an amount with a currency sign or word ("$40", "40 dollars", "€9", "nine euros",
  "25 cents"); the currency itself is not compared.
* ``percent`` -- "50%", "50 percent", "half" (soft: "half" also reads as 0.5).
* ``date`` -- a month with a day ("January 15", "15 January", "1st of September") -> ``d01-15``;
  a month alone -> ``mon01``.
* ``weekday`` -- "Monday" .. "Sunday" (plural too) -> ``wd1`` .. ``wd7``.
* ``number`` -- any other number, digits or words ("3", "three", "twenty-five", "twice", "1,000",
  "2.50"), as its plain decimal form.

Every value also carries its plain number (``bare``) so that a value written with a unit on one
side and without it on the other ("up to 3" / "3 devices") still meets. Number words are English
only; "once", "first" and other ordinal words are not numbers (they are mostly not used as such).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

__all__ = ["APPROXIMATE", "PLACEHOLDER", "Value", "read_values", "same_value"]

APPROXIMATE = 0.1  # relative tolerance of a value written as approximate ("about $45" meets "$44.50")

PLACEHOLDER = "qv"  # the token that replaces value i in the text is f"{PLACEHOLDER}{i}x"

_ONES = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_WORD_NUMBER = (
    r"(?:(?:" + "|".join(_TENS) + r")(?:[- ](?:" + "|".join(k for k in _ONES if _ONES[k] and _ONES[k] < 10) + r"))?"
    r"|" + "|".join(sorted(_ONES, key=len, reverse=True)) + r"|a hundred|one hundred|a dozen|twice|thrice)"
)
_DIGITS = r"\d+(?:,\d{3})*(?:\.\d+)?"
_NUMBER = rf"(?:{_DIGITS}|{_WORD_NUMBER})"

_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"]
_MONTH_ABBREVIATIONS = {m[:3]: i + 1 for i, m in enumerate(_MONTHS)} | {"sept": 9}
_MONTH = r"(?:" + "|".join(_MONTHS) + r"|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?)"
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

# minutes per unit; months and years are counted in months (not a fixed number of days)
_MINUTES = {"minute": 1, "min": 1, "hour": 60, "hr": 60, "day": 1440, "night": 1440, "week": 10080, "fortnight": 20160}
_MONTHS_PER = {"month": 1, "year": 12, "yr": 12}
_UNIT = r"(?P<unit>minutes?|mins?|hours?|hrs?|days?|nights?|weeks?|fortnights?|months?|years?|yrs?)(?:'s?|s')?"
_APPROXIMATELY = re.compile(r"\b(?:about|around|roughly|approximately|approx\.?|nearly|almost|some|circa|~)\s*$", re.I)
_CURRENCY_WORD = r"(?P<cur>dollars?|euros?|pounds?|cents?|pence|p\b|usd|eur|gbp)"


@dataclass(frozen=True)
class Value:
    kind: str  # time | duration | money | percent | date | weekday | number
    keys: frozenset[str]
    bare: frozenset[str]  # the plain number(s) it shows, "" for weekdays and months
    soft: bool = False  # can match, is never required ("a month" in "$10 a month")
    text: str = ""
    magnitude: float | None = None  # the amount in the kind's unit (minutes or months for durations)
    approximate: bool = False  # "about $45", "roughly two weeks": matches within APPROXIMATE of the magnitude


def _plain(number: float) -> str:
    text = f"{number:.4f}".rstrip("0").rstrip(".")
    return text or "0"


def _number(raw: str) -> float | None:
    raw = raw.lower().strip()
    if raw[0].isdigit():
        return float(raw.replace(",", ""))
    if raw in ("a hundred", "one hundred"):
        return 100.0
    if raw == "a dozen":
        return 12.0
    if raw == "twice":
        return 2.0
    if raw == "thrice":
        return 3.0
    if raw in _ONES:
        return float(_ONES[raw])
    parts = re.split(r"[- ]", raw)
    if parts[0] in _TENS:
        return float(_TENS[parts[0]] + (_ONES.get(parts[1], 0) if len(parts) > 1 else 0))
    return None


def _clock(hour: float, minute: float, half: str | None) -> str | None:
    if half:
        half = half.replace(".", "").replace(" ", "")
        if half in ("pm", "evening", "afternoon", "night", "tonight") and hour < 12:
            hour += 12
        elif half in ("am", "morning") and hour == 12:
            hour = 0
    if not (0 <= hour <= 24 and 0 <= minute < 60):
        return None
    return f"{int(hour):02d}:{int(minute):02d}"


def _time(clock: str | None, soft: bool = False, text: str = "") -> Value | None:
    if clock is None:
        return None
    hour = int(clock[:2])
    bare = {str(hour)} | ({str(hour - 12)} if hour > 12 else set())
    return Value("time", frozenset({"t" + clock}), frozenset(bare), soft, text)


def _duration(amount: float, unit: str, soft: bool, text: str) -> Value:
    unit = unit.lower().rstrip("'").rstrip("s") if unit.lower() not in ("hrs", "mins", "yrs") else unit.lower()[:-1]
    if unit.endswith("'"):
        unit = unit[:-1]
    keys: set[str] = set()
    if unit in _MINUTES:
        magnitude = amount * _MINUTES[unit]
        keys.add("m" + _plain(magnitude))
    else:
        magnitude = amount * _MONTHS_PER[unit]
        keys.add("mo" + _plain(magnitude))
        if unit == "year":
            keys.add("y" + _plain(amount))
    return Value("duration", frozenset(keys), frozenset({_plain(amount)}), soft, text, magnitude)


def _money(amount: float, cents: bool, text: str) -> Value:
    if cents:
        amount /= 100
    return Value("money", frozenset({"$" + _plain(amount)}), frozenset({_plain(amount)}), False, text, amount)


_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    # clock times first, so "7 pm" is not read as the number 7
    ("half past", re.compile(rf"\bhalf past (?P<h>{_NUMBER})(?:\s*(?P<half>a\.?m\.?|p\.?m\.?|in the (?:morning|afternoon|evening)|at night))?", re.I)),
    ("quarter", re.compile(rf"\bquarter (?P<rel>past|to) (?P<h>{_NUMBER})(?:\s*(?P<half>a\.?m\.?|p\.?m\.?|in the (?:morning|afternoon|evening)))?", re.I)),
    ("clock", re.compile(r"\b(?P<h>\d{1,2}):(?P<m>\d{2})\s*(?P<half>a\.?m\.?|p\.?m\.?)?(?![\d.,]*\d)", re.I)),
    # "8.30 pm" is a time, "2.50" alone is a number
    ("clock", re.compile(r"\b(?P<h>\d{1,2})\.(?P<m>\d{2})\s*(?P<half>a\.?m\.?|p\.?m\.?)", re.I)),
    ("ampm", re.compile(rf"\b(?P<h>\d{{1,2}}|{_WORD_NUMBER})(?:\s*o'clock)?\s*(?P<half>a\.?m\.?|p\.?m\.?|in the (?:morning|afternoon|evening)|at night)(?![a-z])", re.I)),
    ("oclock", re.compile(rf"\b(?P<h>\d{{1,2}}|{_WORD_NUMBER}) o'clock", re.I)),
    ("noon", re.compile(r"\b(?:noon|midday|midnight)\b", re.I)),
    # dates
    ("date md", re.compile(rf"\b(?P<mon>{_MONTH})\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b", re.I)),
    ("date dm", re.compile(rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?: of)?\s+(?P<mon>{_MONTH})(?![a-z])", re.I)),
    ("month", re.compile(rf"\b(?P<mon>{_MONTH})(?![a-z])", re.I)),
    ("weekday", re.compile(r"\b(?P<wd>" + "|".join(_WEEKDAYS) + r")s?\b", re.I)),
    # money, percentages, durations
    ("money sign", re.compile(rf"(?P<sign>[$£€])\s?(?P<n>{_DIGITS})(?:\s?(?P<mult>k|m|million|thousand)\b)?", re.I)),
    ("money word", re.compile(rf"\b(?P<n>{_NUMBER})\s+{_CURRENCY_WORD}", re.I)),
    ("percent", re.compile(rf"\b(?P<n>{_NUMBER})\s?(?:%|percent\b|per cent\b)", re.I)),
    ("half", re.compile(r"\bhalf\b(?!\s+(?:an?\s+)?(?:hour|day|week|month|year)s?\b)", re.I)),
    ("duration", re.compile(rf"\b(?P<n>{_NUMBER})(?:\s|-)(?:(?:business|working|calendar|full|whole|consecutive)[\s-])?{_UNIT}(?![a-z])", re.I)),
    ("a unit", re.compile(r"\b(?P<a>an?|one|per|each)\s+(?:(?:business|working|calendar|full|whole)\s+)?(?P<unit>minute|hour|day|night|week|fortnight|month|year)(?:'s|s')?(?![a-z])", re.I)),
    ("fortnight", re.compile(r"\bfortnight\b", re.I)),
    ("number", re.compile(rf"\b(?P<n>{_DIGITS})(?:st|nd|rd|th)?\b|\b(?P<w>{_WORD_NUMBER})\b", re.I)),
]


def _month_number(raw: str) -> int:
    raw = raw.lower().rstrip(".")
    return _MONTHS.index(raw) + 1 if raw in _MONTHS else _MONTH_ABBREVIATIONS[raw[:4] if raw.startswith("sept") else raw[:3]]


def _value(name: str, match: re.Match[str]) -> Value | None:
    text = match.group(0)
    g = match.groupdict()
    if name == "half past":
        hour = _number(g["h"])
        return None if hour is None else _time(_clock(hour, 30, g.get("half")), text=text)
    if name == "quarter":
        hour = _number(g["h"])
        if hour is None:
            return None
        return _time(_clock(hour if g["rel"] == "past" else hour - 1, 15 if g["rel"] == "past" else 45, g.get("half")), text=text)
    if name == "clock":
        return _time(_clock(int(g["h"]), int(g["m"]), g.get("half")), text=text)
    if name in ("ampm", "oclock"):
        hour = _number(g["h"])
        return None if hour is None else _time(_clock(hour, 0, g.get("half")), text=text)
    if name == "noon":
        return _time("00:00" if text.lower() == "midnight" else "12:00", text=text)
    if name in ("date md", "date dm"):
        day = int(g["d"])
        if not 1 <= day <= 31:
            return None
        month = _month_number(g["mon"])
        return Value("date", frozenset({f"d{month:02d}-{day:02d}"}), frozenset({str(day)}), False, text)
    if name == "month":
        if g["mon"].lower() == "may" or g["mon"].lower().rstrip(".") in ("mar", "jan", "dec", "sep"):
            # "may" is a verb far more often than a month; short forms alone are too ambiguous
            return None
        return Value("date", frozenset({f"mon{_month_number(g['mon']):02d}"}), frozenset(), False, text)
    if name == "weekday":
        return Value("weekday", frozenset({f"wd{_WEEKDAYS.index(g['wd'].lower()) + 1}"}), frozenset(), False, text)
    if name == "money sign":
        sign_amount = float(g["n"].replace(",", ""))
        mult = (g.get("mult") or "").lower()
        sign_amount *= {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6}.get(mult, 1)
        return _money(sign_amount, False, text)
    if name == "money word":
        amount = _number(g["n"])
        return None if amount is None else _money(amount, g["cur"].lower() in ("cent", "cents", "pence", "p"), text)
    if name == "percent":
        amount = _number(g["n"])
        return None if amount is None else Value("percent", frozenset({_plain(amount) + "%"}), frozenset({_plain(amount)}), False, text, amount)
    if name == "half":
        return Value("percent", frozenset({"50%"}), frozenset({"0.5", "50"}), True, text)
    if name == "duration":
        amount = _number(g["n"])
        return None if amount is None else _duration(amount, g["unit"], False, text)
    if name == "a unit":
        if g["a"].lower() == "one":
            return _duration(1, g["unit"], False, text)
        return _duration(1, g["unit"], True, text)
    if name == "fortnight":
        return _duration(1, "fortnight", False, text)
    if name == "number":
        amount = _number(g["n"] or g["w"])
        if amount is None:
            return None
        return Value("number", frozenset({_plain(amount)}), frozenset({_plain(amount)}), False, text, amount)
    return None  # pragma: no cover - every pattern name is handled above


@lru_cache(maxsize=8192)
def read_values(text: str) -> tuple[str, tuple[Value, ...]]:
    """``text`` with each value replaced by ``qv<i>x``, and the values in order of appearance."""
    values: list[Value] = []
    spans: list[tuple[int, int, int]] = []  # start, end, value index
    taken = [False] * len(text)
    for name, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(taken[start:end]):
                continue
            value = _value(name, match)
            if value is None:
                continue
            for i in range(start, end):
                taken[i] = True
            if _APPROXIMATELY.search(text[max(0, start - 20) : start]):
                value = replace(value, approximate=True)
            spans.append((start, end, len(values)))
            values.append(value)
    ordered = sorted(spans)
    pieces: list[str] = []
    position = 0
    order: list[Value] = []
    for start, end, index in ordered:
        pieces.append(text[position:start])
        pieces.append(f" {PLACEHOLDER}{len(order)}x ")
        order.append(values[index])
        position = end
    pieces.append(text[position:])
    return "".join(pieces), tuple(order)


def same_value(a: Value, b: Value) -> bool:
    """The two values are one: their keys meet, or one side has no unit and the plain numbers meet,
    or a month alone meets a date in that month, or an approximate value is within APPROXIMATE."""
    if a.keys & b.keys:
        return True
    if a.kind == "number" or b.kind == "number":
        if a.bare & b.bare:
            return True
    elif a.kind != b.kind:
        return False
    if a.kind == b.kind == "date":
        months = [{key[1:3] if key.startswith("d") else key[3:] for key in v.keys} for v in (a, b)]
        alone = [any(key.startswith("mon") for key in v.keys) for v in (a, b)]
        return any(alone) and bool(months[0] & months[1])
    if (a.approximate or b.approximate) and a.magnitude is not None and b.magnitude is not None:
        return abs(a.magnitude - b.magnitude) <= APPROXIMATE * max(abs(a.magnitude), abs(b.magnitude))
    return False
