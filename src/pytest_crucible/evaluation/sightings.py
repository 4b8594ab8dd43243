"""Which cited chunks a run's rankings ever contained: a required citation that no item's ranking held in a
whole run is most often a wrong id (a typo, a chunk renamed when the corpus was re-split), not a retrieval
miss, and the summary says so once (``crucible golden check --corpus`` finds them before a run).

Fed with every recorded score, on the process that records (the controller under xdist); holds the ids only.
Pure: no pytest, no store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Below this many items a never-retrieved citation is as likely an ordinary miss: no hint.
MIN_ITEMS = 10
SHOWN = 5


class CitationSightings:
    def __init__(self) -> None:
        self.items = 0
        self.retrieved: set[str] = set()
        self.cited: dict[str, str] = {}  # required cited chunk id -> the first item citing it

    def add(self, score: Mapping[str, Any]) -> None:
        """One scored item: its ranking's chunk ids, and the chunk ids its required citations name."""
        if score.get("error"):
            return  # no ranking to count
        self.items += 1
        self.retrieved.update(str(chunk.get("chunk_id")) for chunk in score.get("retrieved") or [] if isinstance(chunk, Mapping))
        item = score.get("item") or {}
        for citation in item.get("citations") or [] if isinstance(item, Mapping) else []:
            if isinstance(citation, Mapping) and citation.get("chunkId") and citation.get("mode", "required") == "required":
                self.cited.setdefault(str(citation["chunkId"]), str(item.get("id")))

    def never_retrieved(self) -> list[tuple[str, str]]:
        """(chunk id, an item citing it) of the required citations no ranking contained; empty below MIN_ITEMS."""
        if self.items < MIN_ITEMS:
            return []
        return sorted((chunk, item) for chunk, item in self.cited.items() if chunk not in self.retrieved)

    def hint(self) -> str | None:
        missing = self.never_retrieved()
        if not missing:
            return None
        shown = ", ".join(f"{chunk} ({item})" for chunk, item in missing[:SHOWN]) + (", ..." if len(missing) > SHOWN else "")
        return (f"NOTE cited but never retrieved by any item: {shown}: check the id "
                "(crucible golden check FILE --corpus CHUNKS compares every citation with the corpus)")
