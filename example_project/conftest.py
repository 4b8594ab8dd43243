"""Wire the Northwind helpdesk into pytest-crucible.

The plugin collects every ``golden_*.jsonl`` file (see pytest.ini) and calls the
``crucible_pipeline`` fixture once per golden item.
"""

from pathlib import Path

import pytest

from helpdesk import HelpdeskRAG


@pytest.fixture(scope="session")
def crucible_pipeline():
    return HelpdeskRAG.from_directory(Path(__file__).parent / "corpus")
