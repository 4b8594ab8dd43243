"""What every loader of user-written JSON (and YAML) data checks before using it.

Python's JSON reader fails in more ways than ``JSONDecodeError``: a number with more
than 4300 digits is a plain ``ValueError``, deep nesting a ``RecursionError``. And
some data it accepts cannot be used: a lone surrogate (``"\\ud800"``) cannot be
stored in SQLite or printed, data nested hundreds of levels deep breaks copying and
serialising it later, and YAML aliases can expand a small file into billions of
values. The loaders (golden sets, qrels, configs, exported runs, promote bodies)
turn each of these into their own one-message error, naming the field.

A reviewer's name (a promote's ``correctedBy``, ``--by``) is checked by :func:`reviewer_name`
wherever one is accepted, over HTTP and on the command line alike. And a loader builds what it reads
with the cyclic garbage collector paused (:func:`gc_paused`).

This module never imports pytest.
"""

from __future__ import annotations

import gc
import json
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "KEY_AUTHOR",
    "MAX_DEPTH",
    "MAX_NAME_LENGTH",
    "MAX_VALUES",
    "control_character_problem",
    "gc_paused",
    "json_problem",
    "key_author",
    "reviewer_name",
    "shown",
    "value_problem",
]

#: Deepest nesting accepted in user data (an item's metadata, a config's own keys).
MAX_DEPTH = 100
#: Most values accepted in one record (only YAML aliases can reach it from a small file).
MAX_VALUES = 100_000


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a loader builds what it read (golden items and their tests,
    TREC runs, stored runs), and switch it back on only if it was on.

    What a loader builds cannot form a cycle and outlives the loading, yet the collections its allocation
    triggers walk it again and again while it grows (a third of the time of reading a TREC run of a
    million lines). Paused, it is walked once, by the first collection after.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def json_problem(exc: BaseException) -> str:
    """What went wrong, for an exception ``json.loads`` raised (JSONDecodeError, ValueError, RecursionError)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply for the JSON reader"
    if "digits" in str(exc):
        return "a number has too many digits (at most 4300)"
    return str(exc).split("\n")[0]


def value_problem(value: Any, *, max_depth: int = MAX_DEPTH, max_values: int | None = MAX_VALUES) -> tuple[list[str | int], str] | None:
    """(location, problem) of the first value that cannot be used, else None.

    Problems: a string or key holding a lone surrogate, binary data, nesting deeper
    than ``max_depth``, more than ``max_values`` values. The location is a list of
    keys and indexes (shortened to its first three parts for deep nesting).
    """
    stack: list[tuple[Any, list[str | int], int]] = [(value, [], 1)]
    seen = 0
    while stack:
        node, loc, depth = stack.pop()
        seen += 1
        if max_values is not None and seen > max_values:
            return loc[:3], f"more than {max_values} values (YAML aliases expanding?)"
        if isinstance(node, str):
            if _has_surrogate(node):
                return loc, f"not valid Unicode (a lone surrogate {_first_surrogate(node)})"
        elif isinstance(node, (bytes, bytearray)):
            return loc, "binary data: expected text"
        elif isinstance(node, (dict, list, tuple)):
            if depth > max_depth:
                return loc[:3], f"nested more than {max_depth} levels deep"
            if isinstance(node, dict):
                children = []
                for key, child in node.items():
                    if isinstance(key, str) and _has_surrogate(key):
                        return [*loc, key], f"not valid Unicode (a lone surrogate {_first_surrogate(key)} in a key)"
                    children.append((child, [*loc, key], depth + 1))
            else:
                children = [(child, [*loc, index], depth + 1) for index, child in enumerate(node)]
            stack.extend(reversed(children))
    return None


def control_character_problem(value: Any) -> tuple[list[str | int], str] | None:
    """(location, problem) of the first string or key holding a control character other than tab,
    newline and carriage return (NUL, escape, DEL, the C1 range), else None. For text that is stored
    and shown again later (a promoted correction): such a character truncates it in C tools, or
    rewrites the terminal it is printed on. ``value`` must already pass :func:`value_problem`."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        node, loc = stack.pop()
        if isinstance(node, str):
            found = _first_control(node)
            if found:
                return loc, f"control character {found} (text may hold tabs and newlines, no other control character)"
        elif isinstance(node, dict):
            for key in node:
                found = _first_control(key) if isinstance(key, str) else None
                if found:
                    return [*loc, key], f"control character {found} in a key"
            stack.extend((child, [*loc, key]) for key, child in reversed(list(node.items())))
        elif isinstance(node, (list, tuple)):
            stack.extend((child, [*loc, index]) for index, child in reversed(list(enumerate(node))))
    return None


def _first_control(text: str) -> str | None:
    """The first control character of ``text`` other than tab, LF and CR, as ``\\uXXXX``; None without one."""
    if text.isprintable():  # the common case, in C
        return None
    return next((f"\\u{ord(c):04x}" for c in text
                 if (ord(c) < 0x20 and c not in "\t\n\r") or 0x7F <= ord(c) <= 0x9F), None)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _first_surrogate(text: str) -> str:
    return next(f"\\u{ord(c):04x}" for c in text if 0xD800 <= ord(c) <= 0xDFFF)


def shown(text: Any) -> str:
    """``text`` as it can appear inside a one-line message: control characters and lone surrogates escaped."""
    text = str(text)
    return text if text.isprintable() else json.dumps(text)[1:-1]


# -- reviewers' names ----------------------------------------------------------------------------------
#: Longest reviewer name accepted, in characters once NFKC-normalised.
MAX_NAME_LENGTH = 100
#: How an API key is named as an author (``key:<id>``): a name a caller chooses may not read as one.
KEY_AUTHOR = "key:"
# Letters of these scripts look alike (Latin e, Cyrillic U+0435, Greek U+03B5): a name mixing them may pass for another.
_CONFUSABLE_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK")
# Look-alikes NFKC leaves as they are, of the letters and the colon of "key:" (after casefolding).
_LOOKALIKES = str.maketrans({
    "\u043a": "k", "\u03ba": "k", "\u0138": "k", "\u1d0b": "k", "\u049b": "k", "\u049d": "k", "\u04a1": "k",
    "\u0435": "e", "\u0450": "e", "\u0451": "e", "\u03b5": "e", "\u0454": "e", "\u04bd": "e", "\u1d07": "e",
    "\u0443": "y", "\u04af": "y", "\u04b1": "y", "\u03b3": "y", "\u03c5": "y", "\u028f": "y", "\u045e": "y",
    "\u2236": ":", "\ua789": ":", "\u02f8": ":", "\u02d0": ":", "\u0589": ":", "\u05c3": ":", "\u16ec": ":",
    "\u205a": ":", "\u1361": ":", "\u0703": ":", "\u0704": ":", "\u2806": ":", "\u22ee": ":",
})
# Characters no name needs, and which hide what a name shows: controls (tab and newline too), format
# characters (zero-width spaces and joiners, direction overrides), private-use, unassigned, line and
# paragraph separators.
_INVISIBLE = {"Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp"}


def _skeleton(name: str) -> str:
    """What ``name`` reads as: casefolded, accents, spaces and invisible characters dropped, look-alikes
    of k, e, y and the colon mapped to them. Only ever compared with :data:`KEY_AUTHOR`."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", name).casefold())
    kept = "".join(c for c in text if not c.isspace() and unicodedata.category(c) not in _INVISIBLE | {"Mn", "Me"})
    return kept.translate(_LOOKALIKES)


def key_author(key_id: str) -> str:
    """How the API key ``key_id`` is named as an author: ``key:<id>``."""
    return f"{KEY_AUTHOR}{key_id}"


def reviewer_name(text: str, *, acting_key_id: str | None = None) -> str:
    """``text`` as a reviewer's name is kept: NFKC-normalised, surrounding whitespace removed.

    Raises ValueError (the problem, one line) for a name that could not tell people apart or passes for
    another: empty or only whitespace; longer than :data:`MAX_NAME_LENGTH` characters; holding an
    invisible character (a control, tab or newline included, a zero-width or direction mark); mixing
    Latin with Cyrillic or Greek letters (look-alikes: ``key`` with a Cyrillic e); or reading as an API key's name,
    ``key:...``, in any case, width, spacing or look-alike letters. Only the key that is sending the
    request (``acting_key_id``) may be named that way, and is then kept as exactly ``key:<its id>``.
    """
    name = unicodedata.normalize("NFKC", text).strip()
    if not name:
        raise ValueError("is empty: name the reviewer")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"is {len(name)} characters long; a reviewer's name has at most {MAX_NAME_LENGTH}")
    hidden = next((c for c in name if unicodedata.category(c) in _INVISIBLE), None)
    if hidden is not None:
        what = unicodedata.name(hidden, "a control character")
        raise ValueError(f"holds the invisible character U+{ord(hidden):04X} ({what}); a name is one line of visible text")
    scripts = sorted({script for c in name if c.isalpha()
                      for script in [unicodedata.name(c, "").split(" ")[0]] if script in _CONFUSABLE_SCRIPTS})
    if len(scripts) > 1:
        raise ValueError(f"mixes {' and '.join(s.title() for s in scripts)} letters (letters that look alike "
                         "could pass for another name); write it in one script")
    if _skeleton(name).startswith(KEY_AUTHOR):
        if acting_key_id is not None and _skeleton(name) == _skeleton(key_author(acting_key_id)):
            return key_author(acting_key_id)
        what = "names another API key" if acting_key_id is not None else "names an API key"
        raise ValueError(f"{what} ({shown(name)}): {KEY_AUTHOR}<id> is how the key that sent a promote is recorded")
    return name


def jsonl_object(text: str, fail: Callable[[str, str, str], Exception], *, example: str, object_hint: str,
                 plain_hint: str) -> dict[str, Any]:
    """One line of a .jsonl file as a JSON object of plain values, or ``fail(field, problem, hint)``
    raised: not JSON, not an object, or a value no loader can use (see :func:`value_problem`)."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise fail("json", f"not valid JSON ({json_problem(exc)})", f"one JSON object per line, e.g. {example}") from None
    if not isinstance(obj, dict):
        raise fail("json", f"expected a JSON object, got {type(obj).__name__}", object_hint)
    unusable = value_problem(obj)
    if unusable is not None:
        loc, problem = unusable
        raise fail(".".join(map(str, loc)) or "json", problem, plain_hint)
    return obj

