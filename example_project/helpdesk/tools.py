"""The help desk's tools: the account and store systems an answer may need besides the knowledge base.

The tools themselves are not part of this example (there is no order system behind it); the planner decides
which calls a question needs and with which arguments, and the pipeline returns them as ``tool_calls`` in the
order it would make them, for the evaluation to compare with a golden item's ``expectedTools``. The planner
reads the question only (never the golden item) with a few fixed rules:

* an order number (``NW-`` and five digits)                     -> ``lookup_order(order_id)``;
* "in stock" with a bike model and a store's city               -> ``check_stock(product, store)``;
* "book" with "service" or "appointment" (and a city, if named) -> ``find_service_centre(city)``, then
  ``book_service(bike)``.

It knows no reservation tool: a request to hold a bike in a store gets its stock check and nothing more
(golden_tools.jsonl's tl-004 expects the hold, so the gap shows in the run).
"""

from __future__ import annotations

import re
from typing import Any

BIKES = ("Vela E2", "Vela E3", "Kestrel Trail", "Atlas Cargo", "Fold F1", "Strada Road")
# The cities of the eight stores (corpus/co-stores.md); the service centres are listed by city too.
STORES = ("Utrecht", "Amsterdam", "Rotterdam", "Antwerp", "Cologne", "Berlin", "London", "Manchester")
ORDER_NUMBER = re.compile(r"\bNW-\d{5}\b")


def _first(names: tuple[str, ...], question: str) -> str | None:
    """The name of ``names`` mentioned first in the question (as written in ``names``), or None."""
    found = [(match.start(), name) for name in names if (match := re.search(rf"\b{re.escape(name)}\b", question, re.IGNORECASE))]
    return min(found)[1] if found else None


def plan_tool_calls(question: str) -> list[dict[str, Any]]:
    """The tool calls a question needs, in the order they would be made (empty for most questions)."""
    lowered = question.lower()
    bike, city = _first(BIKES, question), _first(STORES, question)
    calls: list[dict[str, Any]] = []
    order = ORDER_NUMBER.search(question)
    if order:
        calls.append({"name": "lookup_order", "arguments": {"order_id": order.group()}})
    if "in stock" in lowered and bike and city:
        calls.append({"name": "check_stock", "arguments": {"product": bike, "store": city}})
    if re.search(r"\bbook\b", lowered) and ("service" in lowered or "appointment" in lowered):
        if city:
            calls.append({"name": "find_service_centre", "arguments": {"city": city}})
        calls.append({"name": "book_service", "arguments": {"bike": bike} if bike else {}})
    return calls
