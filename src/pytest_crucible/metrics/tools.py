"""Tool calls of an agentic system against the calls a golden item expects: the matching, the metrics, and
the alignment a report shows.

A call is plain data, ``{"name": str, "arguments": {...}}`` (what ``PipelineResult.tool_calls`` holds, and
what a golden item's ``expectedTools`` holds, ``arguments`` optional there). The vocabulary of the four
trajectory modes (strict, unordered, subset, superset) is the one LangChain's agentevals made common; the
definitions below are this module's own.

**When a call matches an expectation.** The names are equal, and every argument the expectation names is in
the call with an equal value (:func:`same_value`: JSON equality, so ``1`` equals ``1.0`` but never ``true``,
strings are compared exactly, objects and lists all the way down). Arguments the expectation does not name
are allowed, so an expectation without ``arguments`` matches any call of that name.

**One to one.** Each actual call satisfies at most one expectation and each expectation is satisfied by at
most one call. Which call goes with which expectation is a maximum bipartite matching
(:func:`maximum_matching`, augmenting paths), not a greedy first fit: with the expectations
``[lookup(), lookup(city="Leeds")]`` and the calls ``[lookup(city="Leeds"), lookup(city="York")]``, first
fit gives the Leeds call to the first (any-argument) expectation and leaves the second unmatched, while two
matches exist. The size of a maximum matching does not depend on the order of either list, so neither do
the metrics but ``trajectoryMatch`` in strict mode, whose point is the order.

Per item with ``expectedTools`` (E expected calls, A actual calls, M the size of a maximum matching):

- ``toolCallRecall`` = M / E; 1 when E = 0 (nothing was expected, so nothing was missed, whatever was called);
- ``toolCallPrecision`` = M / A; when A = 0: 1 if E = 0 too (nothing expected, nothing called), else 0
  (calls were expected and none was made). With E = 0 and A > 0 it is 0 by the formula: every call was
  unexpected;
- ``trajectoryMatch`` = 1 or 0 by the item's ``toolMatch``: ``strict``: A = E and the i-th call matches the
  i-th expectation; ``unordered``: M = A = E (one matching covers both lists); ``subset``: M = A (every call
  matches a distinct expectation; no call at all is a subset); ``superset``: M = E (every expectation is
  met by a distinct call);
- ``toolCalls`` = A.

So ``unordered`` holds exactly when ``subset`` and ``superset`` both do, ``strict`` implies ``unordered``,
``superset`` is ``toolCallRecall`` = 1, and ``unordered`` is recall = precision = 1.

Pure: no pytest, no pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# The item's toolMatch values, the default first (the golden schema's Literal lists the same).
MATCH_MODES = ("strict", "unordered", "subset", "superset")
RECALL, PRECISION, TRAJECTORY, CALLS, STEPS = "toolCallRecall", "toolCallPrecision", "trajectoryMatch", "toolCalls", "retrievalSteps"

Call = Mapping[str, Any]


def same_value(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal as JSON: numbers by value (1 == 1.0), a boolean only to a boolean,
    strings exactly, lists item by item, objects key by key; null only to null."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same_value(value, b[key]) for key, value in a.items())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _arguments(call: Call) -> Mapping[str, Any]:
    arguments = call.get("arguments")
    return arguments if isinstance(arguments, Mapping) else {}


def call_matches(expected: Call, call: Call) -> bool:
    """Whether ``call`` satisfies ``expected``: the same name, and every argument ``expected`` names present
    in the call with an equal value (:func:`same_value`); the call's other arguments are allowed."""
    if expected.get("name") != call.get("name"):
        return False
    given = _arguments(call)
    return all(key in given and same_value(value, given[key]) for key, value in _arguments(expected).items())


def argument_differences(expected: Call, call: Call) -> list[dict[str, Any]]:
    """The arguments ``expected`` names that ``call`` lacks or gives another value: ``{"argument",
    "expected", "actual", "missing"}`` each, in the expectation's order (empty: the call matches)."""
    given = _arguments(call)
    return [{"argument": key, "expected": value, "actual": given.get(key), "missing": key not in given}
            for key, value in _arguments(expected).items() if key not in given or not same_value(value, given[key])]


def maximum_matching(expected: Sequence[Call], actual: Sequence[Call]) -> dict[int, int]:
    """A maximum one-to-one matching of expectations to the calls that satisfy them: expected index -> actual
    index. It starts from the pairs in place (the i-th call meeting the i-th expectation) and grows by
    augmenting paths (Kuhn's algorithm, iterative) from each expectation left over, trying the calls in
    order: a maximum matching, and when the lists line up, the one that pairs them in place."""
    edges = [[j for j, call in enumerate(actual) if call_matches(wanted, call)] for wanted in expected]
    owner = {i: i for i in range(min(len(expected), len(actual))) if i in edges[i]}  # actual index -> expected index
    paired = set(owner.values())  # the expectations the matching covers (an augmenting path only ever adds its start)
    for start in range(len(expected)):
        if start in paired:
            continue
        seen: set[int] = set()
        # A depth-first search for an augmenting path: a stack of (expected, next edge to try), and the
        # (expected, actual) edges of the path so far, one per stack entry below the top.
        stack: list[tuple[int, int]] = [(start, 0)]
        path: list[tuple[int, int]] = []
        while stack:
            node, edge = stack.pop()
            while edge < len(edges[node]) and edges[node][edge] in seen:
                edge += 1
            if edge == len(edges[node]):  # a dead end: back up one edge
                if path:
                    path.pop()
                continue
            call = edges[node][edge]
            seen.add(call)
            stack.append((node, edge + 1))
            path.append((node, call))
            if call not in owner:  # a free call: every edge of the path changes hands
                for wanted, taken in path:
                    owner[taken] = wanted
                paired.add(start)
                break
            stack.append((owner[call], 0))
    return {wanted: call for call, wanted in owner.items()}


def trajectory_match(expected: Sequence[Call], actual: Sequence[Call], mode: str = "strict",
                     matched: int | None = None) -> bool:
    """Whether the calls made match the expected trajectory in ``mode`` (see the module docstring);
    ``matched``: the size of a maximum matching, when the caller has it."""
    if mode == "strict":
        return len(expected) == len(actual) and all(call_matches(wanted, call) for wanted, call in zip(expected, actual))
    if mode not in MATCH_MODES:
        raise ValueError(f"unknown toolMatch {mode!r}: expected one of {', '.join(MATCH_MODES)}")
    m = len(maximum_matching(expected, actual)) if matched is None else matched
    if mode == "unordered":
        return m == len(expected) == len(actual)
    if mode == "subset":
        return m == len(actual)
    return m == len(expected)  # superset


def tool_metrics(expected: Sequence[Call], actual: Sequence[Call], mode: str = "strict") -> dict[str, float]:
    """``toolCallRecall``, ``toolCallPrecision``, ``trajectoryMatch`` and ``toolCalls`` of one item (the
    definitions and their corner cases are in the module docstring)."""
    m = len(maximum_matching(expected, actual))
    recall = m / len(expected) if expected else 1.0
    precision = m / len(actual) if actual else (0.0 if expected else 1.0)
    return {RECALL: recall, PRECISION: precision,
            TRAJECTORY: 1.0 if trajectory_match(expected, actual, mode, matched=m) else 0.0, CALLS: float(len(actual))}


def _in_order(positions: Sequence[int]) -> set[int]:
    """The indices of a longest increasing run of ``positions`` (not necessarily contiguous; the earliest
    such choice): the matched calls that keep the expected order."""
    best: list[int] = []  # best[i]: the length of the longest increasing run ending at i
    before: list[int | None] = []
    for i, position in enumerate(positions):
        prior = [q for q in range(i) if positions[q] < position]
        q = max(prior, key=lambda q: (best[q], -q), default=None)
        best.append(best[q] + 1 if q is not None else 1)
        before.append(q)
    kept: set[int] = set()
    last: int | None = max(range(len(positions)), key=lambda i: (best[i], -i), default=None)
    while last is not None:
        kept.add(last)
        last = before[last]
    return kept


def aligned_calls(expected: Sequence[Call], actual: Sequence[Call], mode: str = "strict") -> list[dict[str, Any]]:
    """The calls beside the expectations, for a report: one row per expectation in its order, then one per
    call no expectation took, in the order made. A row holds ``expected`` (the expectation, or None),
    ``actual`` (the call, or None), ``position`` (the call's 1-based place among the calls made, or None),
    ``differences`` and ``status``:

    - ``match``: the call meets the expectation (the maximum matching paired them);
    - ``out_of_order`` (strict mode only): it meets it, but comes before a call that meets an earlier
      expectation (the matched calls outside a longest run that keeps the expected order);
    - ``arguments_differ``: no call meets the expectation, and a call of the same name that no expectation
      took is shown beside it, with ``differences`` (:func:`argument_differences`);
    - ``missing``: an expectation no call meets; ``unexpected``: a call no expectation took.
    """
    matching = maximum_matching(expected, actual)
    matched = sorted(matching)
    kept = {matched[k] for k in _in_order([matching[i] for i in matched])} if mode == "strict" else set(matched)
    spare = [j for j in range(len(actual)) if j not in set(matching.values())]
    rows = []
    for i, wanted in enumerate(expected):
        if i in matching:
            j = matching[i]
            rows.append({"expected": wanted, "actual": actual[j], "position": j + 1,
                         "status": "match" if i in kept else "out_of_order", "differences": []})
            continue
        same_name = next((j for j in spare if actual[j].get("name") == wanted.get("name")), None)
        if same_name is None:
            rows.append({"expected": wanted, "actual": None, "position": None, "status": "missing", "differences": []})
            continue
        spare.remove(same_name)
        rows.append({"expected": wanted, "actual": actual[same_name], "position": same_name + 1, "status": "arguments_differ",
                     "differences": argument_differences(wanted, actual[same_name])})
    rows.extend({"expected": None, "actual": actual[j], "position": j + 1, "status": "unexpected", "differences": []}
                for j in spare)
    return rows
