"""Wire the Northwind helpdesk into pytest-crucible.

The plugin collects every ``golden_*.jsonl`` file (see pytest.ini) and calls the
``crucible_pipeline`` fixture once per golden item. ``citesSuperseded`` below is a
metric of this help desk's own (docs/custom-metrics.md); the rubric metric is in
rubrics.json, named by ``crucible_rubrics`` in pytest.ini.
"""

from pathlib import Path

import pytest
from helpdesk import HelpdeskRAG

import pytest_crucible as crucible


@pytest.fixture(scope="session")
def crucible_pipeline():
    return HelpdeskRAG.from_directory(Path(__file__).parent / "corpus")


@crucible.metric("citesSuperseded", better="lower")
def cites_superseded(item, result, *, config):
    """1 when the answer cites a chunk of a document that has been replaced (an old price list, the
    previous returns policy), 0 when every chunk it cites is current. None when it cites nothing (an
    abstention, a blocked question, component mode): nothing was quoted, so the item is left out."""
    cited = set(result.cited_chunk_ids())
    if not cited:
        return None
    return any(chunk.metadata.get("superseded_by") for chunk in result.retrieved if chunk.chunk_id in cited)
