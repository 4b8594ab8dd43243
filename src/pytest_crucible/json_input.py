"""What every loader of user-written JSON (and YAML) data checks before using it.

Python's JSON reader fails in more ways than ``JSONDecodeError``: a number with more
than 4300 digits is a plain ``ValueError``, deep nesting a ``RecursionError``. And
some data it accepts cannot be used: a lone surrogate (``"\\ud800"``) cannot be
stored in SQLite or printed, data nested hundreds of levels deep breaks copying and
serialising it later, and YAML aliases can expand a small file into billions of
values. The loaders (golden sets, qrels, configs, exported runs, promote bodies)
turn each of these into their own one-message error, naming the field.

This module never imports pytest.
"""

from __future__ import annotations

import json
from typing import Any, Callable

__all__ = ["MAX_DEPTH", "MAX_VALUES", "json_problem", "value_problem", "control_character_problem", "shown"]

#: Deepest nesting accepted in user data (an item's metadata, a config's own keys).
MAX_DEPTH = 100
#: Most values accepted in one record (only YAML aliases can reach it from a small file).
MAX_VALUES = 100_000


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

